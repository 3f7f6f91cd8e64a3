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
import functools
import time
import warnings
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import cast

import pytest

from podium.domain.boards import BoardSpec
from podium.domain.marks import is_mark, mark_players
from podium.domain.models import Change, Message, Profile, ProfileChange, ResultRecord, Target
from podium.domain.windows import WindowKind, WindowRule
from podium.log.events import partition_of
from podium.log.kafka.log import KafkaLog
from podium.log.nats.log import NatsLog
from podium.log.outbox import OutboxLog
from podium.ports import ChangeLog, Marking, ScoreStore
from podium.store.postgres import PostgresStore
from podium.store.sqlite import SqliteStore
from tests.kafka_cluster import delete_log_topics, group_name, need_kafka, topic_name
from tests.nats_cluster import (
    Ahead,
    Cluster,
    Leaders,
    delete_stream,
    leaders,
    need_nats,
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
# only place that knows them: the machine's NATS, a 3-node cluster of the tests' own, and the
# machine's Kafka broker.
BACKENDS = [
    ("outbox-sqlite", "sqlite", "outbox"),
    ("outbox-postgres", "postgres", "outbox"),
    ("nats", "postgres", "nats"),
    ("nats-cluster", "sqlite", "nats-cluster"),
    ("kafka", "postgres", "kafka"),
]
REAL = 0.25  # on JetStream and Kafka, a second of the test's clock is this long for real
PARTITIONS = 8


class ManualClock:
    """A ``podium.ports.Clock`` that moves only when told."""

    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def _store(kind: str, url: str) -> ScoreStore:
    return SqliteStore.from_url(url) if kind == "sqlite" else PostgresStore.from_url(url)


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


@dataclass(frozen=True)
class Moment:
    """A moment of a body: on the test's clock, and for real (``time.monotonic()``)."""

    clock: float
    real: float


@dataclass
class Kit:
    """One backend of the log, with its store, its clock, and the consumers made of it.

    On JetStream a lease runs on the server, from when the consumer's leader delivers the
    message (or takes an ``in_progress``): some time after the call that asked for it began,
    some time before that call returned. So a check that a lease still holds is timed from
    a ``mark()`` taken before that call, and a check that it has run out from one taken
    after it. A check that a lease still holds proves nothing if it reached the server
    after the lease could have run out (a machine too busy to keep the test's time): such
    a check is made ``within`` the lease, which notes when it was late; a body that fails
    after a late check, or after the cluster gave a consumer a new leader (which may deliver
    again at once what the old one had leased, as at least once allows), is run again on a
    new stream (``timed``) instead of failing the log."""

    store: ScoreStore
    clock: ManualClock
    new_store: Callable[[], Awaitable[ScoreStore]]  # another, fresh and migrated
    servers: list[str] | None = None  # JetStream's, or Kafka's bootstrap; None: the outbox
    streams: Callable[[], Awaitable[tuple[str, Leaders]]] | None = None  # a cluster's
    stream: str = ""
    leaders: Leaders | None = None  # the consumers' leaders, on a cluster, as the body began
    consumers: list[ChangeLog] = field(default_factory=list)
    matches: int = 0
    late: str | None = None
    kafka: bool = False  # ``servers`` is a Kafka broker, ``stream`` a topic of the body's own
    group: str = ""

    @property
    def real(self) -> float:
        """How long a second of ``clock`` lasts for real (leases on a server), or 0."""
        return REAL if self.servers else 0.0

    async def start(self) -> None:
        """A stream of the body's own: one made ahead on a cluster, with its consumers'
        leaders settled; a name on one server (made on first use)."""
        if self.streams is not None:
            self.stream, self.leaders = await self.streams()
        elif self.kafka:
            self.stream = topic_name()
            self.group = group_name(self.stream)
        elif self.servers:
            self.stream = stream_name()

    async def stop(self) -> None:
        consumers, self.consumers = self.consumers, []
        for c in consumers:
            await c.close()
        if not self.stream:
            return  # none was made: its making failed (the setup's error says why)
        if self.kafka and self.servers:
            await delete_log_topics(self.servers[0], self.stream)
        elif self.servers:
            await delete_stream(self.servers, self.stream)

    async def again(self) -> None:
        """A body run again starts anew: a new store, a new stream, new consumers."""
        await self.stop()
        await self.store.close()
        self.store = await self.new_store()
        self.clock.t, self.matches, self.late = NOW, 0, None
        await self.start()

    async def untimed(self) -> str | None:
        """Why this body's leases could not be timed, if they could not."""
        if self.late is not None:
            return self.late
        if self.servers and self.leaders is not None:
            now = await leaders(self.servers, self.stream)
            if now != self.leaders:
                return f"the consumers changed leaders: {self.leaders} then {now}"
        return None

    def consumer(self) -> ChangeLog:
        """One more consumer of the log, as one updater would hold it."""
        c: ChangeLog
        if not self.servers:
            c = OutboxLog(self.store, self.clock, lease_s=LEASE_S)
        elif self.kafka:
            c = KafkaLog(
                self.servers[0],
                self.clock,
                topic=self.stream,
                events_topic=f"{self.stream}-events",
                group=self.group,
                partitions=PARTITIONS,
                lease_s=LEASE_S * REAL,
                outbox=self.store,
                source="contract",
            )
        else:
            c = NatsLog(
                self.servers,
                self.stream,
                self.clock,
                partitions=PARTITIONS,
                lease_s=LEASE_S * REAL,
                outbox=self.store,
                source="contract",
            )
        self.consumers.append(c)
        return c

    async def relay(self) -> None:
        relay = self.consumers[0] if self.consumers else self.consumer()
        while await relay.relay(1000):
            pass

    async def total(self, player: str, points: int, relay: bool = True) -> Sig:
        """Commit one result of ``player`` (and relay it, unless told not to yet); returns
        what its message must say."""
        self.matches += 1
        r = ResultRecord(player, f"m{self.matches}", "k1", "ranked", T0 + self.matches, 60, points)
        out = await self.store.record(r, TARGETS, self.clock.now(), None)
        if relay:
            await self.relay()
        return ("total", player, out.totals["day"])

    async def profile(self, player: str, name: str) -> Sig:
        version = await self.store.set_profile(Profile(player, name), self.clock.now())
        await self.relay()
        return ("profile", player, version)

    def mark(self) -> Moment:
        return Moment(self.clock.t, time.monotonic())

    async def wait(self, seconds: float, since: Moment | None = None) -> None:
        """Let time pass, as far as leases are concerned: until ``seconds`` after ``since``
        (now, by default), if that is not past already."""
        since = since or self.mark()
        self.clock.t = max(self.clock.t, since.clock + seconds)
        if self.real:
            await asyncio.sleep(max(0.0, since.real + seconds * self.real - time.monotonic()))

    async def wait_out_lease(self, since: Moment | None = None) -> None:
        """Until past a lease that began before ``since`` (now, by default)."""
        await self.wait(LEASE_S + 1, since)

    @contextmanager
    def within(self, lease: Moment, what: str) -> Iterator[None]:
        """A step that must reach the log before a lease that began after ``lease`` runs
        out: noted as late (``untimed``) if it ended after the lease could have."""
        try:
            yield
        finally:
            over = time.monotonic() - (lease.real + LEASE_S * self.real)
            if self.real and over > 0 and self.late is None:
                self.late = f"{what} ended {over:.3f}s after the lease could have run out"

    async def collect(self, fetch: Callable[[], Awaitable[list[Message]]], n: int) -> list[Message]:
        """What ``fetch`` brings once a lease ran out, until ``n`` messages: the outbox has
        them at once (its clock moved past the lease), a JetStream server as soon as its
        own timer has fired, which a busy machine may put off."""
        got = await fetch()
        deadline = time.monotonic() + (10 * LEASE_S * self.real)
        while self.real and len(got) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            got += await fetch()
        return got

    async def drain(self, log: ChangeLog) -> list[Message]:
        """Fetch and ack everything this consumer can get now, each batch acked within its
        lease."""
        out: list[Message] = []
        while True:
            leased = self.mark()
            batch = await log.fetch(100)
            if not batch:
                return out
            with self.within(leased, "an ack"):
                await log.ack(batch)
            out += batch


ATTEMPTS = 3
# The longest one run of a body may take (they take 20 s at most, on a loaded machine): past
# it the body is stopped where it waits, and the failure's traceback shows that await. One
# body once hung until pytest-timeout's 300 s, whose dump shows threads, not coroutines.
BODY_S = 120.0


def timed(body: Callable[[Kit], Awaitable[None]]) -> Callable[[Kit], Awaitable[None]]:
    """Run a body again, on a new stream, when it failed after its leases could not be
    timed (``Kit.untimed``); up to ``ATTEMPTS`` times, the last failure raised as it is."""

    @functools.wraps(body)
    async def run(kit: Kit) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                async with asyncio.timeout(BODY_S):
                    await body(kit)
                return
            except Exception:
                why = await kit.untimed()
                if why is None or attempt == ATTEMPTS:
                    raise
            warnings.warn(f"{body.__name__}: leases not timed ({why}): run again", stacklevel=1)
            await kit.again()

    return run


Backend = tuple[str, str, str, list[str] | None]


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A 3-node JetStream cluster of the tests' own, for the whole session."""
    c = started(tmp_path_factory.mktemp("nats-cluster"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def cluster_streams(nats_cluster: Cluster) -> Iterator[Ahead]:
    """Streams on the cluster made ahead of the bodies that use them: a cluster's new
    consumers elect their leaders again for a few seconds, and a new leader may deliver
    again what the old one had leased (at least once, but not what these bodies look at),
    so a body starts once its stream's leaders have settled; that wait is spent while the
    bodies before it run."""

    async def make(name: str) -> None:
        log = NatsLog(
            nats_cluster.urls,
            name,
            ManualClock(NOW),
            partitions=PARTITIONS,
            lease_s=LEASE_S * REAL,
        )
        try:
            assert await log.fetch(100) == []  # the stream and every consumer
        finally:
            await log.close()

    ahead = Ahead(nats_cluster.urls, make)
    try:
        yield ahead
    finally:
        ahead.close()


@pytest.fixture(
    params=[
        # the cluster's bodies are slow: leases waited out for real, and a stream each
        pytest.param(b, id=b[0], marks=[pytest.mark.slow] if b[2] == "nats-cluster" else [])
        for b in BACKENDS
    ]
)
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
        request.getfixturevalue("cluster_streams")
    elif log_kind == "kafka":
        servers = [need_kafka()]
    return store_kind, url, log_kind, servers


@pytest.fixture
async def kit(backend: Backend, request: pytest.FixtureRequest) -> AsyncIterator[Kit]:
    store_kind, url, log_kind, servers = backend
    made = 0

    async def new_store() -> ScoreStore:
        nonlocal made
        made += 1
        if made == 1:
            at = url
        elif store_kind == "sqlite":
            at = f"{url}-{made}"
        else:  # made already for the first: the fixture is at hand
            [at] = await request.getfixturevalue("pg_databases").make(1)
        store = _store(store_kind, at)
        await store.migrate()
        return store

    streams = None
    if log_kind == "nats-cluster":
        streams = request.getfixturevalue("cluster_streams").take
    k = Kit(await new_store(), ManualClock(NOW), new_store, servers, streams)
    k.kafka = log_kind == "kafka"
    try:
        await k.start()
        yield k
    finally:
        await k.stop()
        await k.store.close()


# -- what is delivered -----------------------------------------------------------------------


@timed
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


@timed
async def test_delivery_is_at_least_once(kit: Kit) -> None:
    # A consumer fetches and is never heard of again (it crashed: no ack, no close).
    lost, other = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 1 + i) for i in range(5)]
    leased = kit.mark()
    assert sorted(sigs(await lost.fetch(10))) == sorted(sent)
    fetched = kit.mark()
    with kit.within(leased, "a fetch while leased to the lost one"):
        assert await other.fetch(10) == []  # leased to the lost one
    await kit.wait_out_lease(since=fetched)
    got = await kit.collect(lambda: kit.drain(other), len(sent))
    assert sorted(sigs(got)) == sorted(sent)  # nothing lost


@timed
async def test_an_unsettled_message_is_delivered_again_after_its_lease(kit: Kit) -> None:
    log = kit.consumer()
    sent = [await kit.total("p1", 3), await kit.total("p1", 4), await kit.profile("p1", "a")]
    leased = kit.mark()
    first = await log.fetch(10)
    fetched = kit.mark()
    await kit.wait(LEASE_S - 1, since=leased)
    with kit.within(leased, "the fetch a second before the lease's end"):
        assert await log.fetch(10) == []  # still leased, to this consumer too
    await kit.wait(LEASE_S + 1, since=fetched)
    again = await kit.collect(lambda: log.fetch(10), len(sent))
    assert sigs(again) == sigs(first) and sorted(sigs(again)) == sorted(sent)
    await log.ack(again)  # a redelivery settles like a first delivery
    await kit.wait_out_lease()
    assert await log.fetch(10) == []


@timed
async def test_ack_removes_for_good(kit: Kit) -> None:
    log = kit.consumer()
    sent = [await kit.total(f"p{i}", 2) for i in range(3)]
    leased = kit.mark()
    got = await log.fetch(10)
    keep = next(m for m in got if sig(m) == sent[1])
    with kit.within(leased, "the acks"):
        await log.ack([m for m in got if m is not keep])
    await log.ack([])
    for _ in range(3):  # after lease upon lease, only the unacked one comes back
        await kit.wait_out_lease()
        [back] = await kit.collect(lambda: log.fetch(10), 1)
        assert sig(back) == sent[1]
    await log.ack([back])
    await log.ack([back])  # twice is harmless
    for _ in range(3):
        await kit.wait_out_lease()
        assert await kit.consumer().fetch(10) == []


@timed
async def test_nak_gives_back_at_once(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 5) for i in range(4)]
    leased = kit.mark()
    got = await a.fetch(10)
    given_back = [m for m in got if sig(m) in (sent[0], sent[2])]
    await a.nak(given_back)
    # no time passes: another consumer gets them at once, and only them
    with kit.within(leased, "the fetch while the rest is leased"):
        assert sorted(sigs(await b.fetch(10))) == [sent[0], sent[2]]
    await a.nak([])


