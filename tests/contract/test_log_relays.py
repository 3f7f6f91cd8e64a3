"""Many relays at once: one store database is relayed by one process at a time, under a
lease kept in JetStream (``log/nats/lease.py``), so that a player's changes reach the stream
in commit order; the others stand by and take over when its holder stops. On the machine's
NATS, a stream (and lease bucket) of each test's own."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from podium import bootstrap, metrics
from podium.config.settings import parse
from podium.log.events import source_of
from podium.log.nats.log import NatsLog
from podium.ports import ChangeLog
from podium.store.sqlite import SqliteStore
from tests.contract.test_log_nats import raw_messages, record, store, stream

__all__ = ["store", "stream"]  # fixtures, used by name

LEASE_S = 1.0


class WallClock:
    def now(self) -> float:
        return time.time()


def relay(url: str, name: str, outbox: Any, holder: str, source: str = "db1") -> NatsLog:
    """A relay of one database's outbox."""
    one = {source: outbox}

    async def databases() -> dict[str, Any]:
        return one

    return relay_of(url, name, databases, holder)


def relay_of(url: str, name: str, databases: Any, holder: str) -> NatsLog:
    """A relay of every database ``databases()`` names."""
    return NatsLog(
        [url],
        name,
        WallClock(),
        partitions=4,
        lease_s=LEASE_S,
        databases=databases,
        holder=holder,
    )


async def relay_all(log: ChangeLog) -> int:
    moved = 0
    while n := await log.relay(100):
        moved += n
    return moved


def in_stream_order(messages: list[Any]) -> dict[str, list[int]]:
    """Each player's totals on the day board, in the order the stream holds them."""
    out: dict[str, list[int]] = {}
    for m in messages:
        e = json.loads(m.data)
        if e["type"] == "total" and e["board"] == "day":
            out.setdefault(e["playerId"], []).append(e["total"])
    return out


async def until(check: Callable[[], Awaitable[bool]], timeout: float) -> float:
    start = time.monotonic()
    while not await check():
        assert time.monotonic() - start < timeout, "not within the time allowed"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def test_two_relays_of_one_database_keep_each_players_order(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    url, name = stream
    a, b = relay(url, name, store, "a"), relay(url, name, store, "b")
    moved = {"a": 0, "b": 0}
    done = asyncio.Event()

    async def run(log: NatsLog, who: str) -> None:
        while not done.is_set():
            moved[who] += await log.relay(7)  # small batches: many steps, interleaved
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(run(a, "a")), asyncio.create_task(run(b, "b"))]
    try:
        for i in range(60):  # five players, twelve results each, while both relay
            await record(store, f"p{i % 5}", f"m{i}", 1 + i)
            await asyncio.sleep(0.002)
        await until(lambda: _empty(store), timeout=10)
    finally:
        done.set()
        await asyncio.gather(*tasks)
        await a.close()
        await b.close()
    # one of them relayed everything, the other stood by
    assert sorted(moved.values()) == [0, 120]  # 60 results, on two boards each
    for player, totals in in_stream_order(await raw_messages(url, name)).items():
        assert totals == sorted(totals) and len(totals) == 12, player


async def _empty(store: SqliteStore) -> bool:
    return (await store.outbox_backlog(time.time()))[0] == 0


