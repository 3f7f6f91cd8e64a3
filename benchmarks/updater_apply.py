"""The board updater's full apply rate (fetch from the log, ban check, index write, ack),
through NATS JetStream and through the outbox, beside the floors of its parts.

``--messages`` changes (absolute totals of ``--players`` players on two boards, a day and a
week board, as a record of one result writes them: one change a board, each player's totals
rising) are preloaded, outside the timing, into

- a JetStream stream of their own, published directly as the relay would (the encoded event
  of ``podium.log.events.encode``, the player's partition subject, the message id), and
- the outbox of a Postgres database of their own (``COPY`` of the same rows, then a
  ``VACUUM`` so that every repeat starts alike),

and drained by the real ``podium.workers.updater.Updater``, built as bootstrap builds it
(Postgres store, Redis index on the machine's Redis under a key prefix of its own), its
``step`` called back to back until every change is applied. In the same repeat, over the
same messages and entries:

- bare nats-py: one durable pull consumer on the whole stream, ``fetch`` of the updater's
  batch, an ``ack_sync`` per message, all of a batch at once (the log's floor);
- ``NatsLog`` fetch + ack with no index write (what the log costs podium, on a second
  stream of the same messages);
- raw redis-py: the same (member, score) entries, a pipeline of ``ZADD GT`` per batch (one
  command per board in the batch), one round trip each (the index write's floor);
- with ``--updaters 1,2``, two updaters side by side: as two asyncio tasks of one process,
  each with its own log (its own NATS connection on the same durable consumers, or its own
  claims on the same outbox), sharing the store and the index as one process's roles do;
  and (``--processes``, the default) as processes of their own, each built by bootstrap
  like ``podium worker --roles updater``, timed from the signal to start until the last
  change was acked.

One updater's drain is also split by time: in the log's ``fetch`` (which decodes), in its
``ack``, and the rest (the ban check in the store, the index write); and the cores used
meanwhile by this process, our Postgres backends, Redis and everything else (``CpuMeter``,
read from /proc in clock ticks: coarse for a drain shorter than a second).

The board keys are emptied before each drain, so that every drain inserts the same members.
Everything is printed as median [min-max] over ``--repeat`` repeats, in messages/s, with
ratios: of the medians, and the median of each repeat's own ratio (steadier on a machine
whose load changes from one repeat to the next; ``--quiet F`` waits before each repeat for a
second in which the machine is less than F busy). Streams, the database and the keys are
removed afterwards.

    python benchmarks/updater_apply.py [--messages 20000] [--players 5000] [--repeat 3]
        [--updaters 1,2] [--no-processes] [--quiet 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import secrets
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import asyncpg
import nats
import redis.asyncio as aioredis
from nats.js.api import AckPolicy, ConsumerConfig

from _harness import (
    NATS_URL,
    PG_ADMIN_URL,
    REDIS_URL,
    CpuMeter,
    delete_stream,
    num_spread,
    wait_quiet,
)
from podium import bootstrap
from podium.config.settings import Settings, parse
from podium.domain.boards import Tally
from podium.domain.models import Change, Message
from podium.index.redis.keys import Keys
from podium.log.events import encode, message_id, partition_of, source_of
from podium.log.nats.log import NatsLog
from podium.log.outbox import OutboxLog
from podium.ports import BoardKey, ChangeLog
from podium.workers.updater import Updater

# What a record writes into an outbox row (store/sql: podium_write_record).
OUTBOX_COLUMNS = [
    "board",
    "window_id",
    "player_id",
    "total",
    "reached_at",
    "version",
    "committed_at",
]
STALL_S = 20.0  # a drain that applies nothing for this long has lost messages: give up


@dataclass(frozen=True)
class Bench:
    """What every measurement of one run shares."""

    settings: Settings
    backends: bootstrap.Backends
    changes: list[Change]
    entries: list[tuple[str, str, int]]  # (board key, member, score), one per change
    players_per_board: dict[str, int]  # board key -> distinct players
    source: str
    redis: aioredis.Redis
    db_url: str


# -- the logs: built in one place ---------------------------------------------------------


def make_log(
    settings: Settings, backends: bootstrap.Backends, source: str, kind: str, stream: str = ""
) -> ChangeLog:
    """One updater's change log, as bootstrap builds it: ``nats`` on ``stream`` (the relay's
    keywords, ``outbox=`` and ``source=``, though nothing is relayed here) or ``outbox``."""
    s, store, clock = settings, backends.store, backends.clock
    if kind == "nats":
        return NatsLog.from_url(
            NATS_URL,
            stream,
            clock,
            partitions=s.log.partitions,
            lease_s=s.workers.lease_s,
            replicas=s.log.replicas,
            retention_s=float(s.log.retention_s),
            outbox=store,
            source=source,
        )
    return OutboxLog(store, clock, lease_s=s.workers.lease_s)


def make_updater(backends: bootstrap.Backends, changes: ChangeLog) -> Updater:
    b = backends
    return Updater(b.settings, b.store, b.index, b.copy, changes, b.clock)


class TimedLog:
    """A change log that adds up the time spent in its fetches and in its settling, so that
    a drain's time splits into the log's part and the rest (ban check, index write)."""

    def __init__(self, inner: ChangeLog) -> None:
        self.inner = inner
        self.fetch_s = 0.0
        self.settle_s = 0.0

    @property
    def partitions(self) -> int:
        return self.inner.partitions

    async def relay(self, limit: int) -> int:
        return await self.inner.relay(limit)

    async def ping(self) -> None:
        await self.inner.ping()

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        t = time.perf_counter()
        try:
            return await self.inner.fetch(limit, partition)
        finally:
            self.fetch_s += time.perf_counter() - t

    async def _settle(self, settle: Callable[[], Awaitable[None]]) -> None:
        t = time.perf_counter()
        try:
            await settle()
        finally:
            self.settle_s += time.perf_counter() - t

    async def ack(self, messages: Sequence[Message]) -> None:
        await self._settle(lambda: self.inner.ack(messages))

    async def in_progress(self, messages: Sequence[Message]) -> None:
        await self._settle(lambda: self.inner.in_progress(messages))

    async def nak(self, messages: Sequence[Message]) -> None:
        await self._settle(lambda: self.inner.nak(messages))

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        return await self.inner.settled(messages)  # board marks only: not timed

    async def replay(
        self, since: float, keep: Callable[[Message], bool] | None = None
    ) -> ChangeLog:
        return await self.inner.replay(since, keep)

    async def close(self) -> None:
        await self.inner.close()


# -- the changes --------------------------------------------------------------------------


def make_changes(settings: Settings, n: int, players: int, now: float) -> list[Change]:
    """``n`` changes in commit order: results of random players, one change per board each,
    every player's total and version rising with each of their results."""
    rng = random.Random(12)
    windows = []
    for spec in settings.boards:
        w = spec.rule.window_at(int(now))
        assert w is not None
        windows.append((spec.name, w.id))
    totals: dict[str, int] = defaultdict(int)
    versions: dict[str, int] = defaultdict(int)
    out: list[Change] = []
    while len(out) < n:
        player = f"player-{rng.randrange(players):06d}"
        totals[player] += rng.randint(1, 50)
        versions[player] += 1
        tally = Tally(totals[player], int(now), versions[player])
        out += [Change(b, w, player, tally, now) for b, w in windows]
    return out[:n]


