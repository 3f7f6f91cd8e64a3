"""The change log contract (``podium.ports.log``): one body per behaviour, run against every
backend of the log in ``BACKENDS``.

Changes are committed the way the service commits them, through the store (a result, a
profile), then relayed (nothing to move for the outbox). The outbox's leases run on a clock
the test moves by hand, so the moments "just before" and "just after" a lease ends are
exact. JetStream's leases run on the server's clock: there the same waits are real, scaled
down (``REAL``), with a lease of ``LEASE_S * REAL`` seconds. A "consumer" is one log object,
as one updater holds one: several share the same log.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from podium.domain.boards import BoardSpec
from podium.domain.models import Change, Message, Profile, ProfileChange, ResultRecord, Target
from podium.domain.windows import WindowKind, WindowRule
from podium.log.nats import NatsLog
from podium.log.outbox import OutboxLog
from podium.ports import ChangeLog, Clock, ScoreStore
from podium.store.postgres import PostgresStore
from podium.store.sqlite import SqliteStore
from tests.nats_cluster import (
    Cluster,
    delete_stream,
    need_nats,
    settled,
    started,
    stream_name,
)

T0 = 1_792_800_000  # 2026-10-24T00:00:00Z: a day window starts here
NOW = float(T0 + 86_400)
LEASE_S = 10.0
DAY = BoardSpec("day", WindowRule(WindowKind.DAY))
_DAY_WINDOW = DAY.rule.window_at(T0)
assert _DAY_WINDOW is not None
WINDOW = _DAY_WINDOW.id
TARGETS = [(Target("day", WINDOW, _DAY_WINDOW.start), DAY)]

# Every backend of the change log: (test id, the store whose outbox feeds it, the log). The
# only place that knows them: the machine's NATS, and a 3-node cluster of the tests' own.
BACKENDS = [
    ("outbox-sqlite", "sqlite", "outbox"),
    ("outbox-postgres", "postgres", "outbox"),
    ("nats", "postgres", "nats"),
    ("nats-cluster", "sqlite", "nats-cluster"),
]
REAL = 0.25  # on JetStream, a second of the test's clock is this long for real
PARTITIONS = 8


class ManualClock:
    """A ``podium.ports.Clock`` that moves only when told."""

    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def _store(kind: str, url: str) -> ScoreStore:
    return SqliteStore.from_url(url) if kind == "sqlite" else PostgresStore.from_url(url)


def _consumers(
    kind: str, store: ScoreStore, clock: Clock, nats: tuple[list[str], str] | None
) -> Callable[[], ChangeLog]:
    """A factory of consumers of one log, each as one updater would hold it."""
    if kind == "outbox":
        return lambda: OutboxLog(store, clock, lease_s=LEASE_S)
    if nats is not None:
        servers, stream = nats
        return lambda: NatsLog(
            servers,
            stream,
            clock,
            partitions=PARTITIONS,
            lease_s=LEASE_S * REAL,
            outbox=store,
            source="contract",
        )
    raise AssertionError(f"unknown log {kind!r}")


Sig = tuple[str, str, int]  # what a message says: ("total", player, total) or ("profile", ...)


def sig(m: Message) -> Sig:
    if isinstance(m, Change):
        return ("total", m.player_id, m.tally.total)
    return ("profile", m.player_id, m.version)


def sigs(messages: Sequence[Message]) -> list[Sig]:
    return [sig(m) for m in messages]


def by_player(messages: Sequence[Message]) -> dict[str, list[Sig]]:
    """Each player's messages, in the order given."""
    return per_player(sigs(messages))


def per_player(sent: Sequence[Sig]) -> dict[str, list[Sig]]:
    out: dict[str, list[Sig]] = defaultdict(list)
    for s in sent:
        out[s[1]].append(s)
    return dict(out)


@dataclass
class Kit:
    """One backend of the log, with its store, its clock, and the consumers made of it."""

    store: ScoreStore
    clock: ManualClock
    make: Callable[[], ChangeLog]
    consumers: list[ChangeLog] = field(default_factory=list)
    matches: int = 0
    real: float = 0.0  # how long a second of ``clock`` lasts for real (leases on a server)

    def consumer(self) -> ChangeLog:
        c = self.make()
        self.consumers.append(c)
        return c

    async def relay(self) -> None:
        relay = self.consumers[0] if self.consumers else self.consumer()
        while await relay.relay(1000):
            pass

    async def total(self, player: str, points: int) -> Sig:
        """Commit one result of ``player``; returns what its message must say."""
        self.matches += 1
        r = ResultRecord(player, f"m{self.matches}", "k1", "ranked", T0 + self.matches, 60, points)
        out = await self.store.record(r, TARGETS, self.clock.now(), None)
        await self.relay()
        return ("total", player, out.totals["day"])

    async def profile(self, player: str, name: str) -> Sig:
        version = await self.store.set_profile(Profile(player, name), self.clock.now())
        await self.relay()
        return ("profile", player, version)

    async def wait(self, seconds: float) -> None:
        """Let time pass, as far as leases are concerned."""
        self.clock.t += seconds
        if self.real:
            await asyncio.sleep(seconds * self.real)

    async def wait_out_lease(self) -> None:
        await self.wait(LEASE_S + 1)


