"""The change log port: between the store's outbox and the board updaters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from podium.domain.models import Message


class ChangeLog(Protocol):
    """Between the store's outbox and the board updaters. Delivery is at least once."""

    async def relay(self, limit: int) -> int:
        """Move committed outbox rows into the log; returns how many moved."""
        ...

    async def fetch(self, limit: int) -> list[Message]: ...
    async def ack(self, changes: Sequence[Message]) -> None: ...
    async def close(self) -> None: ...
