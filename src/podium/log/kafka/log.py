"""Apache Kafka as the change log: topics between the store's outbox and the updaters.

**Topics.** Changes go to ``[log.kafka] topic`` with ``[log] partitions`` partitions, each
keyed by its player id and sent to partition ``partition_of(player, partitions)`` (the
partition numbering of every podium log), so one player's changes stay in order in one
partition. Reward and moderation events go to ``[log.kafka] events_topic``, keyed by the
event id (``relay.py``). A missing topic is made at first use with the configured partitions
and replication (0: as many copies as there are brokers, up to 3; ``min.insync.replicas`` 2
where there are 3), kept ``[log] retention_s``; a changes topic with another partition count
is refused (``ConfigError``), as is a broker that will not make one.

**Relay.** ``relay`` moves committed outbox rows with an idempotent producer and
``acks=all`` (``relay.py``), from every store database this process holds the relay lease
of (``lease.py``), and acks the rows in the outbox only once Kafka acked them.

**Updaters.** One consumer group, ``[log.kafka] group``: its committed offset of a partition
is the first message not yet applied to the board, as Kafka's own tools read it (lag
included), and it moves only over messages whose board writes are done (acked). What the
port needs beyond an offset (per-message leases, acks ahead of an unacked message, what was
delivered already) is kept in the commit's metadata beside it (``state.py``), so that every
updater of the group, in any process, sees it:

- ``fetch`` takes, per partition, what was delivered before but is not acked and nobody holds
  (a lease that ran out: redelivery), then what is new, up to the high watermark; it writes
  its leases into the partition's state *before* it reads those messages, and returns at once
  with what there is (nothing: an empty list);
- ``ack`` marks messages applied; the committed offset moves over every applied message that
  has no unapplied one before it. A message acked never comes again, even one acked while an
  earlier one is held;
- ``in_progress`` starts this holder's leases again; ``nak`` ends them at once; ``close``
  ends every lease this consumer still holds (and only those: what ran out and went to
  another is left alone).

A lease runs on the wall clocks of the processes that read the state: they must agree to
well within a lease (NTP). A killed updater's leases run out and its messages are delivered
again to whoever fetches next; a consumer group rebalance has nothing to move (there is no
assignment: every updater may take from every partition, or from the partitions it is
given), so neither skips anything: the committed offset never passes an unacked message.

**Replay.** ``replay(since)`` is a log of its own (``replay.py``): every partition read from
the first offset at or after ``since`` (``offsets_for_times``) up to its high watermark when
the replay began, outside the group (it commits nothing).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from podium import metrics
from podium.domain.models import Message
from podium.errors import ConfigError, LogUnavailable
from podium.log.events import EventError, OtherVersion, decode
from podium.log.kafka.errors import translated
from podium.log.kafka.lease import RelayLeases
from podium.log.kafka.relay import Publisher
from podium.log.kafka.replay import KafkaReplay
from podium.log.kafka.state import State
from podium.log.kafka.topics import (
    PING_TIMEOUT_S,
    PUBLISH_TIMEOUT_S,
    READ_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    RETRY_S,
    ensure_topics,
)
from podium.log.partitions import Turns, databases_of
from podium.ports import Clock, Relayed

log = logging.getLogger("podium.log")
client_log = logging.getLogger("podium.log.kafka")

CACHE_MAX = 50_000  # messages read and kept per partition, for their redelivery

LEADER_MOVING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError._UNKNOWN_PARTITION,
    }
)

T = TypeVar("T")

# One partition's state is changed by one log object of this process at a time: its own
# lock, shared by every log object on the same group and topic.
_locks: dict[tuple[str, str, str, int], threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(key: tuple[str, str, str, int]) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message's handle: its partition and offset, and when its lease ends at the latest as
    this process can tell (measured from before the commit that took it)."""

    partition: int
    offset: int
    lease_ends: float  # time.monotonic()


def _token() -> str:
    import secrets

    return secrets.token_hex(4)


