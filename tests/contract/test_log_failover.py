"""The NATS log on a 3-node cluster of the test's own, with one node killed (SIGKILL) while
results are committed, relayed, fetched and acked: nothing the stream acknowledged is lost,
and delivery goes on on the two nodes left."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
import pytest

from podium.domain.boards import BoardSpec
from podium.domain.models import Change, Message, ResultRecord, Target
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import Unavailable
from podium.log.nats.log import NatsLog
from podium.store.sqlite import SqliteStore
from tests.nats_cluster import cluster

DAY = BoardSpec("day", WindowRule(WindowKind.DAY))
RESULTS = 240
PLAYERS = 8


class WallClock:
    def now(self) -> float:
        return time.time()


@pytest.mark.slow  # a cluster of its own, a node killed mid-run
async def test_a_node_killed_mid_run_loses_nothing_acknowledged(tmp_path: Path) -> None:
    window = DAY.rule.window_at(int(time.time()))
    assert window is not None
    targets = [(Target("day", window.id, window.start), DAY)]
    store = SqliteStore.from_url(f"sqlite:///{tmp_path}/podium.db")
    await store.migrate()
    clock = WallClock()
    async with cluster(tmp_path / "nats") as c:
        relay = NatsLog(c.urls, "failover", clock, partitions=4, lease_s=2.0, outbox=store)
        consumers = [NatsLog(c.urls, "failover", clock, partitions=4, lease_s=2.0)]
        consumers.append(NatsLog(c.urls, "failover", clock, partitions=4, lease_s=2.0))
        final: dict[str, int] = {}  # what each player's last change must say
        committed = 0
        acked: list[tuple[float, Message]] = []
        killed_at: float | None = None
        done = asyncio.Event()

        async def produce() -> None:
            nonlocal committed
            for i in range(RESULTS):
                player = f"p{i % PLAYERS}"
                r = ResultRecord(player, f"m{i}", "k", "ranked", int(time.time()), 60, 1 + i % 7)
                out = await store.record(r, targets, clock.now(), None)
                final[player] = out.totals["day"]
                committed += 1
                await asyncio.sleep(0.01)

        refused: list[str] = []  # the relay's outages, the last said if the outbox stays

        async def relaying() -> None:
            while not done.is_set():
                try:
                    if not await relay.relay(50):
                        await asyncio.sleep(0.01)
                except Unavailable as e:
                    refused.append(str(e))
                    await asyncio.sleep(0.1)

        async def consume(log: NatsLog) -> None:
            while not done.is_set():
                try:
                    batch = await log.fetch(20)
                    if batch:
                        await log.ack(batch)
                        acked.extend((time.monotonic(), m) for m in batch)
                    else:
                        await asyncio.sleep(0.02)
                except Unavailable:
                    await asyncio.sleep(0.1)  # unacked: delivered again after its lease

        async def kill_the_stream_leader() -> None:
            nonlocal killed_at
            while committed < RESULTS // 3:
                await asyncio.sleep(0.01)
            nc = await nats.connect(servers=c.urls)
            try:
                placed = (await nc.jetstream().stream_info("failover")).cluster
            finally:
                await nc.close()
            assert placed is not None and placed.leader is not None
            assert len(placed.replicas or []) == 2  # three copies: the leader and two
            c.kill(int(placed.leader.removeprefix("n")))
            killed_at = time.monotonic()

        def totals_seen() -> dict[str, int]:
            seen: dict[str, int] = {}
            for _, m in acked:
                if isinstance(m, Change):
                    seen[m.player_id] = max(seen.get(m.player_id, 0), m.tally.total)
            return seen

        workers = [asyncio.create_task(relaying())]
        workers += [asyncio.create_task(consume(log)) for log in consumers]
        try:
            await asyncio.gather(produce(), kill_the_stream_leader())
            # Generous: the cluster elects a new leader in seconds on a quiet machine, but CI
            # once left this one's whole outbox unsent for 60 s among its heaviest fleets.
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline:
                pending, _ = await store.outbox_backlog(clock.now())
                if pending == 0 and totals_seen() == final:
                    break
                await asyncio.sleep(0.1)
        finally:
            done.set()
            await asyncio.gather(*workers, return_exceptions=True)
            for log in [relay, *consumers]:
                await log.close()
            await store.close()

    assert killed_at is not None
    # Every committed change went out (the outbox is empty) and every one came back: the
    # totals of every player, in full, one delivery at least per change.
    left = await _backlog(tmp_path)
    assert left == 0, f"{left} rows unsent; the relay's outages: {len(refused)}, {refused[-3:]}"
    assert totals_seen() == final
    changes = {(m.player_id, m.tally.total) for _, m in acked if isinstance(m, Change)}
    assert len(changes) == RESULTS  # each result raised its player's total: all distinct
    # Delivery went on after the kill: changes committed after it were acked after it.
    assert any(t > killed_at for t, _ in acked)


async def _backlog(tmp_path: Path) -> int:
    store = SqliteStore.from_url(f"sqlite:///{tmp_path}/podium.db")
    try:
        pending, _ = await store.outbox_backlog(time.time())
        return pending
    finally:
        await store.close()
