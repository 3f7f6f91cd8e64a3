"""What podium.client costs over a plain httpx loop doing the same requests.

    python benchmarks/client_overhead.py [--n 300] [--rounds 5]

One ``podium serve`` on the embedded configuration (a scratch directory, removed after).
Each round times, one request at a time, ``--n`` submissions of a two-player match (a new
match id each) and ``--n`` rank reads with two neighbors, four ways, in turn: the sync
``podium.client.Client`` and a plain ``httpx.Client`` sending the same bytes, then the
``AsyncClient`` and a plain ``httpx.AsyncClient``; the order of the pair alternates round by
round. Printed: the median wall time per call of each (the median over rounds of each
round's median), and the client's over plain httpx's. The difference is the client's own
work: building the body once, reading the JSON into frozen values, the problem check; the
server's time is in both.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx

from _harness import (
    code_line,
    create_key,
    install_sigterm,
    machine_line,
    make_env,
    podium_server,
    run,
)
from podium.client import AsyncClient, Client

PLAYERS = [f"p_{i:05d}" for i in range(2_000)]
ENDED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _pair(i: int) -> list[tuple[str, int]]:
    rng = random.Random(i)
    a, b = rng.sample(PLAYERS, 2)
    return [(a, rng.randint(1, 1000)), (b, rng.randint(1, 1000))]


def _body(i: int) -> bytes:
    results = [{"playerId": p, "points": n} for p, n in _pair(i)]
    body = {"mode": "default", "endedAt": ENDED, "durationSeconds": 540, "results": results}
    return json.dumps(body, separators=(",", ":")).encode()


def _timed(fn: Callable[[int], object], ids: range) -> float:
    times = []
    for i in ids:
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


async def _atimed(fn: Callable[[int], Awaitable[object]], ids: range) -> float:
    times = []
    for i in ids:
        t = time.perf_counter()
        await fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=300, help="calls of each kind per way per round")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    install_sigterm()
    print(machine_line())
    print(code_line())
    with contextlib.ExitStack() as stack:
        env = make_env(stack, "embedded")
        key = create_key(env)
        server = podium_server(stack, env)
        asyncio.run(server.wait_ready("/readyz"))
        url, auth = server.url, {"Authorization": f"Bearer {key}"}
        got: dict[str, list[float]] = {}
        blocks = itertools.count()

        def ids() -> range:
            """Fresh numbers for each timed run: every submission is a new match."""
            start = next(blocks) * args.n
            return range(start, start + args.n)

        with Client(url, key) as client, httpx.Client(base_url=url, headers=auth) as plain:

            def client_submit(i: int) -> object:
                return client.submit(f"c{i}", _pair(i), duration_seconds=540, ended_at=ENDED)

            def plain_submit(i: int) -> object:
                r = plain.post(
                    f"/v1/matches/p{i}/results",
                    content=_body(i),
                    headers={"Content-Type": "application/json"},
                )
                r.raise_for_status()
                return r.json()

            def client_rank(i: int) -> object:
                return client.rank("week", PLAYERS[i % 50], neighbors=2)

            def plain_rank(i: int) -> object:
                r = plain.get(f"/v1/boards/week/players/{PLAYERS[i % 50]}?neighbors=2")
                r.raise_for_status()
                return r.json()

            # Warm up both, and put the first players on the board before any rank read.
            for i in range(50):
                client.submit(f"w{i}", [(PLAYERS[i], 10)], duration_seconds=540, ended_at=ENDED)
            time.sleep(1)
            for r in range(args.rounds):
                pairs = [
                    ("sync submit", client_submit, plain_submit),
                    ("sync rank", client_rank, plain_rank),
                ]
                for name, mine, theirs in pairs:
                    order = [("client", mine), ("httpx", theirs)]
                    for who, fn in order if r % 2 == 0 else order[::-1]:
                        got.setdefault(f"{name} {who}", []).append(_timed(fn, ids()))

        async def async_rounds() -> None:
            async with (
                AsyncClient(url, key) as client,
                httpx.AsyncClient(base_url=url, headers=auth) as plain,
            ):

                async def client_submit(i: int) -> object:
                    return await client.submit(
                        f"ac{i}", _pair(i), duration_seconds=540, ended_at=ENDED
                    )

                async def plain_submit(i: int) -> object:
                    r = await plain.post(
                        f"/v1/matches/ap{i}/results",
                        content=_body(i),
                        headers={"Content-Type": "application/json"},
                    )
                    r.raise_for_status()
                    return r.json()

                async def client_rank(i: int) -> object:
                    return await client.rank("week", PLAYERS[i % 50], neighbors=2)

                async def plain_rank(i: int) -> object:
                    r = await plain.get(f"/v1/boards/week/players/{PLAYERS[i % 50]}?neighbors=2")
                    r.raise_for_status()
                    return r.json()

                for r in range(args.rounds):
                    pairs = [
                        ("async submit", client_submit, plain_submit),
                        ("async rank", client_rank, plain_rank),
                    ]
                    for name, mine, theirs in pairs:
                        order = [("client", mine), ("httpx", theirs)]
                        for who, fn in order if r % 2 == 0 else order[::-1]:
                            got.setdefault(f"{name} {who}", []).append(await _atimed(fn, ids()))

        run(async_rounds())
        print(f"{args.rounds} rounds of {args.n} calls each way; median ms per call")
        print(f"{'call':<14} {'client':>8} {'httpx':>8} {'ratio':>7}")
        for name in ("sync submit", "sync rank", "async submit", "async rank"):
            ours = statistics.median(got[f"{name} client"]) * 1e3
            bare = statistics.median(got[f"{name} httpx"]) * 1e3
            print(f"{name:<14} {ours:>8.2f} {bare:>8.2f} {ours / bare:>7.2f}")


if __name__ == "__main__":
    main()