def index_entries(settings: Settings, changes: Sequence[Change]) -> list[tuple[str, str, int]]:
    """Each change as the index stores it: its board's key, the member, the packed score."""
    specs = {s.name: s for s in settings.boards}
    keys = Keys(settings.index.prefix)
    out = []
    for c in changes:
        spec = specs[c.board]
        w = spec.rule.window_at(c.tally.reached_at)
        assert w is not None and w.id == c.window
        out.append((keys.board(BoardKey(c.board, c.window)), c.player_id, spec.score(c.tally, w)))
    return out


# -- preloading ---------------------------------------------------------------------------


async def publish(bench: Bench, stream: str) -> None:
    """The changes into ``stream`` as the relay publishes them (event, subject, message id),
    acks awaited in windows of one batch."""
    partitions, batch = bench.settings.log.partitions, bench.settings.workers.batch
    nc = await nats.connect(NATS_URL)
    try:
        js = nc.jetstream()
        for first in range(0, len(bench.changes), batch):
            acks = []
            for row, c in enumerate(bench.changes[first : first + batch], start=first + 1):
                payload = encode(c, bench.source, row)
                subject = f"{stream}.changes.{partition_of(c.player_id, partitions)}"
                headers = {"Nats-Msg-Id": message_id(payload, bench.source, row)}
                acks.append(await js.publish_async(subject, payload, headers=headers))
            await asyncio.gather(*acks)
    finally:
        await nc.close()