@timed
async def test_in_progress_keeps_a_batch_past_its_lease(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 7) for i in range(3)]
    leased = kit.mark()
    got = await a.fetch(10)
    fetched = kit.mark()
    await kit.wait(LEASE_S - 2, since=leased)
    renewed = kit.mark()
    with kit.within(leased, "in_progress"):
        await a.in_progress(got)  # the lease starts again from here
    progressed = kit.mark()
    await kit.wait(LEASE_S - 2, since=renewed)
    await kit.wait_out_lease(since=fetched)  # past where the first lease ended
    with kit.within(renewed, "the fetch before the new lease's end"):
        assert await b.fetch(10) == []
    await kit.wait_out_lease(since=progressed)  # past the lease that in_progress started
    assert sorted(sigs(await kit.collect(lambda: b.fetch(10), len(sent)))) == sorted(sent)
    await a.in_progress([])


# -- order --------------------------------------------------------------------------------------


@timed
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
    leased = kit.mark()
    everything = await a.fetch(100)
    assert by_player(everything) == per_player(sent)
    with kit.within(leased, "the ack"):
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
        leased = kit.mark()
        batch = await log.fetch(2)
        if not batch:
            break
        seen += batch
        with kit.within(leased, "an ack"):
            await log.ack(batch)
    assert by_player(seen) == per_player(sent)