Backend = tuple[str, str, str, list[str] | None]


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A 3-node JetStream cluster of the tests' own, for the whole session."""
    c = started(tmp_path_factory.mktemp("nats-cluster"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(params=BACKENDS, ids=[b[0] for b in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    """(store kind, url of a fresh empty database, log kind, NATS servers); a sync fixture,
    so that it asks for the service fixtures (skipped or failed when absent) only when
    needed."""
    _, store_kind, log_kind = request.param
    url: str = request.getfixturevalue(f"{store_kind}_url")
    servers: list[str] | None = None
    if log_kind == "nats":
        servers = [need_nats()]
    elif log_kind == "nats-cluster":
        servers = request.getfixturevalue("nats_cluster").urls
    return store_kind, url, log_kind, servers


@pytest.fixture
async def kit(backend: Backend) -> AsyncIterator[Kit]:
    store_kind, url, log_kind, servers = backend
    store = _store(store_kind, url)
    await store.migrate()
    clock = ManualClock(NOW)
    stream = stream_name()
    nats = (servers, stream) if servers else None
    k = Kit(store, clock, _consumers(log_kind, store, clock, nats), real=REAL if nats else 0.0)
    try:
        if servers and log_kind == "nats-cluster":
            # A cluster's new consumers elect their leaders again for a few seconds, and a
            # new leader may deliver again what the old one had leased: at least once, but
            # not what these bodies look at. They start once the leaders have settled.
            assert await k.consumer().fetch(100) == []  # the stream and every consumer
            await settled(servers, stream)
        yield k
    finally:
        for c in k.consumers:
            await c.close()
        await store.close()
        if servers:
            await delete_stream(servers, stream)


async def drain(log: ChangeLog) -> list[Message]:
    """Fetch and ack everything this consumer can get now."""
    out: list[Message] = []
    while batch := await log.fetch(100):
        await log.ack(batch)
        out += batch
    return out


# -- what is delivered -----------------------------------------------------------------------


async def test_totals_arrive_as_changes_and_profiles_as_profile_changes(kit: Kit) -> None:
    log = kit.consumer()
    sent = [await kit.total("p1", 10), await kit.profile("p2", "Vex"), await kit.total("p1", 5)]
    got = await log.fetch(10)
    assert sorted(sigs(got)) == sorted(sent)
    assert by_player(got) == {"p1": [("total", "p1", 10), ("total", "p1", 15)], "p2": sent[1:2]}
    for m in got:
        assert m.handle is not None
        assert m.committed_at == NOW
        if isinstance(m, Change):
            assert (m.board, m.window, m.removed) == ("day", WINDOW, False)
            assert (m.tally.reached_at, m.tally.version) in {(T0 + 1, 1), (T0 + 2, 2)}
        else:
            assert isinstance(m, ProfileChange) and m.version == 1
    assert await log.fetch(0) == []


async def test_delivery_is_at_least_once(kit: Kit) -> None:
    # A consumer fetches and is never heard of again (it crashed: no ack, no close).
    lost, other = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 1 + i) for i in range(5)]
    assert sorted(sigs(await lost.fetch(10))) == sorted(sent)
    assert await other.fetch(10) == []  # leased to the lost one
    await kit.wait_out_lease()
    assert sorted(sigs(await drain(other))) == sorted(sent)  # nothing lost


async def test_an_unsettled_message_is_delivered_again_after_its_lease(kit: Kit) -> None:
    log = kit.consumer()
    sent = [await kit.total("p1", 3), await kit.total("p1", 4), await kit.profile("p1", "a")]
    first = await log.fetch(10)
    await kit.wait(LEASE_S - 1)
    assert await log.fetch(10) == []  # still leased, to this consumer too
    await kit.wait(2)
    again = await log.fetch(10)
    assert sigs(again) == sigs(first) and sorted(sigs(again)) == sorted(sent)
    await log.ack(again)  # a redelivery settles like a first delivery
    await kit.wait_out_lease()
    assert await log.fetch(10) == []


async def test_ack_removes_for_good(kit: Kit) -> None:
    log = kit.consumer()
    sent = [await kit.total(f"p{i}", 2) for i in range(3)]
    got = await log.fetch(10)
    keep = next(m for m in got if sig(m) == sent[1])
    await log.ack([m for m in got if m is not keep])
    await log.ack([])
    for _ in range(3):  # after lease upon lease, only the unacked one comes back
        await kit.wait_out_lease()
        [back] = await log.fetch(10)
        assert sig(back) == sent[1]
    await log.ack([back])
    await log.ack([back])  # twice is harmless
    for _ in range(3):
        await kit.wait_out_lease()
        assert await kit.consumer().fetch(10) == []


async def test_nak_gives_back_at_once(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 5) for i in range(4)]
    got = await a.fetch(10)
    given_back = [m for m in got if sig(m) in (sent[0], sent[2])]
    await a.nak(given_back)
    # no time passes: another consumer gets them at once, and only them
    assert sorted(sigs(await b.fetch(10))) == [sent[0], sent[2]]
    await a.nak([])


async def test_in_progress_keeps_a_batch_past_its_lease(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 7) for i in range(3)]
    got = await a.fetch(10)
    await kit.wait(LEASE_S - 2)
    await a.in_progress(got)  # the lease starts again from here
    await kit.wait(LEASE_S - 2)  # past where the first lease ended
    assert await b.fetch(10) == []
    await kit.wait(3)  # past the lease that in_progress started
    assert sorted(sigs(await b.fetch(10))) == sorted(sent)
    await a.in_progress([])


