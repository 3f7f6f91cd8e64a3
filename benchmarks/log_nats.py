"""The change log on NATS JetStream against the outbox, and against bare nats-py.

Three measurements, on the machine's NATS (``PODIUM_BENCH_NATS``, default 127.0.0.1:4222),
each on a stream of its own that is deleted afterwards:

1. commit-to-board p50/p99: results recorded through the service at a steady rate, in the
   embedded configuration (SQLite, the in-process index) with the outbox as the log, then
   with NATS; from the moment ``record_match`` returned to the moment the updater's index
   write of that player returned.
2. relay throughput (outbox rows published, acked by the stream, then acked in the outbox,
   messages/s) beside a bare nats-py publisher sending the same number of messages of the
   same size with message ids, in windows of the same size, awaiting every ack.
3. consumer throughput (fetch and ack through ``NatsLog``, no index write) beside bare nats-py
   (one durable pull consumer, ``fetch`` of the same batch, an ack per message).

    python benchmarks/log_nats.py [--rate 100] [--seconds 10] [--messages 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import tempfile
import time
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig

from _harness import NATS_URL, delete_stream
from podium import bootstrap
from podium.config.settings import parse
from podium.domain.boards import Tally
from podium.domain.models import Change, PlayerResult, ResultRecord, Target
from podium.log.events import encode
from podium.log.nats.log import NatsLog
from podium.store.sqlite import SqliteStore

BATCH = 500


class WallClock:
    def now(self) -> float:
        return time.time()


class Timed:
    """The rank index, noting when each player's first write returned."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.first: dict[str, float] = {}

    async def write(self, key: Any, entries: Any, **kwargs: Any) -> Any:
        out = await self.inner.write(key, entries, **kwargs)
        now = time.perf_counter()
        for player, _ in entries:
            self.first.setdefault(player, now)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


async def commit_to_board(log_url: str, stream: str, rate: float, seconds: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        raw = {
            "store": {"url": f"sqlite:///{tmp}/podium.db"},
            "log": {"url": log_url, "stream": stream},
            "boards": [{"name": "day", "window": "day"}],
        }
        b = bootstrap.build(parse(raw))
        timed = Timed(b.index)
        # the updaters take the index from here
        b.index = timed
        await b.start()
        b.start_roles(["relay", "updater"])
        key, _ = await b.podium.keys.create("bench", ["default"])
        returned: dict[str, float] = {}
        try:
            n = int(rate * seconds)
            start = time.perf_counter()
            for i in range(n):
                await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
                player = f"p{i}"
                results = [PlayerResult(player, 10)]
                await b.podium.matches.record(
                    key, f"m{i}", "default", int(time.time()), 60, results
                )
                returned[player] = time.perf_counter()
            deadline = time.perf_counter() + 30
            while len(timed.first) < n and time.perf_counter() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        finally:
            await b.close()
        missing = n - len(timed.first)
        if missing:
            print(f"  {missing} of {n} results never reached the board", file=sys.stderr)
        return [1000 * (timed.first[p] - t) for p, t in returned.items() if p in timed.first]


async def relay_rate(stream: str, messages: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore.from_url(f"sqlite:///{tmp}/podium.db")
        await store.migrate()
        from podium.domain.boards import BoardSpec
        from podium.domain.windows import WindowKind, WindowRule

        day = BoardSpec("day", WindowRule(WindowKind.DAY))
        w = day.rule.window_at(int(time.time()))
        assert w is not None
        targets = [(Target("day", w.id, w.start), day)]
        for i in range(messages):
            r = ResultRecord(f"p{i}", "m1", "k", "default", int(time.time()), 60, 5)
            await store.record(r, targets, time.time(), None)
        log = NatsLog([NATS_URL], stream, WallClock(), outbox=store, source="bench")
        try:
            await log.fetch(1)  # the stream and its consumers, outside the timing
            start = time.perf_counter()
            moved = 0
            while n := await log.relay(BATCH):
                moved += n
            elapsed = time.perf_counter() - start
        finally:
            await log.close()
            await store.close()
        assert moved == messages, (moved, messages)
        return moved / elapsed


async def bare_publish_rate(stream: str, messages: int, size: int) -> float:
    nc = await nats.connect(NATS_URL)
    try:
        js = nc.jetstream()
        await js.add_stream(name=stream, subjects=[f"{stream}.>"], duplicate_window=300)
        payload = b"x" * size
        start = time.perf_counter()
        for first in range(0, messages, BATCH):
            acks = [
                await js.publish_async(
                    f"{stream}.changes.{i % 16}", payload, headers={"Nats-Msg-Id": f"bare-{i}"}
                )
                for i in range(first, min(messages, first + BATCH))
            ]
            await asyncio.gather(*acks)
        return messages / (time.perf_counter() - start)
    finally:
        await nc.close()


async def consume_rate(stream: str, messages: int) -> float:
    """Fetch and ack through NatsLog what ``relay_rate`` left in ``stream``."""
    log = NatsLog([NATS_URL], stream, WallClock())
    try:
        start = time.perf_counter()
        got = 0
        while got < messages:
            batch = await log.fetch(BATCH)
            if not batch:
                break
            await log.ack(batch)
            got += len(batch)
        elapsed = time.perf_counter() - start
    finally:
        await log.close()
    assert got == messages, (got, messages)
    return got / elapsed


async def bare_consume_rate(stream: str, messages: int) -> float:
    nc = await nats.connect(NATS_URL)
    try:
        js = nc.jetstream()
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=20_000)
        sub = await js.pull_subscribe(f"{stream}.>", durable="bare", stream=stream, config=config)
        start = time.perf_counter()
        got = 0
        while got < messages:
            batch = await sub.fetch(BATCH, timeout=2)
            await asyncio.gather(*(m.ack_sync() for m in batch))
            got += len(batch)
        return got / (time.perf_counter() - start)
    finally:
        await nc.close()


def _sample() -> Change:
    return Change("day", "2026-12-01", "p12345", Tally(50, int(time.time()), 1), time.time())


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=100.0, help="results/s for commit-to-board")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--messages", type=int, default=20_000, help="for the throughputs")
    args = ap.parse_args()
    names = [f"podium-bench-{secrets.token_hex(3)}" for _ in range(4)]
    try:
        print(f"commit-to-board, {args.rate:.0f} results/s for {args.seconds:.0f}s (ms):")
        for label, url, stream in (("outbox", "outbox://", names[0]), ("nats", NATS_URL, names[0])):
            ms = await commit_to_board(url, stream, args.rate, args.seconds)
            print(f"  {label:7} p50 {pct(ms, 50):7.1f}  p99 {pct(ms, 99):7.1f}  (n={len(ms)})")
        relayed = await relay_rate(names[1], args.messages)
        size = len(encode(_sample(), "bench", args.messages))  # one total's event
        bare = await bare_publish_rate(names[2], args.messages, size)
        print(f"relay (outbox -> NATS, {args.messages} rows): {relayed:8.0f} msg/s")
        print(f"bare nats-py publisher (acks awaited):     {bare:8.0f} msg/s")
        consumed = await consume_rate(names[1], args.messages)
        bare_in = await bare_consume_rate(names[2], args.messages)
        print(f"NatsLog fetch + ack:                       {consumed:8.0f} msg/s")
        print(f"bare nats-py pull fetch + ack_sync:        {bare_in:8.0f} msg/s")
    finally:
        for name in names:
            await delete_stream(name)


if __name__ == "__main__":
    asyncio.run(main())
