"""How many round trips to Postgres one match takes, and what that allows on a slow link.

    python benchmarks/match_round_trips.py              # 200 matches, one at a time

An API process (``create_app``, no workers, in this process) on a database of its own
(``podium_rt_*``, dropped at the end) and a Redis prefix of its own, its store reached
through the tests' TCP proxy (``tests/proxy.py``), which counts round trips: each time the
client speaks after the server did. Matches of two players are sent one at a time, each to
a new match id, through the ASGI app (no HTTP), so every round trip counted is the store's.
The proxy's count over the same time with no match sent (the process's own background
work) is subtracted.

It prints the round trips per match and what they hold at a given round-trip time
(``--rtt-ms``, 400 by default: 200 ms each way, the slow scenario of docs/faults.md): a
connection for one round trip each, so many connection-seconds per match, and the ceiling
that gives with every store connection of ``--processes`` API processes busy (``[store]
pool_size`` and ``read_pool_size``, 10 each by default: ``--connections`` 20 a process). An
upper bound of the path that succeeds, one match at a time (concurrent matches share a
group commit's round trip, up to 32 records in one, so under load a match holds a little
less); a figure of the code path, not of the machine: it does not depend on its speed.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import time
from pathlib import Path

import httpx

import _harness as h

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.proxy import Proxy

from podium.config.settings import parse
from podium.serve.app import create_app


async def main(args: argparse.Namespace) -> None:
    db = f"podium_rt_{secrets.token_hex(4)}"
    prefix = f"rt{secrets.token_hex(3)}"
    await h._pg_admin(f'CREATE DATABASE "{db}"')
    base = h.PG_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base}/{db}"
    try:
        await h.migrate_store(url)
        host, port = url.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)
        proxy = Proxy(host, int(port))
        await proxy.start()
        settings = parse(
            {
                "server": {"read_rate_per_s": 0},
                "store": {"url": f"postgresql://postgres@127.0.0.1:{proxy.port}/{db}"},
                "index": {"url": h.REDIS_URL, "prefix": prefix},
                "boards": [{"name": "all", "window": "all"}],
            }
        )
        app = create_app(settings, roles=())
        try:
            async with app.router.lifespan_context(app):
                _, key = await app.state.podium.keys.create("gs", ["default"], False)
                transport = httpx.ASGITransport(app=app)
                auth = {"Authorization": f"Bearer {key}"}
                async with httpx.AsyncClient(
                    transport=transport, base_url="http://podium", headers=auth
                ) as c:
                    await send(c, "warm", 20)  # connections opened, statements prepared
                    idle_from, trips = time.monotonic(), proxy.trips
                    await asyncio.sleep(args.idle_s)
                    idle = (proxy.trips - trips) / (time.monotonic() - idle_from)
                    began, trips = time.monotonic(), proxy.trips
                    await send(c, "m", args.matches)
                    took = time.monotonic() - began
                    counted = proxy.trips - trips - idle * took
        finally:
            await proxy.cut()
        per = counted / args.matches
        rtt = args.rtt_ms / 1000
        print(
            f"{args.matches} matches of 2 players, one at a time: {per:.2f} round trips to "
            f"Postgres each (background: {idle:.2f}/s, subtracted)"
        )
        hold = per * rtt
        ceiling = args.processes * args.connections / hold
        print(
            f"at {args.rtt_ms:.0f} ms a round trip: {hold:.2f} connection-seconds per match; "
            f"{args.processes} processes x {args.connections} store connections, all busy: at "
            f"most {ceiling:.1f} matches/s"
        )
    finally:
        await h._pg_admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        h.delete_redis_keys(prefix)


async def send(c: httpx.AsyncClient, tag: str, n: int) -> None:
    for i in range(n):
        body = {
            "mode": "default",
            "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "durationSeconds": 60,
            "results": [
                {"playerId": f"p{(2 * i) % 200}", "points": 10},
                {"playerId": f"p{(2 * i + 1) % 200}", "points": 7},
            ],
        }
        r = await c.post(f"/v1/matches/{tag}{i}-{secrets.token_hex(3)}/results", json=body)
        assert r.status_code == 200, r.text


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--matches", type=int, default=200)
    p.add_argument("--idle-s", type=float, default=5.0)
    p.add_argument("--rtt-ms", type=float, default=400.0)
    p.add_argument("--connections", type=int, default=20)
    p.add_argument("--processes", type=int, default=2)
    h.run(main(p.parse_args()))
