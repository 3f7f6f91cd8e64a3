"""``Archive``: where a frozen window's full standings are kept, the copy prizes are paid
from (``archive/standings.py`` writes them as files).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from podium.domain.models import FinalEntry


class Archive(Protocol):
    async def write(
        self, board: str, window: str, entries: Sequence[FinalEntry], frozen_at: float
    ) -> tuple[str, str]:
        """Write the standings; return (file name, sha256 of its bytes)."""
        ...

    async def checksum(self, name: str) -> str | None:
        """The sha256 of the file's bytes as they are now; None if it is not here."""
        ...

    def raw(self, name: str) -> AsyncIterator[bytes]:
        """The file's bytes as stored (the gzip the sha256 is of), a chunk at a time."""
        ...

    def text(self, name: str) -> AsyncIterator[bytes]:
        """The standings as CSV (the file decompressed), a chunk at a time."""
        ...

    def jsonl(self, name: str) -> AsyncIterator[bytes]:
        """The standings as JSON lines, a chunk at a time: the columns in camelCase,
        ``reachedAt`` in RFC 3339."""
        ...

    async def find(self, name: str, player_id: str) -> FinalEntry | None:
        """One player's line of the standings, or None if they are not in them."""
        ...
