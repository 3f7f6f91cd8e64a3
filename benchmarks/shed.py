"""Results before reads: accepting results while readers push the same process past its read
capacity, with the load gate shedding reads (``server.shed_reads``) and without.

    python benchmarks/shed.py                       # production: Postgres + Redis
    python benchmarks/shed.py --rounds 3 --duration 10

1. Preload ``--players`` players into the current window of every board (SQL tallies, then
   ``Rebuilds.rebuild`` into Redis, and a profile each: ``reads.py``'s preload).
2. Each round runs two cells, one with shedding off and one with it on, in an order that
   alternates from round to round; each cell starts its own ``podium serve`` (every role in
   one process; ``PODIUM_SERVER_SHED_READS`` says which) and stops it after:
   - an open-loop writer: ``--write-rate`` matches/s of 2 players (default 250: 500 results/s),
     fresh match ids, players drawn from the preloaded ones;
   - ``--readers`` closed-loop readers (default 64: past what one process answers, so the
     reads alone would saturate it): each read a player's rank with neighbors
     (``GET /v1/boards/week/players/{id}?neighbors=2``), or one time in ``1/--page-share``
     the top page (``GET /v1/boards/week?limit=100``). A reader answered 503 waits its
     ``Retry-After`` (1 s) before it reads again, as podium's client does.
   The first ``--warmup`` s are not counted. Printed per cell: accept p50/p99 (client, from
   the actual send; and the server's ``podium_accept_seconds``, interpolated in its
   buckets), the writes' statuses, reads answered/s and their client p99, reads shed/s (by
   class, from ``podium_reads_shed_total``), top pages served stale (``podium_reads_stale``).
3. The summary: medians and ranges over the rounds, and on/off ratios; the target is accept
   p99 under 100 ms with shedding on.

Everything it creates (the temporary directory, the Postgres database ``podium_bench_*``, the
Redis keys under ``podium-bench-*:``, the servers) is removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import secrets
import sys
import time
from typing import Any

from _harness import (
    PG_DB,
    CpuMeter,
    Env,
    Req,
    Server,
    bench_main,
    col,
    common_args,
    cpu_line,
    create_key,
    free_port,
    histogram,
    http_client,
    match_body,
    med_spread,
    ms,
    num_spread,
    open_loop,
    player_id,
    sample,
    save_json,
    scrape,
    start_server,
    summary,
    wait_quiet,
)
from reads import preload_profiles, preload_sql

CLASSES = ("far", "friends", "page", "rank")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", choices=["production"], default="production")
    p.add_argument("--players", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=3, help="rounds of (off, on), order alternating")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per cell")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--write-rate", type=float, default=250.0, help="matches/s of 2 players")
    p.add_argument("--readers", type=int, default=64, help="closed-loop readers")
    p.add_argument(
        "--alone",
        type=float,
        default=5.0,
        help="measured seconds of the writes alone on each server before its readers cell "
        "(the machine's state; 0: none)",
    )
    p.add_argument("--page-share", type=float, default=0.25, help="share of reads: top page")
    common_args(p, wait_s=30, unit="cell")
    p.set_defaults(repeat=1)
    return p.parse_args()


def podium(stack: contextlib.ExitStack, env: Env, shed: bool) -> Server:
    """``podium serve`` with every role, shedding on or off."""
    port = free_port()
    argv = [sys.executable, "-m", "podium", "serve", "--config", str(env.config_path)]
    argv += ["--port", str(port)]
    name = f"podium-shed-{'on' if shed else 'off'}-{secrets.token_hex(2)}"
    flag = {"PODIUM_SERVER_SHED_READS": "true" if shed else "false"}
    return start_server(stack, Server(name, argv, port, env.tmp / f"{name}.log", env=flag))


async def cell(
    server: Server, key: str, args: argparse.Namespace, seed: int, readers: int, duration: float
) -> dict[str, Any]:
    """The writer for ``--warmup`` + ``duration`` s beside ``readers`` closed-loop readers;
    only what starts after the warm-up counts."""
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    tag = f"s{secrets.token_hex(4)}"
    stop = asyncio.Event()
    reads: list[tuple[float, float, int]] = []  # (started, done, status)
    t_measure = 0.0

    async with (
        http_client(server.url, 128) as wclient,
        http_client(server.url, max(1, readers)) as rclient,
    ):

        async def fire(i: int, req: Req) -> str:
            ps = [player_id(x) for x in rng.sample(range(args.players), 2)]
            r = await wclient.post(
                f"/v1/matches/{tag}-{i}/results", content=match_body(ps, rng), headers=headers
            )
            return str(r.status_code)

        async def reader(n: int) -> None:
            own = random.Random(seed * 1000 + n)
            while not stop.is_set():
                if own.random() < args.page_share:
                    path = "/v1/boards/week?limit=100"
                else:
                    path = f"/v1/boards/week/players/{player_id(own.randrange(args.players))}"
                    path += "?neighbors=2"
                t0 = time.perf_counter()
                try:
                    status = (await rclient.get(path)).status_code
                except Exception:
                    status = 0
                reads.append((t0, time.perf_counter(), status))
                if status == 503:  # Retry-After: 1, as the client honours it
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 1.0)

        await wait_quiet(args.quiet, 30.0)
        tasks = [asyncio.create_task(reader(n)) for n in range(readers)]
        total = args.warmup + duration
        writer = asyncio.create_task(open_loop(args.write_rate, total, fire, drain_s=15.0))
        await asyncio.sleep(args.warmup)
        t_measure = time.perf_counter()
        mid = await scrape(wclient)
        cpu = CpuMeter({"server": server.pid}, PG_DB["name"])
        cpu.begin()
        await asyncio.sleep(duration)
        cores = cpu.end()
        t_end = time.perf_counter()
        after = await scrape(wclient)
        stop.set()
        res = await writer
        await asyncio.gather(*tasks)

    # The writes sent inside the measured window, by their intended start.
    t0w = min(r.intended for r in res.reqs)
    window = [r for r in res.reqs if r.intended - t0w >= args.warmup]
    ok = [r for r in window if r.status == "200"]
    statuses: dict[str, int] = {}
    for r in window:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    acc = histogram(after, "podium_accept_seconds") - histogram(mid, "podium_accept_seconds")
    measured = [x for x in reads if t_measure <= x[0] < t_end]
    answered = [d - s for s, d, st in measured if st == 200]
    span = t_end - t_measure
    shed = {c: sample(after, "podium_reads_shed_total", route_class=c) for c in CLASSES}
    shed0 = {c: sample(mid, "podium_reads_shed_total", route_class=c) for c in CLASSES}
    stale = sample(after, "podium_reads_stale_total") - sample(mid, "podium_reads_stale_total")
    return {
        "writes": {
            "sent": len(window),
            "ok": len(ok),
            "statuses": statuses,
            "latency": summary(r.done - r.started for r in ok),
        },
        "server_accept": {"n": acc.count, "p50": acc.quantile(0.5), "p99": acc.quantile(0.99)},
        "reads": {
            "answered_per_s": len(answered) / span,
            "shed_per_s": sum(1 for x in measured if x[2] == 503) / span,
            "other": sum(1 for x in measured if x[2] not in (200, 503)),
            "latency": summary(answered),
            "shed_by_class_per_s": {c: (shed[c] - shed0[c]) / span for c in CLASSES},
            "stale_pages_per_s": stale / span,
        },
        "cpu": cores,
    }


def print_cell(label: str, r: dict[str, Any]) -> None:
    w, sa, rd = r["writes"], r["server_accept"], r["reads"]
    lat = w["latency"]
    print(
        f"  {label}: writes {w['ok']}/{w['sent']} accepted {w['statuses']}; accept client "
        f"p50 {ms(lat['p50'])} p99 {ms(lat['p99'])} ms, server p50 {ms(sa['p50'])} "
        f"p99 {ms(sa['p99'])} ms"
    )
    by_class = ", ".join(f"{c} {v:.0f}" for c, v in rd["shed_by_class_per_s"].items() if v)
    print(
        f"    reads answered {rd['answered_per_s']:.0f}/s (client p50 "
        f"{ms(rd['latency']['p50'])} p99 {ms(rd['latency']['p99'])} ms), shed "
        f"{rd['shed_per_s']:.0f}/s ({by_class or 'none'}), top pages stale "
        f"{rd['stale_pages_per_s']:.0f}/s, other answers {rd['other']}"
    )
    print(f"    {cpu_line(r['cpu'])}", flush=True)


def print_summary(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n== summary: median [min-max] over {len(runs)} round(s); times in ms ==")
    print(
        f"{args.write_rate:.0f} matches/s x 2 = {args.write_rate * 2:.0f} results/s, "
        f"{args.readers} closed-loop readers ({args.page_share:.0%} top pages)"
    )
    print(f"{'':<26} {'shedding off':>24} {'shedding on':>24}")
    rows = [
        ("accept client p50", ("writes", "latency", "p50"), med_spread),
        ("accept client p99", ("writes", "latency", "p99"), med_spread),
        ("accept server p50", ("server_accept", "p50"), med_spread),
        ("accept server p99", ("server_accept", "p99"), med_spread),
        ("writes accepted", ("writes", "ok"), num_spread),
        ("reads answered/s", ("reads", "answered_per_s"), num_spread),
        ("read client p99", ("reads", "latency", "p99"), med_spread),
        ("reads shed/s", ("reads", "shed_per_s"), num_spread),
        ("top pages stale/s", ("reads", "stale_pages_per_s"), num_spread),
        ("server cores", ("cpu", "server"), lambda v: num_spread(v, "{:.2f}")),
        ("others' cores (noise)", ("cpu", "others"), lambda v: num_spread(v, "{:.2f}")),
    ]
    off = [r["off"] for r in runs]
    on = [r["on"] for r in runs]
    for label, path, fmt in rows:
        print(f"{label:<26} {fmt(col(off, *path)):>24} {fmt(col(on, *path)):>24}")
    if all("alone on" in r for r in runs):
        for label, path in (
            ("writes alone: accept p99", ("writes", "latency", "p99")),
            ("writes alone: server p99", ("server_accept", "p99")),
        ):
            a_off = med_spread(col([r["alone off"] for r in runs], *path))
            a_on = med_spread(col([r["alone on"] for r in runs], *path))
            print(f"{label:<26} {a_off:>24} {a_on:>24}")
    p99_off, p99_on = col(off, "writes", "latency", "p99"), col(on, "writes", "latency", "p99")
    ratio = [a / b for a, b in zip(p99_off, p99_on, strict=True) if b == b and b > 0]
    if ratio:
        print(f"accept client p99, off / on: {num_spread(ratio, '{:.1f}')} x")
    for name, rs in (("off", off), ("on", on)):
        p99 = col(rs, "writes", "latency", "p99")
        kept = [r["writes"]["ok"] >= 0.98 * r["writes"]["sent"] for r in rs]
        met = sum(1 for v, k in zip(p99, kept, strict=True) if v < 0.1 and k)
        print(
            f"target accept p99 < 100 ms (client) with >= 98 % accepted, shedding {name}: "
            f"met in {met} of {len(rs)} round(s)"
        )


async def bench(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    print(f"preloading {args.players} players: SQL tallies, then Rebuilds.rebuild ...", flush=True)
    pre = await preload_sql(env, args.players)
    print(f"  tallies in {pre['record_s']:.1f} s, Redis in {pre['drain_s']:.1f} s", flush=True)
    print(f"  a profile each in {await preload_profiles(env, args.players):.1f} s", flush=True)
    key = create_key(env)
    runs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        order = (False, True) if rnd % 2 == 0 else (True, False)
        out: dict[str, Any] = {}
        print(f"\n-- round {rnd + 1}/{args.rounds} --", flush=True)
        for shed in order:
            server = podium(stack, env, shed)
            try:
                await server.wait_ready(wait_s=120)
                name = "on" if shed else "off"
                if args.alone > 0:  # the machine's state now: the writes without the readers
                    alone = await cell(server, key, args, rnd * 4 + shed + 2, 0, args.alone)
                    out[f"alone {name}"] = alone
                    print_cell(f"shedding {name}, writes alone", alone)
                r = await cell(server, key, args, rnd * 4 + shed, args.readers, args.duration)
            finally:
                server.stop()
            out[name] = r
            print_cell(f"shedding {name}, {args.readers} readers", r)
        runs.append(out)
    print_summary(runs, args)
    save_json(args, runs=runs)


def main() -> None:
    args = parse_args()
    header = (
        f"config production; {args.players} players; {args.rounds} round(s) of shedding off and "
        f"on; {args.duration:g} s measured after {args.warmup:g} s; writes {args.write_rate:g} "
        f"matches/s x 2 players; {args.readers} closed-loop readers"
    )
    bench_main(args, header, bench)


if __name__ == "__main__":
    main()