def outbox_row(c: Change) -> tuple[object, ...]:
    """A change as its outbox row, in ``OUTBOX_COLUMNS``."""
    t = c.tally
    return (c.board, c.window, c.player_id, t.total, t.reached_at, t.version, c.committed_at)


async def fill_outbox(bench: Bench) -> None:
    """The same changes as outbox rows, as a record writes them, then a vacuum of the rows
    the last drain deleted (outside the timing, so that every repeat starts alike)."""
    conn = await asyncpg.connect(bench.db_url)
    try:
        n = await conn.fetchval("SELECT count(*) FROM outbox")
        assert n == 0, f"{n} rows left in the outbox"
        rows = [outbox_row(c) for c in bench.changes]
        await conn.copy_records_to_table("outbox", records=rows, columns=OUTBOX_COLUMNS)
        await conn.execute("VACUUM ANALYZE outbox")
    finally:
        await conn.close()


async def clear_keys(r: aioredis.Redis, prefix: str) -> int:
    n = 0
    batch: list[bytes] = []
    async for key in r.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            n += int(await r.delete(*batch))
            batch = []
    if batch:
        n += int(await r.delete(*batch))
    return n


async def check_boards(bench: Bench) -> None:
    """Every player reached each board: the drain wrote what it was given."""
    for key, want in bench.players_per_board.items():
        got = int(await bench.redis.zcard(key))
        assert got == want, f"{key}: {got} members, expected {want}"


# -- the measurements ---------------------------------------------------------------------


async def drain(steps: Sequence[Callable[[], Awaitable[int]]], n: int) -> float:
    """Call every ``step`` back to back, side by side, until ``n`` messages are done between
    them; returns messages/s."""
    done = 0

    async def run(step: Callable[[], Awaitable[int]]) -> None:
        nonlocal done
        last = time.perf_counter()
        while done < n:
            k = await step()
            done += k
            if k:
                last = time.perf_counter()
            elif time.perf_counter() - last > STALL_S:
                raise RuntimeError(f"stalled at {done} of {n}")
            else:
                await asyncio.sleep(0.001)  # the others hold the rest

    start = time.perf_counter()
    await asyncio.gather(*(run(s) for s in steps))
    elapsed = time.perf_counter() - start
    assert done == n, (done, n)
    return n / elapsed


async def preload(bench: Bench, kind: str, stream: str) -> None:
    """The changes into the log, and the board keys emptied, outside the timing."""
    if kind == "nats":
        await publish(bench, stream)
    else:
        await fill_outbox(bench)
    await clear_keys(bench.redis, bench.settings.index.prefix)


def new_log(bench: Bench, kind: str, stream: str) -> ChangeLog:
    return make_log(bench.settings, bench.backends, bench.source, kind, stream)


async def warm(log: ChangeLog, kind: str, backends: bootstrap.Backends) -> None:
    """The connections (and on NATS the stream and its consumers) made before the timing;
    on NATS before the changes are published, or this first fetch would take one."""
    if kind == "nats":
        assert not await log.fetch(1, partition=0)
    await backends.store.outbox_backlog(time.time())
    await backends.copy.profiles_complete()


@dataclass
class Split:
    """Where a drain's time went: fractions of the drain, over its updaters, and the cores
    each party used meanwhile (``CpuMeter``: "generator" is this process)."""

    fetch: float
    settle: float
    cores: dict[str, float] = field(default_factory=dict)


def meter(bench: Bench) -> CpuMeter:
    m = CpuMeter({}, pg_db=urlparse(bench.db_url).path.lstrip("/"))
    m.begin()
    return m