@timed
async def test_a_batch_held_across_an_outage(kit: Kit) -> None:
    # A consumer cannot apply its batch (the index is down): it keeps it, asks for more time
    # as it retries, applies it at last and acks. Meanwhile another consumer takes what was
    # committed later, and never the held batch.
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 1) for i in range(4)]
    leased = kit.mark()
    # (``collect``: a JetStream cluster acks a publish once a quorum of its servers stored
    # it; a consumer whose leader is the third may deliver it a moment later.)
    held = await kit.collect(lambda: a.fetch(100), len(sent))
    later: list[Sig] = []
    got_by_b: list[Message] = []
    for i in range(6):  # three leases long
        await kit.wait(LEASE_S / 2, since=leased)
        renewed = kit.mark()
        with kit.within(leased, "in_progress"):
            await a.in_progress(held)
        leased = renewed
        later.append(await kit.total(f"q{i}", 1))
        with kit.within(leased, "the other consumer's fetches"):
            got_by_b += await kit.drain(b)
    with kit.within(leased, "the other consumer's fetches"):  # the last total, if not yet
        got_by_b += await kit.collect(lambda: kit.drain(b), len(later) - len(got_by_b))
    with kit.within(leased, "the ack"):
        await a.ack(held)
    assert sorted(sigs(held)) == sorted(sent)
    assert sorted(sigs(got_by_b)) == sorted(later)  # nothing of the held batch
    for _ in range(3):  # and nothing comes back, to anyone
        await kit.wait_out_lease()
        assert await a.fetch(100) == [] and await b.fetch(100) == []


