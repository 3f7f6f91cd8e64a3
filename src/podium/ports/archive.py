"""``Archive``: where a frozen window's full standings are kept, the copy prizes are paid
from (``archive/standings.py`` writes them as files). ``ResultFiles``: where the pruner
moves results past the retention, a file per day (``archive/results.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Protocol

from podium.domain.models import FinalEntry
from podium.domain.retention import ResultKey, StoredResult


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


class DayFile(Protocol):
    """One day's file written again: its old rows merged with the store's, a page at a time,
    in key order. Blocking file work: its methods run in a thread."""

    count: int  # rows in the file
    added: int  # rows of the store's that the old file did not hold

    @property
    def name(self) -> str: ...

    def add(self, page: list[StoredResult]) -> None:
        """The store's next rows of the day, in key order, after the ones added before."""
        ...

    def finish(self) -> str:
        """The file durable in place with its manifest; its sha256."""
        ...

    def abort(self) -> None: ...

    def holds(self) -> Callable[[ResultKey], bool]:
        """After ``finish``: whether a key is in the file, asked in key order."""
        ...


class FilesLock(Protocol):
    def acquire(self) -> bool:
        """Take the lock if nobody holds it; False if another pruner does."""
        ...

    def release(self) -> None: ...


class ResultFiles(Protocol):
    where: str  # the folder of the day files, as logs and messages show it
    columns: tuple[str, ...]

    def lock(self) -> FilesLock:
        """The lock of these day files: one pruner at a time."""
        ...

    def day(self, start: int) -> DayFile:
        """The file of the UTC day that starts at ``start``, to be written again."""
        ...

    def verify(self, file: str) -> dict[str, Any]:
        """A day file checked against its manifest (sha256, count): the manifest. Raises
        ``ValueError`` (or ``OSError``, ``KeyError``) on a file that does not match."""
        ...

    def rows(self, file: str) -> Iterator[StoredResult]: ...
