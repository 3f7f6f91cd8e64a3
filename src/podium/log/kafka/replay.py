"""``KafkaLog.replay``: every partition read once more from a start time up to its high
watermark when the replay began; then nothing. Outside the consumer group: it commits
nothing, so the updaters' offsets are untouched. With ``keep``, the changes it refuses are
left out.

One consumer drains it, and fetches only when it holds nothing: a nak delivers the messages
again at the next fetch, and so does that fetch with what was delivered and not acked (an
updater that gave its batch up when it outlasted its lease while the store was down; read
on past it, that batch was lost to the replay for good)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaException, TopicPartition

from podium.domain.models import Message
from podium.errors import LogUnavailable
from podium.log.events import EventError, decode
from podium.log.kafka.errors import translated

if TYPE_CHECKING:
    from podium.log.kafka.log import KafkaLog

log = logging.getLogger("podium.log")


@dataclass(frozen=True, slots=True)
class Replayed:
    """A replayed message's handle."""

    partition: int
    offset: int


class KafkaReplay:
    def __init__(self, log: KafkaLog, keep: Callable[[Message], bool] | None = None) -> None:
        self._log = log
        self._keep = keep
        self._consumer: Consumer | None = None
        self._at: dict[int, int] = {}  # partition -> the next offset to read
        self._end: dict[int, int] = {}  # partition -> the high watermark at the start
        self._again: list[Message] = []  # to deliver again at the next fetch, first
        self._unacked: dict[Replayed, Message] = {}  # delivered, not acked yet

    @property
    def partitions(self) -> int:
        return 1

    async def start(self, since: float) -> None:
        await self._log.run(self._start, since)

    def _start(self, since: float) -> None:
        from podium.log.kafka.topics import REQUEST_TIMEOUT_S

        topic = self._log.topic
        c = self._consumer = Consumer(
            self._log.config(
                **{
                    "group.id": f"{self._log.group}.replay",  # never committed to
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                    "enable.partition.eof": False,
                }
            )
        )
        parts = range(self._log.partitions)
        with translated(f"seek {topic} by time"):
            found = c.offsets_for_times(
                [TopicPartition(topic, p, int(since * 1000)) for p in parts],
                timeout=REQUEST_TIMEOUT_S,
            )
            for tp in found:
                if tp.error is not None:
                    raise KafkaException(tp.error)
                _, high = c.get_watermark_offsets(
                    TopicPartition(topic, tp.partition), timeout=REQUEST_TIMEOUT_S, cached=False
                )
                start = tp.offset if tp.offset >= 0 else high  # nothing at or after since
                if start < high:
                    self._at[tp.partition], self._end[tp.partition] = start, high
            c.assign([TopicPartition(topic, p, at) for p, at in self._at.items()])

    async def relay(self, limit: int) -> int:
        return 0

    async def ping(self) -> None:
        await self._log.ping()

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        if partition not in (None, 0):
            raise ValueError(f"partition {partition!r}: a replay has one partition, 0")
        # Given up if not acked by now: before the rest, which the log holds after them.
        self._again = [*self._unacked.values(), *self._again]
        self._unacked.clear()
        out, self._again = self._again[:limit], self._again[limit:]
        if len(out) < limit and self._at:
            out += await self._log.run(self._read, limit - len(out))
        self._unacked = {_replayed(m): m for m in out}
        return out

    def _read(self, n: int) -> list[Message]:
        from podium.log.kafka.topics import READ_TIMEOUT_S

        c = self._consumer
        assert c is not None
        out: list[Message] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        with translated(f"replay {self._log.topic}"):
            while self._at and len(out) < n:
                if time.monotonic() > deadline:
                    raise LogUnavailable(f"Kafka: replay of {self._log.topic}: no progress")
                for m in c.consume(min(n - len(out), 10_000), timeout=0.2):
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    p, o = m.partition(), m.offset()
                    if p not in self._at or o is None or o < self._at[p]:
                        continue
                    self._at[p] = o + 1
                    if self._at[p] >= self._end[p]:
                        del self._at[p]
                        c.incremental_unassign([TopicPartition(self._log.topic, p)])
                    if o >= self._end[p]:
                        continue
                    try:
                        msg = decode(m.value() or b"", Replayed(p, o))
                    except EventError as e:
                        log.error("replay %s[%d] offset %d: %s", self._log.topic, p, o, e)
                        continue
                    if self._keep is None or self._keep(msg):
                        out.append(msg)
        return out

    async def ack(self, messages: Sequence[Message]) -> None:
        for m in messages:
            self._unacked.pop(_replayed(m), None)

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        # A replay delivers again what was applied already: its marks are old, and say
        # nothing of where the log's own consumers are.
        return [False] * len(messages)

    async def in_progress(self, messages: Sequence[Message]) -> None:
        return None

    async def nak(self, messages: Sequence[Message]) -> None:
        for m in messages:
            self._unacked.pop(_replayed(m), None)
        self._again += messages

    async def replay(
        self, since: float, keep: Callable[[Message], bool] | None = None
    ) -> KafkaReplay:
        return await self._log.replay(since, keep)

    async def close(self) -> None:
        c, self._consumer = self._consumer, None
        if c is not None:
            try:
                await self._log.run(c.close)
            except Exception as e:
                log.warning("closing the replay's consumer: %s", e)


def _replayed(m: Message) -> Replayed:
    if not isinstance(m.handle, Replayed):
        raise TypeError(f"not a message of a Kafka replay: handle {m.handle!r}")
    return m.handle