async def test_a_standby_takes_over_after_the_holder_stops_renewing(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    url, name = stream
    a, b = relay(url, name, store, "a"), relay(url, name, store, "b")
    try:
        await record(store, "p1", "m1", 5)
        assert await relay_all(a) == 2
        assert await b.relay(100) == 0  # a holds it
        # a claims rows and dies before publishing them: no close, no renewal
        await record(store, "p1", "m2", 6)
        claimed = await store.claim_changes(100, 0.0, time.time() + LEASE_S)
        assert len(claimed) == 2
        await record(store, "p1", "m3", 7)  # a later row of the same player

        async def b_relays() -> bool:
            return await b.relay(100) > 0

        waited = await until(b_relays, timeout=10)
        assert waited < LEASE_S * 3
        await relay_all(b)
        assert await a.relay(100) == 0  # a's renewal is refused: it stopped holding it
        assert a.relay_leases.ttl == LEASE_S
        # the dead holder's claimed rows went out before the later row, in order
        assert in_stream_order(await raw_messages(url, name)) == {"p1": [5, 11, 18]}
        assert await _empty(store)
    finally:
        await a.close()
        await b.close()


async def test_a_clean_stop_hands_over_at_once(stream: tuple[str, str], store: SqliteStore) -> None:
    url, name = stream
    a = relay(url, name, store, "a")
    b = relay(url, name, store, "b", source="db1")
    await record(store, "p1", "m1", 5)
    assert await relay_all(a) == 2
    assert await b.relay(100) == 0
    await a.close()  # gives its lease back
    await record(store, "p1", "m2", 6)
    try:

        async def b_relays() -> bool:
            return await b.relay(100) > 0

        # within a quarter lease (b's next try), not a whole lease
        assert await until(b_relays, timeout=10) < LEASE_S * 0.6
    finally:
        await b.close()


async def test_each_database_of_a_split_store_has_its_own_relay(
    stream: tuple[str, str], postgres_databases: Callable[[int], Awaitable[list[str]]]
) -> None:
    url, name = stream
    home, one, two = await postgres_databases(3)
    settings = parse(
        {
            "store": {"url": home, "shards": [one, two]},
            "log": {"url": f"nats://{url.removeprefix('nats://')}", "stream": name},
            "workers": {"lease_s": LEASE_S},
        }
    )
    first, second = bootstrap.build(settings), bootstrap.build(settings)
    closed = False
    try:
        await first.store.migrate()
        store = first.store
        players = [f"p{i}" for i in range(40)]
        for i, p in enumerate(players):
            await record(store, p, f"m{i}", 3)  # type: ignore[arg-type]
        # one process takes both databases' leases; the other stands by
        assert await relay_all(first.log) == 80
        assert await second.log.relay(100) == 0
        events = [json.loads(m.data) for m in await raw_messages(url, name)]
        sources = {e["source"] for e in events}
        assert sources == {source_of(one), source_of(two)}
        for e in events:  # each event named by the database that holds its player
            assert e["source"] == source_of(store.url_of(e["playerId"]))  # type: ignore[attr-defined]
        # the holder stops cleanly: the standby takes both over at once
        await first.close()
        closed = True
        await record(second.store, "p1", "m99", 4)  # type: ignore[arg-type]

        async def second_relays() -> bool:
            return await second.log.relay(100) > 0

        await until(second_relays, timeout=10)
    finally:
        await second.close()
        if not closed:
            await first.close()


async def test_databases_spread_over_the_relays(stream: tuple[str, str], tmp_path: Any) -> None:
    url, name = stream
    stores = [SqliteStore.from_url(f"sqlite:///{tmp_path}/{i}.db") for i in range(4)]
    for st in stores:
        await st.migrate()
    every = {f"db{i}": st for i, st in enumerate(stores)}

    async def databases() -> dict[str, Any]:
        return every

    a, b = relay_of(url, name, databases, "a"), relay_of(url, name, databases, "b")
    try:
        await a.relay(100)
        assert len(a.relay_leases.held()) == 4  # alone: every database

        async def spread() -> bool:
            await a.relay(100)
            await b.relay(100)
            return len(a.relay_leases.held()) == len(b.relay_leases.held()) == 2

        await until(spread, timeout=10)  # b joined: a gave two back, b took them
        assert metrics.RELAY_DATABASES._value.get() == 2  # b's, the last to relay
        held = a.relay_leases.held() | b.relay_leases.held()
        assert held == set(every)
        await a.close()  # b alone again: it takes a's two at once

        async def b_has_all() -> bool:
            await b.relay(100)
            return len(b.relay_leases.held()) == 4

        assert await until(b_has_all, timeout=10) < LEASE_S
    finally:
        await a.close()
        await b.close()
        for st in stores:
            await st.close()


def test_the_lease_bucket_is_named_by_the_stream() -> None:
    log = NatsLog(["nats://127.0.0.1:1"], "game-a", WallClock())
    assert log.relay_leases.bucket == "game-a-relays"


class SlowClaims:
    """An outbox whose claims take ``claim_s`` (a claim's round trip on a slow link); the
    rest is the store's own."""

    def __init__(self, store: SqliteStore, claim_s: float) -> None:
        self._store = store
        self._claim_s = claim_s

    async def claim_changes(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self._claim_s)
        return await self._store.claim_changes(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_step_that_outlasts_its_stop_renews_its_lease_and_relays_every_wave(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    """A claim slower than two thirds of a lease (a relay's stop: its lease's end less a
    publish's timeout, a third of it) used to leave a step past its stop before its first
    publish: it gave every row back, and the next step claimed them again, for ever. The
    step renews its lease as it goes instead: one step relays a player's whole chain, each
    of its waves after the claim. The claim ends half a third of a lease past the stop, a
    third before the lease's end, so a busy machine does not make its renewal late."""
    url, name = stream
    lease_s = 6.0  # its third (2 s) is the publish timeout's share: the stop is at 4 s
    rows = 0
    for i in range(6):  # one player: a chain of 12 rows, published in 12 waves
        await record(store, "p1", f"m{i}", 1 + i)
        rows += 2
    slow = SlowClaims(store, lease_s * 3 / 4)  # 4.5 s: past the stop, before the end

    async def databases() -> dict[str, Any]:
        return {"db1": slow}

    a = NatsLog(
        [url], name, WallClock(), partitions=4, lease_s=lease_s, databases=databases, holder="a"
    )
    try:
        assert await a.relay(100) == rows
        assert in_stream_order(await raw_messages(url, name)) == {"p1": [1, 3, 6, 10, 15, 21]}
        assert await _empty(store)
    finally:
        await a.close()


async def test_a_relay_holding_its_databases_does_not_wait_for_the_share_out(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    """The share-out (the relay's member key written, the bucket's keys listed) took seconds
    before every step over a slow link, once longer than the lease it was to keep. Once the
    relay holds its databases it runs beside the steps: a step relays while it hangs."""
    url, name = stream
    a = relay(url, name, store, "a")
    try:
        await record(store, "p1", "m1", 5)
        assert await relay_all(a) == 2  # the first share-out took the lease
        leases = a.relay_leases
        share_out = leases._share_out
        hanging = asyncio.Event()
        started = asyncio.Event()

        async def slow(*args: Any, **kwargs: Any) -> None:
            started.set()
            await hanging.wait()
            await share_out(*args, **kwargs)

        leases._share_out = slow  # type: ignore[method-assign]
        await asyncio.sleep(LEASE_S / 2)  # the next share-out due
        await record(store, "p1", "m2", 6)
        # relayed while the share-out hangs (awaited in the step, it would hold it for ever:
        # the bound only turns a hang into a failure)
        assert await asyncio.wait_for(relay_all(a), 30) == 2
        assert started.is_set() and not hanging.is_set()
        hanging.set()
        await until(lambda: _share_out_done(leases), timeout=10)  # fails past its timeout
        assert leases.held() == {"db1"}
    finally:
        await a.close()


async def _share_out_done(leases: Any) -> bool:
    return leases._sharing is None or leases._sharing.done()