# -- order --------------------------------------------------------------------------------------


async def test_order_per_player_across_commits(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    # Several commits of a few players, interleaved, totals and profiles mixed.
    sent: list[Sig] = []
    for i in range(4):
        sent += [await kit.total("p1", 1 + i), await kit.total("p2", 10 + i)]
        sent.append(await kit.profile("p1", f"name {i}"))
        if i % 2:
            sent.append(await kit.total("p3", 100 + i))
    # Within one fetch: each player's messages in commit order.
    everything = await a.fetch(100)
    assert by_player(everything) == per_player(sent)
    await a.ack(everything)
    # First deliveries across small fetches, by two consumers that each settle a fetch
    # before their next: still each player's messages in commit order.
    sent = []
    for i in range(3):
        sent += [await kit.total("p1", 20 + i), await kit.profile("p2", f"again {i}")]
        sent.append(await kit.total("p2", 30 + i))
    seen: list[Message] = []
    for turn in range(100):
        log = (a, b)[turn % 2]
        batch = await log.fetch(2)
        if not batch:
            break
        seen += batch
        await log.ack(batch)
    assert by_player(seen) == per_player(sent)


async def test_a_batch_held_across_an_outage(kit: Kit) -> None:
    # A consumer cannot apply its batch (the index is down): it keeps it, asks for more time
    # as it retries, applies it at last and acks. Meanwhile another consumer takes what was
    # committed later, and never the held batch.
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 1) for i in range(4)]
    held = await a.fetch(100)
    later: list[Sig] = []
    got_by_b: list[Message] = []
    for i in range(6):  # three leases long
        await kit.wait(LEASE_S / 2)
        await a.in_progress(held)
        later.append(await kit.total(f"q{i}", 1))
        got_by_b += await drain(b)
    await a.ack(held)
    assert sorted(sigs(held)) == sorted(sent)
    assert sorted(sigs(got_by_b)) == sorted(later)  # nothing of the held batch
    for _ in range(3):  # and nothing comes back, to anyone
        await kit.wait_out_lease()
        assert await a.fetch(100) == [] and await b.fetch(100) == []


async def test_two_consumers_share_the_work(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i % 6}", 1 + i) for i in range(30)]
    got: dict[str, list[Message]] = {"a": [], "b": []}

    async def work(name: str, log: ChangeLog) -> None:
        while batch := await log.fetch(4):
            got[name] += batch
            await asyncio.sleep(0)  # let the other claim while this one holds its batch
            await log.ack(batch)

    await asyncio.gather(work("a", a), work("b", b))
    both = got["a"] + got["b"]
    assert sorted(sigs(both)) == sorted(sent)  # each message once: none to both, none lost
    assert got["a"] and got["b"]


async def test_partitions_split_the_log_by_player(kit: Kit) -> None:
    log = kit.consumer()
    assert log.partitions >= 1
    sent = [await kit.total(f"p{i % 5}", 1 + i) for i in range(15)]
    owner: dict[str, int] = {}
    got: list[Message] = []
    for p in range(log.partitions):
        mine: list[Message] = []
        while batch := await log.fetch(4, partition=p):
            await log.ack(batch)
            mine += batch
        for m in mine:
            assert owner.setdefault(m.player_id, p) == p  # a player lives in one partition
        got += mine
    assert sorted(sigs(got)) == sorted(sent)
    for bad in (-1, log.partitions):
        with pytest.raises(ValueError):
            await log.fetch(10, partition=bad)
    # Without a partition, a consumer gets every partition's messages.
    more = [await kit.total(f"p{i}", 1) for i in range(5)]
    assert sorted(sigs(await drain(log))) == sorted(more)


async def test_close_gives_back_what_the_consumer_holds(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 9) for i in range(3)]
    got = await a.fetch(10)
    await a.ack([m for m in got if sig(m) == sent[0]])
    await a.close()
    # no time passes: the rest is another consumer's at once, and the acked one is gone
    assert sorted(sigs(await b.fetch(10))) == sorted(sent[1:])


async def test_close_leaves_alone_what_was_delivered_again_to_another(kit: Kit) -> None:
    a, b, c = kit.consumer(), kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 9) for i in range(2)]
    await a.fetch(10)
    await kit.wait_out_lease()
    assert sorted(sigs(await b.fetch(10))) == sorted(sent)  # a's lease ran out: now b's
    await a.close()
    assert await c.fetch(10) == []  # b still holds them
