"""Relays as a fleet: one relay process against two, on the same store databases, beside
bare nats-py publishers in one and in two processes.

    python benchmarks/relays.py [--databases 2] [--rows 40000] [--repeat 3]

Each run makes ``--databases`` Postgres databases of its own on this machine's Postgres
(``PODIUM_BENCH_POSTGRES``), and a stream of its own on this machine's NATS (``PODIUM_BENCH_NATS``);
both are deleted afterwards. The relay processes (``--child relay``) are started first and
left to share the databases' leases out (``log/nats/lease.py``) while the outboxes are
empty; then ``--rows`` outbox rows per database are committed at once (one ``INSERT`` each,
as many records would leave them, for 2,000 players), and the time is taken until every
outbox is empty: every row published, acknowledged by the stream, and deleted. The bare
reference (``--child bare``) publishes the same number of messages of the same size, with
message ids, in windows of the same size, each awaited, from the same number of processes.
A second relay process only adds what this machine's two cores have left beside Postgres
and NATS; the ratio to the bare publishers says how much of that podium's relay keeps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from urllib.parse import urlparse

import asyncpg
import nats
import nats.js.errors

from _harness import NATS_URL, PG_ADMIN_URL, _pg_admin, delete_stream

BATCH = 500
LEASE_S = 2.0
PLAYERS = 2000


class WallClock:
    def now(self) -> float:
        return time.time()


def db_url(name: str) -> str:
    return urlparse(PG_ADMIN_URL)._replace(path=f"/{name}").geturl()


# -- the children ----------------------------------------------------------------------------


async def relay_child(stream: str, urls: list[str]) -> None:
    from podium.log.events import source_of
    from podium.log.nats.log import NatsLog
    from podium.ports import Relayed
    from podium.store.postgres import PostgresStore

    stores = {source_of(u): PostgresStore.from_url(u) for u in urls}

    async def databases() -> Mapping[str, Relayed]:
        return stores

    log = NatsLog([NATS_URL], stream, WallClock(), lease_s=LEASE_S, databases=databases)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    moved = 0
    print("ready", flush=True)
    try:
        while not stop.is_set():
            n = await log.relay(BATCH)
            moved += n
            if n == 0:
                await asyncio.sleep(0.002)
    finally:
        await log.close()
        for s in stores.values():
            await s.close()
    print(json.dumps({"moved": moved}), flush=True)


async def bare_child(stream: str, messages: int, payload_size: int, tag: str) -> None:
    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    payload = b"x" * payload_size
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # "go"
    start = time.perf_counter()
    sent = 0
    while sent < messages:
        n = min(BATCH, messages - sent)
        await asyncio.gather(
            *(
                js.publish(
                    f"{stream}.changes.{(sent + i) % 16}",
                    payload,
                    stream=stream,
                    headers={"Nats-Msg-Id": f"{tag}-{sent + i}"},
                )
                for i in range(n)
            )
        )
        sent += n
    elapsed = time.perf_counter() - start
    await nc.close()
    print(json.dumps({"seconds": elapsed}), flush=True)


# -- the parent ------------------------------------------------------------------------------


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--child", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_ready(p: subprocess.Popen[str]) -> None:
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "ready", f"a child said {line!r}"


async def make_stream(stream: str) -> None:
    from podium.log.nats.log import NatsLog

    log = NatsLog([NATS_URL], stream, WallClock())
    try:
        await log.fetch(1)  # the stream and its consumers
    finally:
        await log.close()


async def leases_spread(stream: str, relays: int, databases: int) -> None:
    """Until every database is held, by ``relays`` holders sharing them evenly."""
    nc = await nats.connect(NATS_URL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                kv = await nc.jetstream().key_value(f"{stream}-relays")
                keys = [k for k in await kv.keys() if k.startswith("relay.")]
                holders = [(await kv.get(k)).value for k in keys]
            except (nats.js.errors.NotFoundError, nats.js.errors.NoKeysError):
                holders = []
            counts = sorted(holders.count(h) for h in set(holders))
            share = -(-databases // relays)
            spread = len(counts) == min(relays, databases) and max(counts, default=0) <= share
            if len(holders) == databases and spread:
                return
            await asyncio.sleep(0.1)
        raise AssertionError("the relays did not share the databases out")
    finally:
        await nc.close()


async def fill_and_time(urls: list[str], rows: int) -> float:
    """Commit ``rows`` outbox rows on every database at once; seconds until all are gone."""
    conns = [await asyncpg.connect(u) for u in urls]
    try:
        now = time.time()
        start = time.perf_counter()
        await asyncio.gather(
            *(
                c.execute(
                    "INSERT INTO outbox (board, window_id, player_id, total, reached_at, "
                    "version, committed_at) SELECT 'day', '2026-12-01', "
                    f"'p' || (i % {PLAYERS}), i, 1000 + i, i, $1 "
                    "FROM generate_series(1, $2) AS i",
                    now,
                    rows,
                )
                for c in conns
            )
        )
        while True:
            left = sum([await c.fetchval("SELECT count(*) FROM outbox") for c in conns])
            if left == 0:
                return time.perf_counter() - start
            await asyncio.sleep(0.01)
    finally:
        for c in conns:
            await c.close()


async def relay_run(urls: list[str], relays: int, rows: int) -> float:
    stream = f"bench_relays_{secrets.token_hex(3)}"
    await make_stream(stream)
    children = [spawn("relay", stream, *urls) for _ in range(relays)]
    try:
        for c in children:
            wait_ready(c)
        await leases_spread(stream, relays, len(urls))
        seconds = await fill_and_time(urls, rows)
    finally:
        for c in children:
            c.send_signal(signal.SIGTERM)
        moved = [
            json.loads(c.communicate(timeout=30)[0].splitlines()[-1])["moved"] for c in children
        ]
        await delete_stream(stream)
    # every row once, by whichever relay held its database
    assert sum(moved) == rows * len(urls), moved
    return rows * len(urls) / seconds


async def bare_run(processes: int, messages: int, payload_size: int) -> float:
    stream = f"bench_relays_{secrets.token_hex(3)}"
    await make_stream(stream)
    each = messages // processes
    children = [
        spawn("bare", stream, str(each), str(payload_size), f"b{i}") for i in range(processes)
    ]
    try:
        for c in children:
            wait_ready(c)
        start = time.perf_counter()
        for c in children:
            assert c.stdin is not None
            c.stdin.write("go\n")
            c.stdin.flush()
        for c in children:
            c.communicate(timeout=300)
        seconds = time.perf_counter() - start
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
        await delete_stream(stream)
    return each * processes / seconds


def sample_size() -> int:
    from podium.domain.boards import Tally
    from podium.domain.models import Change
    from podium.log.events import encode

    change = Change("day", "2026-12-01", "p1234", Tally(12345, 1_790_000_000, 17), 1.7e9)
    return len(encode(change, "0123456789ab", 123456))


# The claim as it was until the relays were measured here: the picked ids joined back to
# the outbox. Kept as the reference of the claim measurement.
OLD_CLAIM = (
    "WITH picked AS (SELECT id FROM outbox WHERE claimed_until <= $1 "
    "ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) "
    "UPDATE outbox o SET claimed_until = $3 FROM picked WHERE o.id = picked.id RETURNING o.id"
)
CLAIMS = ("old, custom plans", "old, generic plan made on an empty outbox", "the store's claim")


async def claim_drain(url: str, rows: int) -> dict[str, float]:
    """Seconds to claim a backlog of ``rows`` outbox rows in batches of ``BATCH``, each
    batch deleted through the store's own ack (which vacuums the outbox as the updaters and
    relays do), on an outbox last analyzed empty (its usual state). The old claim twice:
    planned for each execution, and with the generic plan a long-running process's
    prepared statement settles on when it first ran against an empty outbox (what the relay
    processes were seen to use); then the store's claim (``PostgresStore.claim_changes``)."""
    from podium.store.postgres import PostgresStore

    fill = (
        "INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, "
        f"committed_at) SELECT 'day', 'w', 'p' || (i % {PLAYERS}), i, i, i, 1 "
        "FROM generate_series(1, $1) AS i"
    )
    c = await asyncpg.connect(url)
    store = PostgresStore.from_url(url)
    try:
        await c.execute("DELETE FROM outbox")
        await c.execute("VACUUM ANALYZE outbox")
        await store.claim_changes(BATCH, 0.0, 0.0)  # its pool and prepared statement
        out: dict[str, float] = {}
        for kind in CLAIMS:
            mode = "force_generic_plan" if "generic" in kind else "force_custom_plan"
            await c.execute(f"SET plan_cache_mode = {mode}")
            old = await c.prepare(OLD_CLAIM)
            await old.fetch(0.0, BATCH, 0.0)  # planned now, on the empty outbox
            await c.execute(fill, rows)
            start = time.perf_counter()
            while True:
                now = time.time() + 1000
                if kind == CLAIMS[2]:
                    claimed = await store.claim_changes(BATCH, 0.0, now)
                    ids = [ch.handle for ch in claimed if isinstance(ch.handle, int)]
                else:
                    ids = [r["id"] for r in await old.fetch(now, BATCH, now)]
                if not ids:
                    break
                await store.ack_changes(ids)
            out[kind] = time.perf_counter() - start
        return out
    finally:
        await store.close()
        await c.close()