@timed
async def test_two_consumers_share_the_work(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i % 6}", 1 + i) for i in range(30)]
    got: dict[str, list[Message]] = {"a": [], "b": []}
    claimed = {"a": asyncio.Event(), "b": asyncio.Event()}  # a first fetch came back

    async def work(name: str, other: str, log: ChangeLog) -> None:
        try:
            while True:
                leased = kit.mark()
                batch = await log.fetch(4)
                claimed[name].set()
                if not batch:
                    return
                got[name] += batch
                # Let the other claim while this one holds its batch: it may be slower to
                # start (a connection of its own to open), and would find nothing left.
                await claimed[other].wait()
                with kit.within(leased, "an ack"):
                    await log.ack(batch)
        finally:
            claimed[name].set()

    await asyncio.gather(work("a", "b", a), work("b", "a", b))
    both = got["a"] + got["b"]
    assert sorted(sigs(both)) == sorted(sent)  # each message once: none to both, none lost
    assert got["a"] and got["b"]


@timed
async def test_partitions_split_the_log_by_player(kit: Kit) -> None:
    log = kit.consumer()
    assert log.partitions >= 1
    sent = [await kit.total(f"p{i % 5}", 1 + i) for i in range(15)]
    owner: dict[str, int] = {}
    got: list[Message] = []
    for p in range(log.partitions):
        mine: list[Message] = []
        while True:
            leased = kit.mark()
            batch = await log.fetch(4, partition=p)
            if not batch:
                break
            with kit.within(leased, "an ack"):
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
    assert sorted(sigs(await kit.drain(log))) == sorted(more)


