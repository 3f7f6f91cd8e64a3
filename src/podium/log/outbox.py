"""The store's outbox, read directly as the change log (the embedded default).

There is nothing to relay: the outbox rows are the log. Updaters claim rows under a lease
(``FOR UPDATE SKIP LOCKED`` on Postgres, ``BEGIN IMMEDIATE`` on SQLite) and delete them once
applied, so several updaters can share the work and a crashed one's rows come back when its
lease runs out. Rows are claimed one by one, never past a high-water mark: sequence ids are
handed out before commit, so a lower id can commit after a higher one has been read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from podium.domain.models import Message
from podium.ports import Clock, ScoreStore


class OutboxLog:
    def __init__(self, store: ScoreStore, clock: Clock, lease_s: float = 30.0) -> None:
        self._store = store
        self._clock = clock
        self._lease_s = lease_s

    async def relay(self, limit: int) -> int:
        return 0  # the outbox is the log

    async def fetch(self, limit: int) -> list[Message]:
        return await self._store.claim_changes(limit, self._lease_s, self._clock.now())

    async def ack(self, changes: Sequence[Message]) -> None:
        # The store's outbox rows are the log: each handle is the row id.
        await self._store.ack_changes([cast(int, c.handle) for c in changes])

    async def close(self) -> None:
        return None