async def main(args: argparse.Namespace) -> None:
    from podium.store.postgres import PostgresStore

    names = [f"podium_bench_relays_{secrets.token_hex(3)}" for _ in range(args.databases)]
    for n in names:
        await _pg_admin(f'CREATE DATABASE "{n}"')
    urls = [db_url(n) for n in names]
    try:
        for u in urls:
            s = PostgresStore.from_url(u)
            await s.migrate()
            await s.close()
        for backlog in (args.rows // 4, args.rows):
            drains = [await claim_drain(urls[0], backlog) for _ in range(args.repeat)]
            print(f"claiming a backlog of {backlog:,} rows in batches of {BATCH}, seconds:")
            for kind in CLAIMS:
                figs = [d[kind] for d in drains]
                print(
                    f"  {kind:<42} median {statistics.median(figs):6.2f}s  (runs: "
                    + ", ".join(f"{x:.2f}" for x in figs)
                    + ")"
                )
        size = sample_size()
        total = args.rows * args.databases
        print(
            f"{args.databases} databases, {args.rows:,} rows each ({total:,} messages of "
            f"{size} bytes), batch {BATCH}, {args.repeat} runs of each, alternating"
        )
        figures: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for relays in (1, 2):
                rate = await relay_run(urls, relays, args.rows)
                figures.setdefault(f"podium relay x{relays}", []).append(rate)
                rate = await bare_run(relays, total, size)
                figures.setdefault(f"bare nats-py x{relays}", []).append(rate)
        med = {k: statistics.median(v) for k, v in figures.items()}
        for k, v in figures.items():
            runs = ", ".join(f"{x:,.0f}" for x in v)
            print(f"  {k:<18} median {med[k]:>8,.0f} msg/s   (runs: {runs})")
        for procs in (1, 2):
            ratio = med[f"podium relay x{procs}"] / med[f"bare nats-py x{procs}"]
            print(f"  {procs} process(es): podium relay / bare publisher = {ratio:.2f}")
        print(
            f"  two relays / one: {med['podium relay x2'] / med['podium relay x1']:.2f}; "
            f"two bare publishers / one: {med['bare nats-py x2'] / med['bare nats-py x1']:.2f}"
        )
        print(f"  load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        for n in names:
            await _pg_admin(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)')


def cli() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, stream, *rest = sys.argv[2:]
        if kind == "relay":
            asyncio.run(relay_child(stream, rest))
        else:
            asyncio.run(bare_child(stream, int(rest[0]), int(rest[1]), rest[2]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--databases", type=int, default=2)
    p.add_argument("--rows", type=int, default=40_000, help="outbox rows per database")
    p.add_argument("--repeat", type=int, default=3)
    asyncio.run(main(p.parse_args()))


if __name__ == "__main__":
    cli()
