"""Where the time of one request goes: sequential, unloaded timings of each step, in-process.

    python benchmarks/breakdown.py --config embedded
    python benchmarks/breakdown.py --config production

Each step is called ``--n`` times one after the other (after a warm-up), in this process,
against a board preloaded as ``reads.py`` does (``--players``, default 20,000). For each step
it prints the median wall time and the CPU time of this process per call (all its threads:
the SQLite threads count). Nothing else of ours runs meanwhile, so the CPU column is a cost
that the noise of this shared machine barely moves; the wall column is not.

Then the same read and write through HTTP, one at a time, to ``podium serve`` and to the bare
framework: the unloaded latency and what the HTTP layer adds. Steps whose internal API changed
since this was written print "n/a" instead of failing.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import (
    Env,
    bare_server,
    code_line,
    create_key,
    http_client,
    install_sigterm,
    machine_line,
    make_env,
    match_body,
    player_id,
    podium_server,
    proc_cpu,
    run,
)
from reads import preload, preload_sql


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", choices=["embedded", "production"], default="embedded")
    p.add_argument("--players", type=int, default=20_000)
    p.add_argument("--n", type=int, default=1000, help="calls per step")
    return p.parse_args()


async def step(
    name: str, fn: Callable[[], Awaitable[Any]], n: int, pid: int | None = None
) -> dict[str, float] | None:
    """Median wall time per call, and CPU per call: of this process, or of ``pid``."""

    def cpu_now() -> float:
        return time.process_time() if pid is None else proc_cpu(pid)

    try:
        for _ in range(max(20, n // 20)):
            await fn()
    except (AttributeError, TypeError) as e:  # the internal API moved on
        print(f"  {name:<46} n/a ({type(e).__name__}: {e})")
        return None
    walls = []
    c0 = cpu_now()
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        await fn()
        walls.append(time.perf_counter() - s)
    total = time.perf_counter() - t0
    cpu = (cpu_now() - c0) / n
    med = statistics.median(walls)
    p99 = sorted(walls)[int(0.99 * (n - 1))]
    print(
        f"  {name:<46} wall median {med * 1e6:7.0f} us  p99 {p99 * 1e6:7.0f} us  "
        f"{'server ' if pid else ''}CPU {cpu * 1e6:6.0f} us/call  "
        f"({n / total:6.0f} calls/s in sequence)"
    )
    return {"wall": med, "cpu": cpu}


async def in_process(env: Env, args: argparse.Namespace) -> None:
    from podium import bootstrap
    from podium.config import settings as config
    from podium.domain.models import MatchQuery, PlayerResult
    from podium.ports import BoardKey

    settings = config.load(env.config_path)
    b = bootstrap.build(settings)
    await b.start()  # embedded: rebuilds the in-process index from the file
    try:
        pod = b.podium
        window = pod.boards.window(pod.boards.board("week"), None).id
        key = BoardKey("week", window)
        rng = random.Random(5)
        n = args.n

        def pid() -> str:
            return player_id(rng.randrange(args.players))

        print("\nread path of GET /v1/boards/week/players/{id}?neighbors=2, step by step:")
        await step(
            "index.around (rank + the 5 rows, one read)",
            lambda: b.index.around(key, pid(), 2, descending=True),
            n,
        )
        await step(
            "  for reference: index.rank",
            lambda: b.index.rank(key, pid(), descending=True),
            n,
        )
        await step(
            "  and index.page (5 rows)",
            lambda: b.index.page(key, 1000, 1004, descending=True),
            n,
        )
        await step("store.profiles (5 ids)", lambda: b.store.profiles([pid() for _ in range(5)]), n)
        await step(
            "Reads.player_rank (around + profiles)",
            lambda: pod.reads.player_rank("week", pid(), 2, None),
            n,
        )
        print("read path of GET /v1/boards/week?limit=100:")
        await step("index.page (100 rows)", lambda: b.index.page(key, 0, 99, descending=True), n)
        await step(
            "store.profiles (100 ids)", lambda: b.store.profiles([pid() for _ in range(100)]), n
        )
        await step(
            "Reads.page (served from its 1 s cache)",
            lambda: pod.reads.page("week", None, 0, 100),
            n,
        )

        print("write path of POST /v1/matches/{id}/results (2 players), step by step:")
        api_key, _ = await pod.keys.create("breakdown", ["default"], False)
        count = iter(range(10**9))
        now = int(time.time())

        targets = pod.matches.targets("default", now, now)

        async def open_match() -> Any:
            return await b.store.open_match(
                MatchQuery(
                    f"bd-open-{next(count)}",
                    api_key.id,
                    time.time(),
                    [pid(), pid()],
                    "default",
                    20,
                    time.time() - 3600,
                    targets,
                )
            )

        await step("store.open_match (1 statement: claim, then the checks' read)", open_match, n)

        async def record() -> Any:
            ps = [PlayerResult(pid(), 10), PlayerResult(pid(), 20)]
            return await pod.matches.record(api_key, f"bd-{next(count)}", "default", now, 540, ps)

        await step("Matches.record (all of it, 2 players)", record, n)

        print("board updater, per batch of changes:")
        lease = settings.workers.lease_s

        async def claim_ack() -> Any:
            changes = await b.store.claim_changes(500, lease, time.time())
            if changes:
                await b.store.ack_changes([c.handle for c in changes])  # type: ignore[misc]
            return changes

        await step("store.claim_changes + ack_changes, outbox empty", claim_ack, n)
    finally:
        await b.close()


async def over_http(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    key = create_key(env)
    pod = podium_server(stack, env)
    bare = bare_server(stack, env)
    await pod.wait_ready(wait_s=300)
    await bare.wait_ready()
    rng = random.Random(9)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    print(
        "\nover HTTP, one request at a time (raw keep-alive client); CPU is the server's "
        "(/proc, 10 ms ticks, so take it as approximate; podium's includes its idle updater)"
    )
    for server in (pod, bare):
        async with http_client(server.url, 1) as c:
            count = iter(range(10**9))

            async def get_rank(c: Any = c) -> None:
                r = await c.get(f"/v1/boards/week/players/{player_id(rng.randrange(args.players))}")
                assert r.status_code == 200, r.status_code

            async def get_page(c: Any = c) -> None:
                assert (await c.get("/v1/boards/week?limit=100")).status_code == 200

            async def post(c: Any = c, count: Any = count) -> None:
                ps = [player_id(rng.randrange(args.players)) for _ in range(2)]
                r = await c.post(
                    f"/v1/matches/bd-http-{next(count)}/results",
                    content=match_body(ps, rng),
                    headers=headers,
                )
                assert r.status_code == 200, r.status_code

            await step(f"{server.name}: GET rank ?neighbors=2", get_rank, args.n, server.pid)
            await step(f"{server.name}: GET page of 100", get_page, args.n, server.pid)
            await step(f"{server.name}: POST match of 2", post, args.n // 2, server.pid)


async def bench(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    if env.kind == "production":
        await preload_sql(env, args.players)
    else:
        await preload(env, args.players)
    print(f"preloaded {args.players} players in {time.perf_counter() - t0:.1f} s")
    await in_process(env, args)
    await over_http(env, stack, args)


def main() -> None:
    args = parse_args()
    install_sigterm()
    print(machine_line())
    print(code_line())
    print(f"config {args.config}; {args.players} players; {args.n} calls per step", flush=True)
    with contextlib.ExitStack() as stack:
        env = make_env(stack, args.config)
        try:
            run(bench(env, stack, args))
        except KeyboardInterrupt:
            print("interrupted; cleaning up", file=sys.stderr)
            raise


if __name__ == "__main__":
    main()
