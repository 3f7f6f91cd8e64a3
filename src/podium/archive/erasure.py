"""A player's rows in the archive (``ports/erasure.py``): read for an export, and erased.

The day files of pruned results are written again without the player's rows; the frozen
standings files with a pseudonym in the player's place, every position, rank and point as
it was. Each file is written as its writer writes it (gzip without a timestamp, a temporary
file fsynced and renamed over the old one, so the old bytes are gone from the name), and its
manifest again with the new sha256 and count. A day file is written under the pruner's lock
(``archive/results.py``), so the two never write one day at once.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from podium.archive.results import (
    COLUMNS,
    SUBDIR,
    DirLock,
    _fsync_dir,
    _Hashing,
    _row,
    manifest_path,
    rows,
)
from podium.archive.standings import FileArchive, _atomic, read
from podium.domain.models import FinalEntry
from podium.errors import Unavailable

LOCK_WAIT_S = 30.0


class ArchiveFiles:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def _days(self) -> list[Path]:
        return sorted((self.dir / SUBDIR).glob("*.csv.gz"))

    def archived_results(self, player_id: str) -> Iterator[dict[str, Any]]:
        for day in self._days():
            for r in rows(day):
                if r.player_id == player_id:
                    yield asdict(r)

    def drop_results(self, player_id: str) -> int:
        lock = DirLock(self.dir)
        deadline = time.monotonic() + LOCK_WAIT_S
        while not lock.acquire():
            if time.monotonic() > deadline:
                raise Unavailable("the day files are held by a pruner; the erasure tries again")
            time.sleep(0.1)
        try:
            return sum(_drop(day, player_id) for day in self._days())
        finally:
            lock.release()

    def rename_in_standings(
        self, name: str, player_id: str, pseudonym: str
    ) -> tuple[bool, str | None]:
        path = self.dir / name
        if not path.exists():
            return False, None
        entries = read(self.dir, name)
        if not any(e.player_id == player_id for e in entries):
            return False, hashlib.sha256(path.read_bytes()).hexdigest()
        renamed = [
            FinalEntry(e.position, e.rank, pseudonym if e.player_id == player_id else e.player_id,
                       e.points, e.reached_at)
            for e in entries
        ]  # fmt: skip
        manifest_file = path.with_name(path.name.removesuffix(".csv.gz") + ".manifest.json")
        manifest = json.loads(manifest_file.read_text())
        _, checksum = FileArchive(self.dir)._write(
            manifest["board"], manifest["window"], renamed, manifest["frozenAt"]
        )
        return True, checksum


def _drop(day: Path, player_id: str) -> int:
    """The day file without the player's rows, if it held any; how many went. Streamed: the
    file is read twice (a look, then the copy), never held whole."""
    if not any(r.player_id == player_id for r in rows(day)):
        return 0
    tmp = day.with_name(f".{day.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    gone, kept, first, last = 0, 0, None, None
    try:
        with open(tmp, "wb") as raw:
            hashing = _Hashing(raw)
            with gzip.GzipFile(filename="", mode="wb", fileobj=hashing, mtime=0) as gz:
                text = io.TextIOWrapper(gz, encoding="utf-8", newline="")
                out = csv.writer(text, lineterminator="\n")
                out.writerow(COLUMNS)
                for r in rows(day):
                    if r.player_id == player_id:
                        gone += 1
                        continue
                    out.writerow(_row(r))
                    kept += 1
                    first = first or r.key
                    last = r.key
                text.flush()
                text.detach()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, day)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    manifest = json.loads(manifest_path(day).read_text())
    manifest |= {
        "results": kept,
        "sha256": hashing.digest.hexdigest(),
        "first": list(first) if first else None,
        "last": list(last) if last else None,
    }
    _atomic(manifest_path(day), json.dumps(manifest, indent=2).encode())
    _fsync_dir(day.parent)
    return gone
