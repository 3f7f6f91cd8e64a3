"""Board marks written (``domain/marks.py``): every ``[workers] mark_s``, into each store
database's outbox, one mark row per partition of the log, in one transaction, with the time
taken before it began. The updaters carry them to the index like changes, and the reads
tell from them how far the board is behind the store (issue 36).

Run beside the relay (``relay.py``): one role per deployment that every fleet runs, idle
otherwise on the outbox log, which is where the marks must begin. Two processes marking at
once only write more marks: each is true of its own time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from podium.domain.marks import mark_players
from podium.ports import Clock, Marking
from podium.util.aio import gather_all

Databases = Callable[[], Awaitable[Mapping[str, Marking]]]


class Marker:
    def __init__(self, databases: Databases, partitions: int, clock: Clock) -> None:
        self._databases = databases
        self._players = mark_players(partitions)
        self._clock = clock

    async def step(self) -> int:
        # Before any mark's transaction begins: a match acknowledged before this moment was
        # committed before the mark's rows are written, so it comes before them in the log.
        at = self._clock.now()
        found = await self._databases()
        # Every database at once; one that is down fails alone (the others are marked), and
        # its marks stop, so the reads' watermark stays at its last one: behind, never ahead.
        await gather_all(db.write_marks(self._players, name, at) for name, db in found.items())
        return 0  # the runner waits mark_s before the next
