"""A Kafka topic of finished matches (``[[ingest]]``): the ``MatchFeed`` port on one consumer
of the table's group, subscribed to its topic, and an idempotent ``acks=all`` producer to its
dead-letter topic.

The group is an ordinary Kafka consumer group (the broker assigns partitions; a studio's own
tools show its members and lag): offsets are committed by hand, only over records the role
is done with, so a killed process's records come again to whoever reads the partition next,
never skipped. A refused record goes to the dead-letter topic as it was (key, value,
headers), with its problem+json in the ``podium-problem`` header and where it came from in
``podium-topic``, ``podium-partition``, ``podium-offset`` (the shape Kafka Connect's dead
letter queues use, so a fixed record is produced again as it is). A missing topic (the
matches' or the dead letter's) is made with the configured partitions, as the change log's
are (``topics.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from podium.errors import ConfigError, LogUnavailable, PodiumError
from podium.log.kafka.errors import error_of, translated
from podium.log.kafka.topics import PUBLISH_TIMEOUT_S, REQUEST_TIMEOUT_S, ensure_topics
from podium.ports.ingest import FeedRecord

T = TypeVar("T")
log = logging.getLogger("podium.log")

POLL_WAIT_S = 0.2  # how long a poll waits for a first record when there is none
# A killed process's partitions go to the others (or to it, restarted) after this long.
SESSION_TIMEOUT_MS = 10_000
# The group moved on without this consumer (a rebalance, a session that ran out): its
# commit is refused, and the records it was not done with are read by the partition's new
# owner from the last commit. Retried, like any outage.
_FENCED = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError._ASSIGNMENT_LOST,
        KafkaError._STATE,
    }
)
PROBLEM = "podium-problem"


class KafkaMatchFeed:
    def __init__(
        self,
        url: str,
        topic: str,
        group: str,
        dead_letter: str,
        *,
        partitions: int = 16,
        replication: int = 0,
        retention_s: float = 7 * 86_400.0,
        client: Mapping[str, str] | None = None,
    ) -> None:
        hosts = [h.strip().rstrip("/") for h in url.removeprefix("kafka://").split(",")]
        self._bootstrap = ",".join(h for h in hosts if h)
        if not self._bootstrap:
            raise ConfigError(f"ingest.brokers: no Kafka broker in {url!r} (kafka://host:9092)")
        self._topic = topic
        self._group = group
        self._dead_letter = dead_letter
        self._partitions = partitions
        self._replication = replication
        self._retention_s = retention_s
        self._client = dict(client or {})
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"podium-ingest-{topic}")
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._assigned: set[int] = set()

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def group(self) -> str:
        return self._group

    def _config(self, **more: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self._bootstrap, **self._client, **more}

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on this feed's own thread: the clients' calls block, and a consumer
        is used from one thread."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _ready(self) -> Consumer:
        if self._consumer is None:
            ensure_topics(
                AdminClient(self._config()),
                self._bootstrap,
                {self._topic: self._partitions, self._dead_letter: self._partitions},
                self._topic,
                self._replication,
                self._retention_s,
                fixed=False,  # the studio's topic: whatever partitions it has are read
            )
            with translated("make the ingest's clients"):
                consumer = Consumer(
                    self._config(
                        **{
                            "group.id": self._group,
                            "enable.auto.commit": False,
                            "enable.auto.offset.store": False,
                            "auto.offset.reset": "earliest",
                            "enable.partition.eof": False,
                            "session.timeout.ms": SESSION_TIMEOUT_MS,
                            "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 4,
                            "fetch.wait.max.ms": 100,
                        }
                    )
                )
                consumer.subscribe(
                    [self._topic], on_assign=self._on_assign, on_revoke=self._on_revoke
                )
                self._producer = Producer(
                    self._config(
                        **{
                            "enable.idempotence": True,
                            "acks": "all",
                            "linger.ms": 5,
                            "message.timeout.ms": int(PUBLISH_TIMEOUT_S * 1000),
                        }
                    )
                )
            self._consumer = consumer
        return self._consumer

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self._assigned |= {tp.partition for tp in parts}

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self._assigned -= {tp.partition for tp in parts}

    # -- the port ----------------------------------------------------------------------------

    async def poll(self, limit: int) -> list[FeedRecord]:
        return await self._run(self._poll, limit)

    def _poll(self, limit: int) -> list[FeedRecord]:
        consumer = self._ready()
        with translated(f"read topic {self._topic}"):
            got = consumer.consume(num_messages=limit, timeout=POLL_WAIT_S)
        out: list[FeedRecord] = []
        errors: list[KafkaError] = []
        for m in got:
            err = m.error()
            if err is None:
                out.append(_record(m))
            elif err.code() != KafkaError._PARTITION_EOF:
                errors.append(err)
        if errors and out:
            # The records read beside an error are handed out: the consumer's position is
            # past them, so raised away they would be skipped, and a later commit would pass
            # them. The error is the client's to mend, or the next poll's to raise.
            log.warning("ingest %s: %s", self._topic, errors[0].str())
        elif errors:
            if any(e.fatal() for e in errors):
                self._drop()  # the next poll's consumer reads from the group's last commit
            raise error_of(errors[0], f"read topic {self._topic}")
        return out

    async def reject(self, records: Sequence[tuple[FeedRecord, dict[str, Any]]]) -> None:
        if records:
            await self._run(self._reject, records)

    def _reject(self, records: Sequence[tuple[FeedRecord, dict[str, Any]]]) -> None:
        self._ready()
        producer = self._producer
        assert producer is not None
        failed: list[KafkaError] = []

        def sent(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failed.append(err)

        doing = f"send to dead-letter topic {self._dead_letter}"
        with translated(doing):
            for rec, problem in records:
                headers: list[tuple[str, str | bytes | None]] = [
                    *rec.headers,
                    (PROBLEM, json.dumps(problem).encode()),
                    ("podium-topic", self._topic.encode()),
                    ("podium-partition", str(rec.partition).encode()),
                    ("podium-offset", str(rec.offset).encode()),
                ]
                producer.produce(
                    self._dead_letter, rec.value, rec.key, headers=headers, on_delivery=sent
                )
            left = producer.flush(PUBLISH_TIMEOUT_S + 5)
        if failed:
            raise error_of(failed[0], doing)
        if left:
            raise LogUnavailable(f"Kafka: {doing}: {left} records not acknowledged in time")

    async def commit(self, done: Sequence[FeedRecord]) -> None:
        if done:
            await self._run(self._commit, done)

    def _commit(self, done: Sequence[FeedRecord]) -> None:
        consumer = self._ready()
        next_of: dict[int, int] = {}
        for r in done:
            next_of[r.partition] = max(next_of.get(r.partition, 0), r.offset + 1)
        offsets = [TopicPartition(self._topic, p, o) for p, o in sorted(next_of.items())]
        doing = f"commit the offsets of group {self._group}"
        with translated(doing), _fenced(doing):
            for tp in consumer.commit(offsets=offsets, asynchronous=False) or ():
                if tp.error is not None:
                    raise _error(tp.error, doing)

    async def rewind(self, pending: Sequence[FeedRecord]) -> None:
        if pending:
            await self._run(self._rewind, pending)

    def _rewind(self, pending: Sequence[FeedRecord]) -> None:
        consumer = self._ready()
        first: dict[int, int] = {}
        for r in pending:
            first[r.partition] = min(first.get(r.partition, r.offset), r.offset)
        try:
            for p, o in first.items():
                if p in self._assigned:  # else its new owner reads it from the last commit
                    consumer.seek(TopicPartition(self._topic, p, o))
        except KafkaException as e:
            # A consumer left ahead of records not done would skip them: this one is
            # dropped, and the next poll's reads from the group's last commit.
            log.warning("ingest %s: seek failed (%s); reading again from the last commit",
                        self._topic, e)  # fmt: skip
            self._drop()

    def _drop(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._assigned = set()
        if consumer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                consumer.close()

    async def lag(self) -> dict[int, int]:
        return await self._run(self._lag)

    def _lag(self) -> dict[int, int]:
        consumer = self._ready()
        parts = [TopicPartition(self._topic, p) for p in sorted(self._assigned)]
        if not parts:
            return {}
        doing = f"read the lag of group {self._group}"
        out = {}
        with translated(doing):
            committed = consumer.committed(parts, timeout=REQUEST_TIMEOUT_S)
            for tp in committed:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self._topic, tp.partition), timeout=REQUEST_TIMEOUT_S
                )
                start = tp.offset if tp.offset >= 0 else low
                out[tp.partition] = max(0, high - start)
        return out

    async def close(self) -> None:
        def close() -> None:
            if self._producer is not None:
                self._producer.flush(PUBLISH_TIMEOUT_S)
            if self._consumer is not None:
                self._consumer.close()  # leaves the group now: its partitions move at once
                self._consumer = None

        try:
            await self._run(close)
        finally:
            self._pool.shutdown(wait=False)


@contextlib.contextmanager
def _fenced(doing: str) -> Iterator[None]:
    """A consumer the group moved on from: an outage to retry, not a bug (inside
    ``translated``, which passes podium's errors through)."""
    try:
        yield
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if isinstance(err, KafkaError) and err.code() in _FENCED:
            raise LogUnavailable(f"Kafka: {doing}: {err.str()}") from e
        raise


def _error(err: KafkaError, doing: str) -> PodiumError:
    if err.code() in _FENCED:
        return LogUnavailable(f"Kafka: {doing}: {err.str()}")
    return error_of(err, doing)


def _record(m: Message) -> FeedRecord:
    raw: Any = m.headers() or []
    headers = tuple((k, v.encode() if isinstance(v, str) else v or b"") for k, v in raw)
    partition, offset = m.partition(), m.offset()
    assert partition is not None and offset is not None  # a record read, not an event
    return FeedRecord(partition, offset, m.key(), m.value(), headers)
