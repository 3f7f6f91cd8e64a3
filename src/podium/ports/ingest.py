"""The port of a topic of finished matches (``[[ingest]]``): records read in order within a
partition, refused ones set aside with their problem, and progress committed only over
records that are done. The ``ingest`` role (``workers/ingest.py``) is its only caller; the
Kafka adapter is ``log/kafka/ingest.py``.

Delivery is at least once: a record may come again (after a crash, a rebalance, a producer's
retry), and the role records it through the same match claim and idempotency as the HTTP
route, so it counts once. Nothing read is skipped: ``commit`` moves past records only when
the caller is done with them, and ``rewind`` sends the ones it was not done with again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class FeedRecord:
    """One record as the producer wrote it, and where it sits in the topic."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


class MatchFeed(Protocol):
    @property
    def topic(self) -> str: ...

    async def poll(self, limit: int) -> list[FeedRecord]:
        """Up to ``limit`` records not yet handed out, in order per partition; an empty
        list at once (or after a short wait) when there is none."""
        ...

    async def reject(self, records: Sequence[tuple[FeedRecord, dict[str, Any]]]) -> None:
        """Each record set aside with its problem+json, durably (acknowledged by the dead
        letter's replicas) before this returns."""
        ...

    async def commit(self, done: Sequence[FeedRecord]) -> None:
        """Progress moved past ``done``: each partition's next record is the one after its
        last record in ``done`` (records the caller took in order, with no gap)."""
        ...

    async def rewind(self, pending: Sequence[FeedRecord]) -> None:
        """The records in ``pending`` handed out again from the earliest of each partition
        (the caller failed before it was done with them)."""
        ...

    async def lag(self) -> dict[int, int]:
        """Records not yet committed, per partition this consumer reads (end offset minus
        the committed one)."""
        ...

    async def close(self) -> None: ...