async def updaters_in_tasks(
    bench: Bench, kind: str, count: int, stream: str
) -> tuple[float, Split]:
    """``count`` updaters as tasks of this process, each with its own log, sharing the
    store and the index (as one process's roles do)."""
    logs = [TimedLog(new_log(bench, kind, stream)) for _ in range(count)]
    try:
        for log in logs:
            await warm(log, kind, bench.backends)
        await preload(bench, kind, stream)
        ups = [make_updater(bench.backends, log) for log in logs]
        cpu = meter(bench)
        t = time.perf_counter()
        rate = await drain([u.step for u in ups], len(bench.changes))
        wall = count * (time.perf_counter() - t)
        cores = cpu.end()
    finally:
        for log in logs:
            await log.close()
    await check_boards(bench)
    fetch, settle = sum(x.fetch_s for x in logs) / wall, sum(x.settle_s for x in logs) / wall
    return rate, Split(fetch, settle, cores)


async def updaters_in_processes(bench: Bench, kind: str, count: int, stream: str) -> float:
    """``count`` updaters, each in a process of its own with its own store pool, index client
    and log, as ``podium worker --roles updater`` runs them. Timed from the signal to start
    until the process that applied the last change had it acked."""
    mp = multiprocessing.get_context("spawn")
    ready, go = mp.Semaphore(0), mp.Event()
    done = mp.Value("q", 0)
    ends = mp.Array("d", count)
    n = len(bench.changes)
    args = (bench.db_url, bench.settings.index.prefix, kind, stream, n, ready, go, done, ends)
    procs = [mp.Process(target=child, args=(*args, i), daemon=True) for i in range(count)]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            if not await asyncio.to_thread(ready.acquire, True, 60):
                raise RuntimeError("an updater process did not start")
        await preload(bench, kind, stream)
        start = time.perf_counter()
        go.set()
        for proc in procs:
            await asyncio.to_thread(proc.join, STALL_S + 60)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    bad = [proc.exitcode for proc in procs if proc.exitcode != 0]
    if bad or done.value != n:
        raise RuntimeError(f"updater processes exited {bad}, applied {done.value} of {n}")
    await check_boards(bench)
    return n / (float(max(ends[i] for i in range(count))) - start)


def child(
    db_url: str,
    prefix: str,
    kind: str,
    stream: str,
    n: int,
    ready: Any,
    go: Any,
    done: Any,
    ends: Any,
    i: int,
) -> None:
    """One updater process: built, warmed, then drained until ``n`` are done between all."""

    async def main() -> None:
        settings = settings_for(db_url, prefix)
        backends = bootstrap.build(settings)
        log = make_log(settings, backends, source_of(db_url), kind, stream)
        try:
            await warm(log, kind, backends)
            ready.release()
            await asyncio.to_thread(go.wait)
            up = make_updater(backends, log)
            last = time.perf_counter()
            while done.value < n:
                k = await up.step()
                if k:
                    with done.get_lock():
                        done.value += k
                    last = ends[i] = time.perf_counter()
                elif time.perf_counter() - last > STALL_S:
                    raise RuntimeError(f"stalled at {done.value} of {n}")
                else:
                    await asyncio.sleep(0.001)  # the others hold the rest
        finally:
            await log.close()
            await backends.close()

    asyncio.run(main())


async def log_alone(bench: Bench, stream: str) -> float:
    """``NatsLog`` fetch + ack of the updater's batches, with no index write."""
    log = new_log(bench, "nats", stream)
    batch = bench.settings.workers.batch
    try:
        await warm(log, "nats", bench.backends)
        await publish(bench, stream)

        async def step() -> int:
            got = await log.fetch(batch)
            await log.ack(got)
            return len(got)

        return await drain([step], len(bench.changes))
    finally:
        await log.close()


async def bare_pull(bench: Bench, stream: str) -> tuple[float, Split]:
    """Bare nats-py over the same stream: a durable pull consumer of its own, one fetch of a
    batch at a time, every message of it acked (``ack_sync``) at once."""
    n, batch = len(bench.changes), bench.settings.workers.batch
    nc = await nats.connect(NATS_URL)
    try:
        js = nc.jetstream()
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=20_000)
        sub = await js.pull_subscribe(
            f"{stream}.changes.>", durable="bare", stream=stream, config=config
        )
        cpu = meter(bench)
        start = time.perf_counter()
        got, fetch_s, ack_s = 0, 0.0, 0.0
        while got < n:
            t0 = time.perf_counter()
            msgs = await sub.fetch(min(batch, n - got), timeout=2)
            t1 = time.perf_counter()
            await asyncio.gather(*(m.ack_sync() for m in msgs))
            fetch_s, ack_s = fetch_s + t1 - t0, ack_s + time.perf_counter() - t1
            got += len(msgs)
        wall = time.perf_counter() - start
        return got / wall, Split(fetch_s / wall, ack_s / wall, cpu.end())
    finally:
        await nc.close()