class KafkaLog:
    def __init__(
        self,
        bootstrap: str,
        clock: Clock,
        *,
        topic: str = "podium-changes",
        events_topic: str = "podium-events",
        group: str = "podium-updaters",
        partitions: int = 16,
        lease_s: float = 10.0,
        replication: int = 0,
        retention_s: float = 86_400.0,
        client: Mapping[str, str] | None = None,
        outbox: Relayed | None = None,
        source: str = "",
        databases: Callable[[], Awaitable[Mapping[str, Relayed]]] | None = None,
        holder: str = "",
    ) -> None:
        """``bootstrap``: ``host:port[,host:port...]``; ``client``: librdkafka settings passed
        through to every client (``security.protocol``, ``sasl.*``, ``ssl.*``).
        ``databases`` gives the outbox of every store database by its source name
        (``events.source_of``); ``outbox`` and ``source`` name just one. Without either,
        the log is a consumer only."""
        self._bootstrap = bootstrap
        self._clock = clock
        self._topic = topic
        self._events_topic = events_topic
        self._group = group
        self._partitions = partitions
        self._lease_s = lease_s
        self._replication = replication
        self._retention_s = retention_s
        self._client = dict(client or {})
        self._databases = databases_of(databases, outbox, source)
        self._me = _token()  # this consumer, in the leases it writes
        # The name its relay leases carry: host and pid, for whoever looks at them.
        name = holder or f"{socket.gethostname()} pid {os.getpid()} {self._me}"
        self._leases = RelayLeases(self, name)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="podium-kafka")
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._connecting = asyncio.Lock()
        self._turns = Turns(partitions)
        self._touched: set[int] = set()  # partitions this consumer took leases in
        self._cache: dict[int, dict[int, bytes | None]] = {}  # partition -> offset -> value
        self._closed = False

    @classmethod
    def from_url(cls, url: str, clock: Clock, **kwargs: Any) -> KafkaLog:
        """``kafka://host:9092[,host:9092...]``: bootstrap servers of one cluster."""
        hosts = url.removeprefix("kafka://").split(",")
        servers = [h.strip().rstrip("/") for h in hosts if h.strip().rstrip("/")]
        if not servers:
            raise ConfigError(f"log.url: no Kafka broker in {url!r} (kafka://host:9092,...)")
        return cls(",".join(servers), clock, **kwargs)

    @property
    def partitions(self) -> int:
        return self._partitions

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def events_topic(self) -> str:
        return self._events_topic

    @property
    def group(self) -> str:
        return self._group

    @property
    def lease_s(self) -> float:
        return self._lease_s

    def config(self, **more: Any) -> dict[str, Any]:
        """A client's settings: the brokers, the security pass-through, and ``more``."""
        return {"bootstrap.servers": self._bootstrap, "logger": client_log, **self._client, **more}

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on this log's own thread: the clients' calls block."""
        if self._closed:
            raise LogUnavailable("Kafka: the log is closed")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- connection and topics -------------------------------------------------------------

    async def _ready(self) -> Consumer:
        if self._consumer is not None:
            return self._consumer
        async with self._connecting:
            if self._consumer is None:
                await self.run(self._ensure_topics)
                self._consumer = await self.run(self._new_consumer)
        return self._consumer

    def _new_consumer(self) -> Consumer:
        with translated("make a consumer"):
            return Consumer(
                self.config(
                    **{
                        "group.id": self._group,
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        "auto.offset.reset": "earliest",
                        # A fetch at the end of a partition waits this long at the broker,
                        # and every request behind it on the connection (the watermarks a
                        # fetch asks for) waits too: at 100 ms each batch waited twice.
                        "fetch.wait.max.ms": 10,
                        "enable.partition.eof": False,
                    }
                )
            )

    def producer(self) -> Producer:
        """The relay's producer: idempotent, ``acks=all``, made at first use."""
        if self._producer is None:
            with translated("make a producer"):
                self._producer = Producer(
                    self.config(
                        **{
                            "enable.idempotence": True,
                            "acks": "all",
                            "linger.ms": 5,
                            "message.timeout.ms": int(PUBLISH_TIMEOUT_S * 1000),
                        }
                    )
                )
        return self._producer

    def _ensure_topics(self) -> None:
        ensure_topics(
            AdminClient(self.config()),
            self._bootstrap,
            {self._topic: self._partitions, self._events_topic: self._partitions},
            self._topic,
            self._replication,
            self._retention_s,
        )

    async def ping(self) -> None:
        """The brokers answer a metadata request for the changes topic within
        ``PING_TIMEOUT_S``."""
        try:
            async with asyncio.timeout(PING_TIMEOUT_S + 0.5):
                consumer = await self._ready()
                md = await asyncio.to_thread(_metadata, consumer, self._topic, PING_TIMEOUT_S)
        except TimeoutError:
            raise LogUnavailable(f"Kafka: no answer in {PING_TIMEOUT_S} s") from None
        topic = md.topics.get(self._topic)
        if topic is None or topic.error is not None:
            raise LogUnavailable(f"Kafka: topic {self._topic}: {topic.error if topic else 'gone'}")

    # -- relay -----------------------------------------------------------------------------

    @property
    def relay_leases(self) -> RelayLeases:
        return self._leases

    async def relay(self, limit: int) -> int:
        """Up to ``limit`` rows of each store database this process holds the lease of, and
        up to ``limit`` of its events."""
        if self._databases is None:
            return 0  # a consumer only: the relays are elsewhere
        await self._ready()
        outboxes = await self._databases()
        try:
            held = await self._leases.hold(sorted(outboxes))
        finally:
            metrics.RELAY_DATABASES.set(len(self._leases.held()))
        if not held:
            return 0
        publisher = Publisher(self, self._partitions, self._clock)
        margin = min(PUBLISH_TIMEOUT_S, self._lease_s / 3)
        return await publisher.step(
            outboxes, held, lambda: self._leases.hold(sorted(outboxes)), limit, margin
        )

    # -- the partitions' states ------------------------------------------------------------

    def _key(self, partition: int) -> tuple[str, str, str, int]:
        return (self._bootstrap, self._group, self._topic, partition)

    def _read(self, consumer: Consumer, parts: Sequence[int]) -> dict[int, State]:
        with translated(f"read the offsets of group {self._group}"):
            got = consumer.committed(
                [TopicPartition(self._topic, p) for p in parts], timeout=REQUEST_TIMEOUT_S
            )
        out: dict[int, State] = {}
        for tp in got:
            if tp.error is not None:
                raise KafkaException(tp.error)
            out[tp.partition] = State.read(tp.offset, tp.metadata)
        return out

    def _write(self, consumer: Consumer, states: Mapping[int, State]) -> None:
        offsets = [
            TopicPartition(self._topic, p, st.committed, st.metadata()) for p, st in states.items()
        ]
        with translated(f"commit the offsets of group {self._group}"):
            done = consumer.commit(offsets=offsets, asynchronous=False)
            for tp in done or []:
                if tp.error is not None:
                    raise KafkaException(tp.error)
        for p, st in states.items():  # what is applied is never read again
            cache = self._cache.get(p)
            if cache:
                for o in [o for o in cache if o < st.committed]:
                    del cache[o]

    def _change(self, parts: Sequence[int], change: Callable[[int, State], object]) -> None:
        """Read, change and write back the states of ``parts``, each under its lock."""
        consumer = self._consumer
        assert consumer is not None
        ordered = sorted(set(parts))
        locks = [_lock(self._key(p)) for p in ordered]
        for lk in locks:
            lk.acquire()
        try:
            states = self._read(consumer, ordered)
            for p in ordered:
                change(p, states[p])
            self._write(consumer, states)
        finally:
            for lk in reversed(locks):
                lk.release()

    # -- consumers -------------------------------------------------------------------------

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        parts = self._turns.parts(partition)
        if limit <= 0:
            return []
        await self._ready()
        out: list[Message] = []
        for p in parts:
            if len(out) >= limit:
                break
            try:
                out += await self.run(self._fetch_one, p, limit - len(out))
            except LogUnavailable:
                if out:
                    return out  # leased to this consumer already: apply them
                raise
        return out

    def _fetch_one(self, p: int, n: int) -> list[Message]:
        consumer = self._consumer
        assert consumer is not None
        lease_ends = time.monotonic() + self._lease_s
        with _lock(self._key(p)):
            st = self._read(consumer, [p])[p]
            now_ms = int(time.time() * 1000)
            picked = st.free(now_ms)[:n]
            if len(picked) < n:
                low, high = self._watermarks(consumer, p)
                if low > st.committed:  # gone with the topic's retention, applied or not
                    log.warning(
                        "%s[%d]: offsets %d to %d expired unread", self._topic, p, st.committed, low
                    )
                    st.ack(range(st.committed, low))
                    picked = [o for o in picked if o >= low]
                start = max(st.frontier, low)
                picked += range(start, max(start, min(high, start + n - len(picked))))
            if not picked:
                return []
            st.take(picked, self._me, now_ms + int(self._lease_s * 1000))
            self._write(consumer, {p: st})
            self._touched.add(p)
        values = self._records(consumer, p, picked)
        out: list[Message] = []
        dropped: list[int] = []
        for o in picked:
            value = values.get(o)
            if value is None:  # gone (retention) or never a message (a gap)
                dropped.append(o)
                continue
            try:
                out.append(decode(value, Delivery(p, o, lease_ends)))
            except EventError as e:
                # Not an event this podium can read. Another version (a newer relay in a
                # rolling upgrade) is left to its lease, for an updater that can; anything
                # else will never be readable, and is taken off the log.
                log.error("%s[%d] offset %d: %s", self._topic, p, o, e)
                if not isinstance(e, OtherVersion):
                    dropped.append(o)
        if dropped:
            self._change([p], lambda _, s: s.ack(dropped))
        return out

    def _watermarks(self, consumer: Consumer, p: int) -> tuple[int, int]:
        """The partition's first and next offsets. Asked again for a moment while its
        leader is not known yet or moving (a topic just made, a broker lost), as the
        producer's own retries do: a failover's first seconds are not an outage."""
        deadline = time.monotonic() + RETRY_S
        with translated(f"read the end of {self._topic}[{p}]"):
            while True:
                try:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(self._topic, p), timeout=REQUEST_TIMEOUT_S, cached=False
                    )
                    return int(low), int(high)
                except KafkaException as e:
                    if e.args[0].code() not in LEADER_MOVING or time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    def _records(
        self, consumer: Consumer, p: int, offsets: Sequence[int]
    ) -> dict[int, bytes | None]:
        """The values at ``offsets`` of partition ``p`` (``None``: no message there). An
        offset the partition skipped (a message gone with the retention, a transaction
        marker) is taken as empty only once a second read from it skips it too: nothing
        unread is ever acked as gone."""
        cache = self._cache.setdefault(p, {})
        need = sorted(o for o in offsets if o not in cache)
        if need:
            if len(cache) > CACHE_MAX:
                cache.clear()
            got = self._read_range(consumer, p, need[0], need[-1] + 1)
            gaps = [o for o in need if got.get(o) is None]
            if gaps:
                again = self._read_range(consumer, p, gaps[0], gaps[-1] + 1)
                got |= {o: again.get(o) for o in gaps}
            cache.update((o, got.get(o)) for o in need)
        return {o: cache.get(o) for o in offsets}

    def _read_range(
        self, consumer: Consumer, p: int, start: int, end: int
    ) -> dict[int, bytes | None]:
        """Every message of ``p`` from ``start`` up to ``end``, from a fresh assignment."""
        out: dict[int, bytes | None] = {}
        with translated(f"read {self._topic}[{p}] from offset {start}"):
            consumer.assign([TopicPartition(self._topic, p, start)])
            try:
                deadline = time.monotonic() + READ_TIMEOUT_S
                at = start
                while at < end:
                    if time.monotonic() > deadline:
                        raise LogUnavailable(
                            f"Kafka: {self._topic}[{p}]: offsets {at} to {end - 1} not read "
                            f"in {READ_TIMEOUT_S:.0f} s"
                        )
                    for m in consumer.consume(min(end - at, 10_000), timeout=0.2):
                        err = m.error()
                        if err is not None:
                            raise KafkaException(err)
                        o = m.offset()
                        if m.partition() != p or o is None or o < at:
                            continue
                        out[o] = m.value()
                        at = o + 1
            finally:
                # Left assigned, the client goes on fetching at the partition's end, and
                # the next fetch's watermarks and offsets wait behind those fetches: the
                # updater through Kafka took 2,200 board writes/s that way (BENCHMARKS.md).
                consumer.unassign()
        return out

    async def ack(self, messages: Sequence[Message]) -> None:
        by = _by_partition(messages)
        if by:
            await self._ready()
            await self.run(self._change, list(by), lambda p, st: st.ack(by[p]))

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        # The group's committed offset of a partition moves only over applied messages, in
        # order: one past a message's offset means it and everything before it is applied.
        by = _by_partition(messages)
        if not by:
            return []
        consumer = await self._ready()
        states = await self.run(self._read, consumer, sorted(by))
        handles = [cast("Delivery", m.handle) for m in messages]  # checked by _by_partition
        return [states[d.partition].committed > d.offset for d in handles]

    async def in_progress(self, messages: Sequence[Message]) -> None:
        by = _by_partition(messages)
        if not by:
            return
        await self._ready()
        lease_ms = int(self._lease_s * 1000)

        def renew(p: int, st: State) -> None:
            now_ms = int(time.time() * 1000)
            st.renew(by[p], self._me, now_ms, now_ms + lease_ms)

        await self.run(self._change, list(by), renew)

    async def nak(self, messages: Sequence[Message]) -> None:
        by = _by_partition(messages)
        if by:
            await self._ready()
            await self.run(
                self._change,
                list(by),
                lambda p, st: st.give_back(by[p], self._me, int(time.time() * 1000)),
            )

    async def replay(
        self, since: float, keep: Callable[[Message], bool] | None = None
    ) -> KafkaReplay:
        """A log of its own that delivers once more what the topic held from ``since``
        (epoch seconds) until now, what ``keep`` refuses left out; see ``ChangeLog.replay``."""
        await self._ready()
        replay = KafkaReplay(self, keep)
        await replay.start(since)
        return replay

    async def close(self) -> None:
        if self._closed:
            return
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        try:
            if consumer is not None:
                await self._leases.release()
                if self._touched:
                    given = [0]

                    def give_back(p: int, st: State) -> None:
                        given[0] += st.give_back(None, self._me, int(time.time() * 1000))

                    self._consumer = consumer
                    try:
                        await self.run(self._change, sorted(self._touched), give_back)
                        if given[0]:
                            log.info("gave back %d messages still held at close", given[0])
                    except Exception as e:  # their leases run out by themselves
                        log.warning("giving back the messages held at close: %s", e)
                    finally:
                        self._consumer = None
        finally:
            self._closed = True
            loop = asyncio.get_running_loop()
            if producer is not None:
                await loop.run_in_executor(self._pool, producer.flush, 1.0)
            if consumer is not None:
                await loop.run_in_executor(self._pool, consumer.close)
            self._pool.shutdown(wait=False)


def _metadata(consumer: Consumer, topic: str, timeout: float) -> Any:
    with translated(f"look up topic {topic}"):
        return consumer.list_topics(topic, timeout=timeout)


def _by_partition(messages: Sequence[Message]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for m in messages:
        if not isinstance(m.handle, Delivery):
            raise TypeError(f"not a message of the Kafka log: handle {m.handle!r}")
        out.setdefault(m.handle.partition, []).append(m.handle.offset)
    return out
