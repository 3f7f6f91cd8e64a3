"""A rebuild's or a reshard's progress told to every process (``ports/upkeep.py``): a
``Progress`` that passes each call on to the one it wraps (the command's bar) and keeps
what runs, its phase and its count of players, which it publishes every second while the
run lasts, then once more as done (or failed) for a minute. Publishing never fails the run:
an index that does not answer now is asked again at the next second."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType

from podium.errors import Unavailable
from podium.ports import Clock
from podium.ports.upkeep import Running, UpkeepRecords
from podium.service.upkeep.gapless import Progress, Quiet, Target

log = logging.getLogger("podium.upkeep")

EVERY_S = 1.0  # how often a running run says how far it is
LIVES_S = 10.0  # how long a record lasts unless renewed: a run that died is gone soon
DONE_S = 60.0  # how long a finished run stays to be seen


class NoUpkeep:
    """No index to tell it through (a ``Service`` built without one): nothing runs."""

    async def publish(self, run: Running, ttl_s: float) -> None:
        return None

    async def running(self, now: float) -> list[Running]:
        return []


class Published:
    """``async with Published(records, clock, targets, inner=bar) as progress:`` around a
    rebuild (``shards``: a reshard from one count to the other)."""

    def __init__(
        self,
        records: UpkeepRecords,
        clock: Clock,
        targets: Sequence[Target],
        *,
        inner: Progress | None = None,
        shards: tuple[int, int] | None = None,
    ) -> None:
        self.records = records
        self.clock = clock
        self.inner: Progress = inner or Quiet()
        now = clock.now()
        self.run = Running(
            id=secrets.token_hex(6),
            kind="rebuild" if shards is None else "reshard",
            windows=[f"{t.spec.name} {t.window.id}" for t in targets],
            started_at=now,
            updated_at=now,
            phase="starting",
            shards_from=None if shards is None else shards[0],
            shards_to=None if shards is None else shards[1],
        )
        self._task: asyncio.Task[None] | None = None
        self._begun = 0

    # -- Progress ------------------------------------------------------------------------

    def begin(self, what: str, total: int | None) -> None:
        self.inner.begin(what, total)
        self.run = replace(
            self.run, phase="filling", window=what, done=0, total=total, windows_done=self._begun
        )
        self._begun += 1

    def advance(self, members: int) -> None:
        self.inner.advance(members)
        self.run = replace(self.run, done=self.run.done + members)

    def say(self, text: str) -> None:
        self.inner.say(text)
        self.run = replace(self.run, detail=text.strip())

    def phase(self, name: str) -> None:
        phase = getattr(self.inner, "phase", None)
        if phase is not None:
            phase(name)
        if name != "filling":
            self.run = replace(self.run, phase=name, windows_done=self._begun)

    # -- the run's lifetime --------------------------------------------------------------

    async def __aenter__(self) -> Published:
        await self._publish(LIVES_S)
        self._task = asyncio.create_task(self._tell())
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if error is None:
            self.run = replace(self.run, phase="done", windows_done=len(self.run.windows))
        else:
            self.run = replace(self.run, phase="failed", detail=str(error) or kind.__name__)  # type: ignore[union-attr]
        await self._publish(DONE_S)

    async def _tell(self) -> None:
        while True:
            await asyncio.sleep(EVERY_S)
            await self._publish(LIVES_S)

    async def _publish(self, ttl_s: float) -> None:
        self.run = replace(self.run, updated_at=self.clock.now())
        try:
            await self.records.publish(self.run, ttl_s)
        except Unavailable:
            log.warning("the index did not take the rebuild's progress; told again later")
