"""BoardMarks: the board marks an updater noted (``domain/marks.py``), read by the reads to
tell how far the board is behind the store; and ``AggregatorSlot``, what an index adapter keeps
beside the boards in the aggregator's slot: its snapshots and the marks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from podium.ports.index import Snapshots
from podium.ports.log import Relayed
from podium.ports.store import Marking


class BoardMarks(Protocol):
    """Board marks (``domain/marks.py``): for each (store database, log partition), the time
    of the last mark an updater applied, so that a read can tell how far the board is behind
    the store. One small hash beside the aggregator's snapshots (on Redis Cluster in their
    slot, ``{agg}``), shared by every shard of a split index."""

    async def note_marks(self, marks: Mapping[tuple[str, int], float]) -> None:
        """Note each pair's time, keeping the later of the one held and the one given
        (atomically: two updaters noting at once never take a pair back)."""
        ...

    async def read_marks(self) -> dict[tuple[str, int], float]:
        """Every pair's time noted (empty when none was ever noted)."""
        ...


class AggregatorSlot(Snapshots, BoardMarks, Protocol):
    """What one adapter keeps beside the boards, in the aggregator's slot: its snapshots and
    the board marks (in process, or one Redis hash for every shard)."""


class MarkedOutbox(Relayed, Marking, Protocol):
    """One store database as its relay and the marks' writer see it: its outbox, its
    events, and the marks written into its outbox."""
