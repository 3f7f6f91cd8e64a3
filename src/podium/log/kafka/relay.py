"""The relay's half of the Kafka log: committed outbox rows into the changes topic.

Rows are claimed from one ``Outbox`` (one store database) and produced with the idempotent
producer (``acks=all``: stored on every in-sync replica before Kafka acks), each keyed by its
player id, to the player's partition, with a ``podium-message-id`` header of its database,
its row and its content (``events.message_id``); they are acked in the outbox only once Kafka
acked them. The idempotent producer keeps what it sends to one partition in order and
stores each once, through its own retries; a relay that crashes between Kafka's ack and the
outbox's publishes those rows again, which the updaters apply again harmlessly (absolute
totals, ``GT`` and versioned writes); the header lets another subscriber drop them.

A player's chain stops at its first failure: their later rows go back to the outbox with
it, even if Kafka stored them, so that the topic never holds a player's later change only.

Reward and moderation events (``domain/events.py``) go to the events topic, each keyed by its
event id and carrying it in the ``podium-event-id`` header (and its type in
``podium-event-type``), the body the webhook body (``schemas/webhook-event.v1.json``); marked
published once Kafka acked them. A crash in between produces one again: a subscriber dedupes
on the id, as a webhook receiver does.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError

from podium.domain import events
from podium.domain.marks import is_mark_message
from podium.domain.models import Message
from podium.log.events import encode, message_id, partition_of
from podium.log.kafka.errors import error_of
from podium.ports import Clock, Event, EventStream, Outbox, Relayed

if TYPE_CHECKING:
    from podium.log.kafka.log import KafkaLog

# topic, partition (None: by key), key, value, headers
Header = tuple[str, str | bytes | None]
Record = tuple[str, int | None, bytes, bytes, list[Header]]


class Publisher:
    def __init__(self, log: KafkaLog, partitions: int, clock: Clock) -> None:
        self._log = log
        self._partitions = partitions
        self._clock = clock  # the store's time, of the outbox's claims

    async def step(
        self,
        outboxes: Mapping[str, Relayed],
        held: dict[str, float],
        hold: Callable[[], Awaitable[dict[str, float]]],
        limit: int,
        margin: float,
    ) -> int:
        """One relay step over each database ``held`` names (with its lease's deadline,
        ``time.monotonic()``): its rows, then its events, none produced later than ``margin``
        before the deadline; how many moved. ``hold()`` renews the leases when due."""
        moved = 0
        error: BaseException | None = None
        for i, source in enumerate(sorted(held)):
            if i:
                # Asked again before each database after the first (it writes only when a
                # renewal is due, a third of a lease in): a step over several databases,
                # each a claim and a produce, can outlast a lease on a busy machine, and a
                # lease that ran out is another relay's to take.
                try:
                    held = await hold()
                except Exception as e:  # what is held stays held until its deadline
                    error = error or e
            stop_by = held.get(source, 0.0) - margin
            # Each made only when its turn comes: one made ahead and never awaited (the
            # relay cancelled on the first) would be left unawaited.
            outbox = outboxes[source]
            jobs = (
                functools.partial(self.relay, outbox, source, limit, stop_by),
                functools.partial(self.publish_events, outbox, limit, stop_by),
            )
            for job in jobs:
                try:
                    moved += await job()
                except Exception as e:  # every database to its end, then the first raised
                    error = error or e
        if error is not None:
            raise error
        return moved

    async def relay(self, outbox: Outbox, source: str, limit: int, stop_by: float) -> int:
        """Move up to ``limit`` rows of ``outbox`` (the database named ``source``) into the
        topic, producing nothing after ``stop_by`` (``time.monotonic()``); how many moved."""
        if time.monotonic() >= stop_by:
            return 0
        # Claimed as of a lease from now, with no lease added (as on NATS, ``log/nats/
        # relay.py``): every row claimed before, by this relay or another, is claimed again.
        # Now at the claim, not when the step began: two relays that both believe they hold
        # this database (a lease ran out in a long step, the next relay took it, and Kafka
        # has no compare-and-set to stop the first from writing it back) then publish a
        # player's rows in order, the later claim with every row of the earlier one; only
        # copies (one message id) may land out of order, which a subscriber drops.
        now = self._clock.now()
        rows = await outbox.claim_changes(limit, 0.0, now + self._log.lease_s)
        if not rows:
            return 0
        # Board marks (domain/marks.py) only after every other row of the claim is stored,
        # and only if every one was: a mark must follow, in its partition, every change
        # committed before it, which a row given back (and produced again later) would not.
        marks = [m for m in rows if is_mark_message(m)]
        changes = [m for m in rows if not is_mark_message(m)]
        sent, unsent, error = await self._produce(changes, source)
        if marks and (unsent or time.monotonic() >= stop_by):
            unsent += [row_of(m) for m in marks]
        elif marks:
            done, undone, error = await self._produce(marks, source)
            sent, unsent = sent + done, unsent + undone
        if sent:
            await outbox.ack_changes(sent)
        if unsent:
            await outbox.lease_changes(unsent, now)  # retried at once, not after a lease
        if error is not None:
            raise error_of(error, f"produce to {self._log.topic}")
        return len(sent)

    async def _produce(
        self, rows: Sequence[Message], source: str
    ) -> tuple[list[int], list[int], KafkaError | None]:
        """Rows produced in order: (rows sent, rows to give back, the first error)."""
        records: list[Record] = []
        for m in rows:
            row = row_of(m)
            payload = encode(m, source, row)
            headers: list[Header] = [("podium-message-id", message_id(payload, source, row))]
            part = partition_of(m.player_id, self._partitions)
            records.append((self._log.topic, part, m.player_id.encode(), payload, headers))
        outcomes = await self._log.run(send, self._log, records) if records else []
        failed: set[str] = set()
        sent: list[int] = []
        unsent: list[int] = []
        error: KafkaError | None = None
        for m, err in zip(rows, outcomes, strict=True):
            if err is not None or m.player_id in failed:
                failed.add(m.player_id)
                unsent.append(row_of(m))
                error = error or err
            else:
                sent.append(row_of(m))
        return sent, unsent, error

    async def publish_events(self, store: EventStream, limit: int, stop_by: float) -> int:
        """Up to ``limit`` of the database's events not on the topic yet, produced and
        marked so, none after ``stop_by``; how many."""
        if time.monotonic() >= stop_by:
            return 0
        found = await store.unpublished_events(limit)
        if not found:
            return 0
        records = [_event_record(self._log.events_topic, e) for e in found]
        outcomes = await self._log.run(send, self._log, records)
        done = [e.event_id for e, err in zip(found, outcomes, strict=True) if err is None]
        await store.mark_published(done)
        for err in outcomes:
            if err is not None:
                raise error_of(err, f"produce to {self._log.events_topic}")
        return len(done)


def _event_record(topic: str, e: Event) -> Record:
    body = events.body(e.event_type, e.at, e.data).encode()
    headers: list[Header] = [
        ("podium-event-id", e.event_id),
        ("podium-event-type", e.event_type),
    ]
    return (topic, None, e.event_id.encode(), body, headers)


def send(log: KafkaLog, records: Sequence[Record]) -> list[KafkaError | None]:
    """Produce every record, in order, and wait for Kafka's answers (on the log's thread);
    each record's error, or ``None`` once stored."""
    from podium.log.kafka.topics import PUBLISH_TIMEOUT_S

    producer = log.producer()
    timed_out = KafkaError(KafkaError._MSG_TIMED_OUT, "no answer from Kafka")
    outcomes: list[KafkaError | None] = [timed_out] * len(records)

    def answered(i: int) -> Callable[[KafkaError | None, Any], None]:
        def cb(err: KafkaError | None, _msg: Any) -> None:
            outcomes[i] = err

        return cb

    for i, (topic, part, key, value, headers) in enumerate(records):
        while True:
            try:
                if part is None:
                    producer.produce(topic, value, key, headers=headers, on_delivery=answered(i))
                else:
                    producer.produce(
                        topic, value, key, part, headers=headers, on_delivery=answered(i)
                    )
                break
            except BufferError:  # the producer's queue is full: let it send some
                producer.poll(0.05)
    producer.flush(PUBLISH_TIMEOUT_S + 5)
    return outcomes


def row_of(m: Message) -> int:
    """The outbox row a claimed change was read from."""
    if not isinstance(m.handle, int):
        raise TypeError(f"not an outbox row: handle {m.handle!r}")
    return m.handle