async def raw_zadd(bench: Bench) -> float:
    """The same entries written with redis-py: per batch, one pipeline (one round trip) of a
    ``ZADD GT`` per board the batch touches."""
    await clear_keys(bench.redis, bench.settings.index.prefix)
    batch = bench.settings.workers.batch
    start = time.perf_counter()
    for first in range(0, len(bench.entries), batch):
        groups: dict[str, dict[str, int]] = defaultdict(dict)
        for key, member, score in bench.entries[first : first + batch]:
            groups[key][member] = max(score, groups[key].get(member, score))
        pipe = bench.redis.pipeline(transaction=False)
        for key, mapping in groups.items():
            pipe.zadd(key, mapping, gt=True)
        await pipe.execute()
    rate = len(bench.entries) / (time.perf_counter() - start)
    await check_boards(bench)
    return rate


# -- the run ------------------------------------------------------------------------------


def settings_for(db_url: str, prefix: str) -> Settings:
    return parse(
        {
            "store": {"url": db_url},
            "index": {"url": REDIS_URL, "prefix": prefix},
            "log": {"url": NATS_URL},
            "boards": [
                {"name": "day", "window": "day"},
                {"name": "week", "window": "week"},
            ],
        }
    )


BARE = "bare nats-py pull + ack_sync"
ALONE = "NatsLog fetch + ack, no index write"
ZADD = "raw redis-py ZADD GT, pipelined"


def label(k: int, kind: str, processes: bool = False) -> str:
    where = " (own processes)" if processes else ""
    return f"{k} updater{'s' if k > 1 else ''} via {kind}{where}"


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


