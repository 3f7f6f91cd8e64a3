"""Whether a result costs more as tournaments end (issue 33): one `podium serve` (every role,
the freezer included), one live tournament of the mode the matches are of, and 0, then
1,000, then 10,000 tournaments of the same mode that ended two days ago (never played in),
created through the admin API between the measures. At each count, after the server has
gone quiet (the freezer's first pass over the new ones done, or ``--settle-wait`` spent),
the same closed loop submits ``--matches`` 2-player matches one after another and prints
the client's median and p90 latency and the server's CPU per match. The reference is the
same loop at 0 ended tournaments, in the same server, at the start of the run: each later
figure is printed beside it, as a ratio.

    python benchmarks/tournaments_ended.py --config embedded      # SQLite + in-process index
    python benchmarks/tournaments_ended.py --config production    # Postgres + Redis

``--counts`` changes the counts (cumulative: 0,1000,10000). Two codes are compared by
running each pinned with ``PYTHONPATH`` (the tournaments are made through the API, so any
revision with tournaments runs it). Everything it creates is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import secrets
import statistics
import time
from typing import Any

from _harness import (
    OPS_KEY,
    PG_DB,
    CpuMeter,
    Env,
    _cli_key,
    bench_main,
    common_args,
    http_client,
    player_id,
    podium_server,
    rfc3339_now,
    save_json,
    wait_quiet,
)

DAY = 86_400


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", choices=["embedded", "production"], default="embedded")
    p.add_argument("--counts", default="0,1000,10000", help="ended tournaments, cumulative")
    p.add_argument("--matches", type=int, default=400, help="matches submitted per count")
    p.add_argument("--warmup", type=int, default=50, help="matches submitted before each count")
    p.add_argument("--pool", type=int, default=10_000, help="distinct players drawn from")
    p.add_argument(
        "--settle-wait",
        type=float,
        default=90.0,
        help="at most this long for the server to go quiet after the tournaments are made",
    )
    common_args(p, wait_s=120, unit="count")
    return p.parse_args()


def _time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


async def make_tournaments(url: str, admin: str, first: int, n: int, ended: bool) -> None:
    """``n`` tournaments of mode default, ids from ``first``: ended two days ago, or live."""
    now = time.time()
    start, end = (now - 3 * DAY, now - 2 * DAY) if ended else (now - 60, now + DAY)
    headers = {"Authorization": f"Bearer {admin}", "Content-Type": "application/json"}
    async with http_client(url, 8) as client:

        async def one(i: int) -> None:
            body = {
                "id": f"{'ended' if ended else 'live'}-{i}",
                "title": f"Bench {i}",
                "modes": ["default"],
                "startsAt": _time(start),
                "endsAt": _time(end),
            }
            r = await client.post("/v1/admin/tournaments", json.dumps(body).encode(), headers)
            assert r.status_code == 201, r.content

        for lo in range(first, first + n, 64):
            await asyncio.gather(*(one(i) for i in range(lo, min(lo + 64, first + n))))


async def quiet_server(pid: int, wait_s: float) -> float:
    """Wait (up to ``wait_s``) for two seconds in which the server used under a fifth of a
    core; returns the seconds waited (``wait_s``: it never went quiet)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < wait_s:
        cpu = CpuMeter({"server": pid}, PG_DB["name"])
        cpu.begin()
        await asyncio.sleep(2.0)
        if cpu.end()["server"] < 0.2:
            return time.perf_counter() - t0
    return wait_s


async def measure(
    url: str, pid: int, key: str, args: argparse.Namespace, rng: random.Random
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    tag = f"m{secrets.token_hex(4)}"
    async with http_client(url, 1) as client:

        async def submit(i: int) -> float:
            players = [player_id(n) for n in rng.sample(range(args.pool), 2)]
            body = {
                "mode": "default",
                "endedAt": rfc3339_now(),
                "durationSeconds": 60,
                "results": [{"playerId": p, "points": rng.randint(1, 1000)} for p in players],
            }
            t = time.perf_counter()
            r = await client.post(
                f"/v1/matches/{tag}-{i}/results", json.dumps(body).encode(), headers
            )
            took = time.perf_counter() - t
            assert r.status_code == 200, r.content
            assert b'"live-0"' in r.content, r.content  # counted for the live tournament
            return took

        for i in range(args.warmup):
            await submit(-1 - i)
        cpu = CpuMeter({"server": pid}, PG_DB["name"])
        cpu.begin()
        took = [await submit(i) for i in range(args.matches)]
        cores = cpu.end()
    took.sort()
    return {
        "median_ms": 1000 * statistics.median(took),
        "p90_ms": 1000 * took[int(0.9 * (len(took) - 1))],
        "server_cpu_ms_per_match": 1000 * cores["server"] * cpu.wall / len(took),
        "cpu": cores,
    }


async def bench(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    game = _cli_key(env, "bench", "--modes", "default")
    admin = _cli_key(env, "bench-admin", "--admin")
    OPS_KEY["key"] = _cli_key(env, "bench-ops", "--ops")
    pod = podium_server(stack, env, args.profile.resolve() if args.profile else None)
    print(f"podium ready in {await pod.wait_ready():.1f} s (pid {pod.pid})")
    await make_tournaments(pod.url, admin, 0, 1, ended=False)
    rng = random.Random(1)
    counts = [int(c) for c in args.counts.split(",")]
    made, figures = 0, []
    for count in counts:
        t0 = time.perf_counter()
        await make_tournaments(pod.url, admin, made, count - made, ended=True)
        created = time.perf_counter() - t0
        made = count
        waited = await quiet_server(pod.pid, args.settle_wait)
        busy = await wait_quiet(args.quiet, 120.0)
        out = await measure(pod.url, pod.pid, game, args, rng)
        out |= {"ended": count, "create_s": created, "quiet_after_s": waited, "busy": busy}
        figures.append(out)
        quiet = "never" if waited >= args.settle_wait else f"{waited:.0f} s"
        print(
            f"{count:>6} ended (made in {created:.1f} s, server quiet after {quiet}): "
            f"submit median {out['median_ms']:.2f} ms, p90 {out['p90_ms']:.2f} ms, "
            f"server CPU {out['server_cpu_ms_per_match']:.2f} ms/match",
            flush=True,
        )
    ref = figures[0]
    print(
        f"\n{'ended tournaments':>18}{'submit median':>16}{'ratio':>8}{'CPU/match':>12}{'ratio':>8}"
    )
    for f in figures:
        print(
            f"{f['ended']:>18,}{f['median_ms']:>13.2f} ms{f['median_ms'] / ref['median_ms']:>8.2f}"
            f"{f['server_cpu_ms_per_match']:>9.2f} ms"
            f"{f['server_cpu_ms_per_match'] / ref['server_cpu_ms_per_match']:>8.2f}"
        )
    print(f"(reference: the first line, {ref['ended']} ended, same server, same run)")
    save_json(args, figures=figures)


def main() -> None:
    args = parse_args()
    header = (
        f"config {args.config}; ended tournaments {args.counts} (cumulative), one live; "
        f"{args.matches} 2-player matches one after another per count, after {args.warmup}"
    )
    bench_main(args, header, bench)


if __name__ == "__main__":
    main()
