"""How far the board is behind the store, as the reads tell it (issue 36).

The updaters note each board mark they apply (``domain/marks.py``) in the index; this reads
them at most every ``READ_EVERY_S`` (as the reads ask for a split board's snapshot stamp)
and takes the watermark: the least mark over every (store database, log partition) this
deployment has. Every match acknowledged before it is on the board. When the board is more
than ``[server] board_behind_s`` behind it, an exact answer read from the live board speaks
for the watermark, not for its own moment, and says so: its ``asOf`` is the watermark.
Every read of the live board takes it the same way (``label_of`` before the read,
``labelled`` after): pages, ranks, friends, the distribution (``reads.py``), players looked
up (``lookups.py``), a window's groups (``groups.py``), a league's cohort (``leagues.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from podium import metrics
from podium.config.settings import Settings
from podium.domain.marks import behind_label, watermark
from podium.errors import Unavailable
from podium.ports import BoardMarks, Clock

log = logging.getLogger("podium.reads")

READ_EVERY_S = 0.1  # the marks read at most this often per process, like a snapshot's stamp


class Freshness:
    def __init__(
        self,
        settings: Settings,
        marks: BoardMarks,
        databases: Callable[[], Awaitable[Mapping[str, object]]],
        partitions: int,
        clock: Clock,
    ) -> None:
        self._marks = marks
        self._databases = databases  # the store databases by name (log.events.source_of)
        self._partitions = partitions
        self._bound_s = settings.server.board_behind_s
        self._clock = clock
        self._mark: float | None = None  # the watermark last read; None: none known
        self._read_at = float("-inf")
        self._reading: asyncio.Task[None] | None = None

    async def label(self) -> float | None:
        """The ``asOf`` an exact answer from the live board carries now: the watermark when
        the board is more than the bound behind it, else None (no label)."""
        now = self._clock.now()
        if now - self._read_at >= READ_EVERY_S:
            if self._reading is None or self._reading.done():
                # One read at a time, however many requests find the marks old.
                self._reading = asyncio.create_task(self._read(now))
            await asyncio.shield(self._reading)
        return behind_label(self._clock.now(), self._mark, self._bound_s)

    async def behind(self) -> float | None:
        """How far the board is behind the store now, read afresh (``podium status``): now
        less the watermark; None when no watermark is known."""
        await self._read(self._clock.now())
        return None if self._mark is None else max(0.0, self._clock.now() - self._mark)

    async def _read(self, now: float) -> None:
        try:
            held = await self._marks.read_marks()
            names = list(await self._databases())
        except Unavailable as e:
            # The index (or the store's map) out of reach: the watermark last read stays,
            # which only ages, so an answer is labelled behind, never ahead. The read that
            # needed the index says the outage itself.
            log.debug("board marks not read: %s", e)
            self._read_at = now  # asked again after READ_EVERY_S, not by every request
            return
        except Exception:
            # Anything else is a bug to fix (logged with its traceback), but not the
            # answer's: the label only ages as above, and the answer is read as before.
            log.exception("board marks not read")
            self._read_at = now
            return
        mark = watermark(held, names, self._partitions)
        if mark is not None:
            # A watermark never goes back (marks are kept by the later); a new deployment
            # read with none keeps None, and no label is invented.
            self._mark = mark if self._mark is None else max(self._mark, mark)
            metrics.BOARD_BEHIND_SECONDS.set(max(0.0, now - self._mark))
        self._read_at = now


async def label_of(freshness: Freshness | None) -> float | None:
    """The label of an exact answer about to be read from the live board (``label``); None
    where the reads have no marks. Taken before the read, so the board read holds at least
    what it says."""
    return None if freshness is None else await freshness.label()


def labelled(as_of: float, label: float | None) -> float:
    """An answer's ``asOf`` under the label: the earlier of the two (a snapshot's own asOf
    may be earlier still); unchanged without a label."""
    return as_of if label is None else min(as_of, label)