@timed
async def test_close_gives_back_what_the_consumer_holds(kit: Kit) -> None:
    a, b = kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 9) for i in range(3)]
    leased = kit.mark()
    got = await a.fetch(10)
    with kit.within(leased, "the ack and the close"):
        await a.ack([m for m in got if sig(m) == sent[0]])
        await a.close()
    # no time passes: the rest is another consumer's at once, and the acked one is gone
    assert sorted(sigs(await b.fetch(10))) == sorted(sent[1:])


@timed
async def test_close_leaves_alone_what_was_delivered_again_to_another(kit: Kit) -> None:
    a, b, c = kit.consumer(), kit.consumer(), kit.consumer()
    sent = [await kit.total(f"p{i}", 9) for i in range(2)]
    await a.fetch(10)
    await kit.wait_out_lease()
    leased = kit.mark()
    again = await kit.collect(lambda: b.fetch(10), len(sent))
    assert sorted(sigs(again)) == sorted(sent)  # a's lease ran out: now b's
    with kit.within(leased, "the close and the fetch while b holds them"):
        await a.close()
        assert await c.fetch(10) == []  # b still holds them


async def test_ping_answers_while_the_log_is_up(kit: Kit) -> None:
    # What /readyz asks (health.py): nothing raised while the log answers, before a consumer
    # fetched anything and after; a log that is down is the degrade tests' (test_degrade.py).
    log = kit.consumer()
    await log.ping()
    await kit.total("p", 1)
    assert [m.player_id for m in await kit.drain(log)] == ["p"]
    await log.ping()


@timed
async def test_settled_once_every_earlier_message_of_its_partition_is_acked(kit: Kit) -> None:
    # Two consumers hold one player's two changes (the second delivered once the first
    # was): the later one acked first is not settled until the earlier one is acked too,
    # which is what a board mark waits for (domain/marks.py).
    a, b = kit.consumer(), kit.consumer()
    first_sent, second_sent = await kit.total("p1", 10), await kit.total("p1", 5)
    p = partition_of("p1", a.partitions)
    leased = kit.mark()
    first = await kit.collect(lambda: a.fetch(1, partition=p), 1)
    second = await kit.collect(lambda: b.fetch(1, partition=p), 1)
    assert sigs(first) == [first_sent] and sigs(second) == [second_sent]
    with kit.within(leased, "the acks and the look at the ack floor"):
        await b.ack(second)
        assert await b.settled(second) == [False]  # a holds an earlier one
        await a.ack(first)

    async def both() -> bool:
        return await b.settled(second) == [True] and await a.settled(first) == [True]

    deadline = time.monotonic() + 30.0  # a server applies acks a moment after they are sent
    while not await both():
        assert time.monotonic() < deadline, "the ack floor never passed the acked messages"
        await asyncio.sleep(0.05)


@timed
async def test_a_mark_follows_in_its_partition_every_change_committed_before_it(kit: Kit) -> None:
    # Changes, the marks and more changes relayed in one claim: the marks come after the
    # changes committed before them (a relay publishes them last, once those are stored).
    log = kit.consumer()
    before = [await kit.total(f"p{i}", 1 + i, relay=False) for i in range(12)]
    players = mark_players(log.partitions)
    await cast("Marking", kit.store).write_marks(players, "db1", NOW)
    after = await kit.total("p0", 100, relay=False)
    await kit.relay()
    for p in range(log.partitions):
        got: list[Message] = []
        while True:
            leased = kit.mark()
            batch = await log.fetch(100, partition=p)
            if not batch:
                break
            with kit.within(leased, "an ack"):
                await log.ack(batch)
            got += batch
        marks = [i for i, m in enumerate(got) if isinstance(m, Change) and is_mark(m.board)]
        assert [got[i].player_id for i in marks] == [players[p]]
        assert got[marks[0]].committed_at == NOW
        mine = {s for s in before if partition_of(s[1], log.partitions) == p}
        assert mine <= set(sigs(got[: marks[0]]))  # every change committed before it
        assert after in sigs(got) or partition_of("p0", log.partitions) != p
