"""The archive: every frozen window's full standings as a compressed file with a manifest.

Prizes are paid from this copy, never from the live board, so the file is written the same
way every time from the same standings (gzip without a timestamp, rows in board order) and
atomically (a temporary file renamed into place): re-writing it after a crash gives the
same bytes and the same checksum.
"""

from __future__ import annotations

import asyncio
import csv
import gzip
import hashlib
import io
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from podium.domain.models import FinalEntry

COLUMNS = ("position", "rank", "player_id", "points", "reached_at")


class Archive(Protocol):
    async def write(
        self, board: str, window: str, entries: Sequence[FinalEntry], frozen_at: float
    ) -> tuple[str, str]:
        """Write the standings; return (file name, sha256 of its bytes)."""
        ...


class FileArchive:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    async def write(
        self, board: str, window: str, entries: Sequence[FinalEntry], frozen_at: float
    ) -> tuple[str, str]:
        return await asyncio.to_thread(self._write, board, window, entries, frozen_at)

    def _write(
        self, board: str, window: str, entries: Sequence[FinalEntry], frozen_at: float
    ) -> tuple[str, str]:
        text = io.StringIO()
        out = csv.writer(text, lineterminator="\n")
        out.writerow(COLUMNS)
        for e in entries:
            out.writerow((e.position, e.rank, e.player_id, e.points, e.reached_at))
        data = gzip.compress(text.getvalue().encode(), mtime=0)
        checksum = hashlib.sha256(data).hexdigest()
        name = f"{board}/{window}.csv.gz"
        manifest = {
            "board": board,
            "window": window,
            "players": len(entries),
            "file": Path(name).name,
            "sha256": checksum,
            "columns": list(COLUMNS),
            "frozenAt": frozen_at,
        }
        _atomic(self.dir / name, data)
        _atomic(
            self.dir / f"{board}/{window}.manifest.json", json.dumps(manifest, indent=2).encode()
        )
        return name, checksum


def read(directory: str | Path, name: str) -> list[FinalEntry]:
    """The standings in an archive file (for audits and tests)."""
    with gzip.open(Path(directory) / name, "rt", newline="") as f:
        rows = list(csv.reader(f))
    return [FinalEntry(int(a), int(b), c, int(d), int(e)) for a, b, c, d, e in rows[1:]]


def _atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # A temporary name of this writer's own: two processes completing one freeze at once
    # (two API processes, a freezer) both write the file, the same bytes; with one shared
    # name, the second rename found the first had taken it, and its freeze answered 500.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
