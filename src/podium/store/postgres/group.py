"""Group commit on Postgres: the records that queue while others are being written share
one statement (``podium_record_batch``, migration 018), so one transaction, one round trip
and one WAL flush for all of them, as the embedded store groups its writes
(``store/sqlite/db.py``).

Each record in a group is still its own unit: the function writes it in a block of its own
(a subtransaction), so a record that fails is undone alone and the others commit. A record
the group did not write because what it was planned from changed (the same player's record
in another match committed first) is read again, planned again and queued for a later group
(``Queued.again``: one round trip of its own, no lock held across it), up to
``Results``' ``REPLANS`` times; one that failed, or changed again each time, is done again
on its own by the path a record takes without a group (``Queued.alone``, the locked path):
the same answer, the same errors, as if it had never been grouped. No caller is answered
before the commit of the statement that holds its write; if that statement fails, nothing
of it was kept, and each of its records is done again on its own (which answers an outage
as an outage, and a retry is safe). A group's flight does not wait for the records it hands
on: it takes the next group at once.

The group takes every lock of its records first, in the order of ``locks.py`` (players,
then windows, then claims, each in key order), so groups on several connections never wait
for each other in a circle. At most ``FLIGHTS`` groups are written at once: a record that
comes while fewer are in flight starts one at once (alone, when the store is idle: no
waiting for company); the others queue, and the next group takes up to ``GROUP_MAX``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from podium import metrics
from podium.domain.models import RecordOutcome
from podium.errors import StoreUnavailable

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

GROUP_MAX = 32  # records a statement: bounds what the first of a group waits for
FLIGHTS = 2  # groups written at once, each on a connection of the writes' pool

BATCH = "SELECT podium_record_batch($1, $2, $3::podium_record[])"


@dataclass(slots=True)
class Queued:
    """One record waiting for its group: the function's row for it, its answer if written,
    how to do it alone if not, and how to plan it again when what it was planned from
    changed (None: alone then too)."""

    row: tuple[object, ...]
    written: RecordOutcome
    alone: Callable[[], Awaitable[RecordOutcome]]
    again: Callable[[], Awaitable[RecordOutcome]] | None = None
    done: asyncio.Future[RecordOutcome] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupCommit:
    """The queue of records and the groups in flight, on one database."""

    def __init__(
        self,
        run: Callable[[Callable[[Conn], Awaitable[list[str]]]], Awaitable[list[str]]],
        namespaces: tuple[int, int],
    ) -> None:
        self._run = run  # Database._run without a transaction: the statement is one
        self._namespaces = namespaces
        self._queue: deque[Queued] = deque()
        self._flights = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def record(self, job: Queued) -> RecordOutcome:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A store used from another event loop than before (a script's asyncio.run
            # after another's): what the old one left behind can never run on this one.
            self._loop, self._queue, self._flights, self._tasks = loop, deque(), 0, set()
        # Retrieve a failure even when the caller went away, so it is not logged as lost.
        job.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._queue.append(job)
        if self._flights < FLIGHTS:
            self._flights += 1
            task = asyncio.create_task(self._drain(loop))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        # Shielded: a caller that goes away does not take its write back (it may commit,
        # as any write may whose caller stopped waiting; a retry is safe).
        return await asyncio.shield(job.done)

    async def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while self._queue:
                group = [self._queue.popleft() for _ in range(min(GROUP_MAX, len(self._queue)))]
                await self._write(group)
        finally:
            if loop is self._loop:
                self._flights -= 1

    async def _write(self, group: list[Queued]) -> None:
        rows = [j.row for j in group]
        try:
            out = await self._run(lambda c: c.fetchval(BATCH, *self._namespaces, rows))
        except asyncio.CancelledError:
            for job in group:  # the process is stopping: nobody is left to answer
                _settle(job.done, None, StoreUnavailable("postgres: the store is closing"))
            raise
        except Exception:
            # Nothing of the statement was kept: each record again, on its own.
            for job in group:
                self._hand_on(job, job.alone)
            return
        metrics.STORE_WRITE_GROUP.observe(len(group))
        for job, status in zip(group, out, strict=True):
            if status == "t":
                _settle(job.done, job.written, None)
            elif status == "f" and job.again is not None:
                self._hand_on(job, job.again)
            else:
                self._hand_on(job, job.alone)

    def _hand_on(self, job: Queued, redo: Callable[[], Awaitable[RecordOutcome]]) -> None:
        """``job`` done again by ``redo``, without holding this flight: on a slow link the
        locked path's four round trips held it (and the records queued behind it) as long
        as four groups take."""
        task = asyncio.create_task(_finish(job, redo))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _finish(job: Queued, redo: Callable[[], Awaitable[RecordOutcome]]) -> None:
    try:
        value = await redo()
    except BaseException as e:
        _settle(job.done, None, e)
        if not isinstance(e, Exception):
            raise
        return
    _settle(job.done, value, None)


def _settle(
    done: asyncio.Future[RecordOutcome], value: RecordOutcome | None, error: BaseException | None
) -> None:
    with contextlib.suppress(asyncio.InvalidStateError):
        if error is not None:
            done.set_exception(error)
        elif value is not None:
            done.set_result(value)