async def run(args: argparse.Namespace, db: str, streams: list[str]) -> None:
    db_url = urlparse(PG_ADMIN_URL)._replace(path=f"/{db}").geturl()
    prefix = f"podium-bench-{secrets.token_hex(4)}"
    settings = settings_for(db_url, prefix)
    backends = bootstrap.build(settings)
    redis = aioredis.Redis.from_url(REDIS_URL)
    try:
        await backends.start()  # the migrations
        changes = make_changes(settings, args.messages, args.players, time.time())
        entries = index_entries(settings, changes)
        per_board: dict[str, set[str]] = defaultdict(set)
        for key, member, _ in entries:
            per_board[key].add(member)
        bench = Bench(
            settings,
            backends,
            changes,
            entries,
            {k: len(v) for k, v in per_board.items()},
            source_of(db_url),
            redis,
            db_url,
        )
        counts = [int(x) for x in args.updaters.split(",")]
        results: dict[str, list[float]] = defaultdict(list)

        def stream() -> str:
            streams.append(f"podium-bench-{secrets.token_hex(3)}")
            return streams[-1]

        print(
            f"{len(changes)} changes of {args.players} players on 2 boards "
            f"({', '.join(f'{v} players' for v in bench.players_per_board.values())}); "
            f"batch {settings.workers.batch}, {settings.log.partitions} partitions; "
            f"load average before: {loadavg()}"
        )
        splits: dict[str, list[Split]] = defaultdict(list)
        for r in range(args.repeat):
            busy = await wait_quiet(args.quiet, 60.0)
            if busy == busy:
                print(f"  repeat {r + 1}: machine {busy:.0%} busy at the start", flush=True)
            for k in counts:
                rate, split = await updaters_in_tasks(bench, "nats", k, stream())
                results[label(k, "NatsLog")].append(rate)
                splits[label(k, "NatsLog")].append(split)
            s = streams[-1]  # the same messages, already in the stream
            rate, split = await bare_pull(bench, s)
            results[BARE].append(rate)
            splits[BARE].append(split)
            results[ALONE].append(await log_alone(bench, stream()))
            for k in counts:
                rate, split = await updaters_in_tasks(bench, "outbox", k, "")
                results[label(k, "outbox")].append(rate)
                splits[label(k, "outbox")].append(split)
            results[ZADD].append(await raw_zadd(bench))
            if args.processes:
                for k in counts:
                    rate = await updaters_in_processes(bench, "nats", k, stream())
                    results[label(k, "NatsLog", True)].append(rate)
                    rate = await updaters_in_processes(bench, "outbox", k, "")
                    results[label(k, "outbox", True)].append(rate)
            for name in streams:  # done with: keep the server's disk small
                await delete_stream(name)
            print(f"  repeat {r + 1}: load average {loadavg()}", flush=True)
        print("messages/s, median [min-max]:")
        for name, rates in results.items():
            print(f"  {name:38} {num_spread(rates):>24}")
        med = {name: statistics.median(v) for name, v in results.items()}
        print("one drain's time (a task of this process), median share:")
        for name in (label(1, "NatsLog"), label(1, "outbox"), BARE):
            fetch = statistics.median(x.fetch for x in splits[name])
            settle = statistics.median(x.settle for x in splits[name])
            rest = 1 - fetch - settle
            if name == BARE:
                print(f"  {name:38} fetch {fetch:4.0%}, ack {settle:4.0%}, the rest {rest:4.0%}")
            else:
                print(
                    f"  {name:38} fetch and decode {fetch:4.0%}, ack {settle:4.0%}, "
                    f"the rest (ban check, index write) {rest:4.0%}"
                )
        print("cores used meanwhile, medians (others: nats-server and everyone else):")
        for name in (label(1, "NatsLog"), label(1, "outbox"), BARE):
            parts = [("this process", "generator"), ("postgres, ours", "pg ours")]
            parts += [("redis", "redis"), ("others", "others")]
            used = [(k, statistics.median(x.cores[c] for x in splits[name])) for k, c in parts]
            busy = statistics.median(x.cores["machine_busy"] for x in splits[name])
            line = ", ".join(f"{k} {v:.2f}" for k, v in used)
            print(f"  {name:38} {line}; machine {busy:.0%} busy")
        print("ratios: of the medians; the median [min-max] of each repeat's own ratio")

        def ratio(name: str, a: str, b: str) -> None:
            own = [x / y for x, y in zip(results[a], results[b], strict=True)]
            spread = num_spread(own, "{:.2f}")
            print(f"  {name:44} {med[a] / med[b]:6.2f}   {spread}")

        nats1, outbox1 = label(1, "NatsLog"), label(1, "outbox")
        ratio("updater via NatsLog / bare pull + ack", nats1, BARE)
        ratio("updater via NatsLog / NatsLog alone", nats1, ALONE)
        ratio("updater via NatsLog / raw ZADD GT", nats1, ZADD)
        ratio("updater via NatsLog / via outbox", nats1, outbox1)
        ratio("updater via outbox / raw ZADD GT", outbox1, ZADD)
        for processes in (False, True) if args.processes else (False,):
            for kind in ("NatsLog", "outbox"):
                for k in counts[1:]:
                    many, one = label(k, kind, processes), label(1, kind, processes)
                    ratio(f"{many} / 1", many, one)
        print(f"load average after: {loadavg()}")
    finally:
        n = await clear_keys(redis, prefix)
        print(f"[cleanup] deleted {n} redis keys under {prefix}:", file=sys.stderr)
        await redis.aclose()
        await backends.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--players", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--updaters", default="1,2", help="updater counts, the first 1")
    ap.add_argument(
        "--processes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also each updater in a process of its own",
    )
    ap.add_argument(
        "--quiet",
        type=float,
        default=0.0,
        help="before each repeat, wait (up to 60 s) for a second the machine is less busy",
    )
    args = ap.parse_args()
    if args.updaters.split(",")[0] != "1":
        ap.error("--updaters must start with 1")
    db = f"podium_bench_{secrets.token_hex(4)}"
    streams: list[str] = []
    admin: Any = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{db}"')
        await run(args, db, streams)
    finally:
        for name in streams:
            await delete_stream(name)
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()
        print(f"[cleanup] dropped database {db}, {len(streams)} streams", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
