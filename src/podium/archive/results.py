"""Pruned results as files: one gzip CSV per UTC day of ``endedAt``, each with a manifest.

Under ``[archive] dir``: ``results/<YYYY-MM-DD>.csv.gz`` and ``<YYYY-MM-DD>.manifest.json``
(the day, the count, the first and last key, the sha256 of the file's bytes). The rows are
in key order, (ended_at, player_id, match_id), each key once.

Written as the standings archive is (``archive/standings.py``): gzip without a timestamp, a
temporary file renamed into place, so the same rows always give the same bytes. A day is written
from what its file already holds merged with what the store still has of that day, both in key
order, in one pass that keeps one row of each: so a pass that is killed after its file was
written but before its deletes, and runs again, writes the same file, and a result recorded
while a pass ran joins its day's file on the next. The file is fsynced, and its directory,
before the store deletes anything it holds. One pruner writes a day at a time: a lock file
(``flock``, released by the kernel when its holder dies) beside the files, shared by every
process whose ``[archive] dir`` is this one.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import gzip
import hashlib
import io
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from podium.archive.standings import _atomic
from podium.domain.retention import ResultKey, StoredResult, day_id

COLUMNS = (
    "ended_at",
    "player_id",
    "match_id",
    "key_id",
    "mode",
    "duration_s",
    "points",
    "recorded_at",
    "flag",
    "metadata",
)
SUBDIR = "results"


def day_path(directory: str | Path, start: int) -> Path:
    """The day file of the UTC day starting at ``start``."""
    return Path(directory) / SUBDIR / f"{day_id(start)}.csv.gz"


def manifest_path(file: Path) -> Path:
    return file.with_name(file.name.removesuffix(".csv.gz") + ".manifest.json")


def _row(r: StoredResult) -> tuple[object, ...]:
    return (
        r.ended_at,
        r.player_id,
        r.match_id,
        r.key_id,
        r.mode,
        r.duration_s,
        r.points,
        repr(r.recorded_at),  # repr: the float back exactly
        "" if r.flag is None else r.flag,
        "" if r.metadata is None else r.metadata,  # a JSON object: never empty
    )


def _parse(row: list[str]) -> StoredResult:
    ended, player, match, key, mode, duration, points, recorded, flag, metadata = row
    return StoredResult(
        player,
        match,
        key,
        mode,
        int(ended),
        int(duration),
        int(points),
        float(recorded),
        flag or None,
        metadata or None,
    )


def rows(file: str | Path) -> Iterator[StoredResult]:
    """The results in a day file, in key order (a file not there holds none)."""
    path = Path(file)
    if not path.exists():
        return
    with gzip.open(path, "rt", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is not None and tuple(header) != COLUMNS:
            raise ValueError(f"{path}: not a results day file (columns {header})")
        for row in reader:
            yield _parse(row)


class ManifestMismatch(ValueError):
    """A day file whose bytes are not the ones its manifest describes."""


def verify(file: str | Path) -> dict[str, Any]:
    """The manifest of a day file, once the file's sha256 and count match it."""
    path = Path(file)
    manifest = json.loads(manifest_path(path).read_text())
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != manifest["sha256"]:
        raise ManifestMismatch(
            f"{path.name}: sha256 {digest.hexdigest()} is not the manifest's {manifest['sha256']}"
        )
    count = sum(1 for _ in rows(path))
    if count != manifest["results"]:
        raise ManifestMismatch(
            f"{path.name}: {count} results, the manifest says {manifest['results']}"
        )
    return dict(manifest)


class _Hashing(io.RawIOBase):
    """A file that hashes what is written to it: the sha256 of the compressed bytes."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        self.digest.update(data)
        self.f.write(data)
        return len(data)


class DayWriter:
    """One day file written again: its old rows merged with the store's, a page at a time,
    in key order, each key once. Blocking file work: run its methods in a thread."""

    def __init__(self, directory: str | Path, start: int) -> None:
        self.start = start
        self.path = day_path(directory, start)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._old = rows(self.path)
        self._next: StoredResult | None = next(self._old, None)
        self._tmp = self.path.with_name(
            f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        )
        self._raw = open(self._tmp, "wb")  # noqa: SIM115 (closed in finish or abort)
        self._hash = _Hashing(self._raw)
        self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self._hash, mtime=0)
        self._text = io.TextIOWrapper(self._gz, encoding="utf-8", newline="")
        self._csv = csv.writer(self._text, lineterminator="\n")
        self._csv.writerow(COLUMNS)
        self.count = 0
        self.added = 0  # rows of the store's that the old file did not hold
        self.first: ResultKey | None = None
        self.last: ResultKey | None = None

    def _write(self, r: StoredResult) -> None:
        if self.last is not None and r.key <= self.last:
            return  # a key written already (the old file's, or a page's overlap)
        self._csv.writerow(_row(r))
        self.count += 1
        self.first = self.first or r.key
        self.last = r.key

    def add(self, page: list[StoredResult]) -> None:
        """The store's next rows of the day, in key order, after the ones added before."""
        for r in page:
            # The file's rows up to this key; one with this very key was archived before,
            # and the file's copy is the one kept.
            while self._next is not None and self._next.key <= r.key:
                self._write(self._next)
                self._next = next(self._old, None)
            if self.last is None or r.key > self.last:
                self.added += 1
            self._write(r)

    def finish(self) -> str:
        """The rest of the old rows, then the file durable in place and its manifest; the
        sha256 of the file."""
        while self._next is not None:
            self._write(self._next)
            self._next = next(self._old, None)
        self._text.flush()
        self._text.detach()
        self._gz.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        os.replace(self._tmp, self.path)
        checksum = self._hash.digest.hexdigest()
        manifest = {
            "day": day_id(self.start),
            "file": self.path.name,
            "results": self.count,
            "sha256": checksum,
            "columns": list(COLUMNS),
            "first": list(self.first) if self.first else None,
            "last": list(self.last) if self.last else None,
        }
        _atomic(manifest_path(self.path), json.dumps(manifest, indent=2).encode())
        _fsync_dir(self.path.parent)
        return checksum

    @property
    def name(self) -> str:
        return self.path.name

    def holds(self) -> Holds:
        return Holds(self.path)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._raw.close()
        with contextlib.suppress(FileNotFoundError):
            self._tmp.unlink()


class Holds:
    """Whether keys are in a day file: the file read once, in key order, alongside the
    store's pages of the same day (also in key order)."""

    def __init__(self, file: Path) -> None:
        self._rows = rows(file)
        self._next = next(self._rows, None)

    def __call__(self, key: ResultKey) -> bool:
        while self._next is not None and self._next.key < key:
            self._next = next(self._rows, None)
        return self._next is not None and self._next.key == key


@dataclass
class DirLock:
    """The lock of one archive directory's day files (``flock``: per open file, released
    when its holder exits, however it exits)."""

    directory: Path
    _fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock if nobody holds it; False if another pruner does."""
        path = Path(self.directory) / SUBDIR / ".lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _fsync_dir(path: Path) -> None:
    """The rename itself durable: the store deletes what the file holds next."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DayFiles:
    """``ResultFiles`` (``ports/archive.py``) in ``<directory>/results``."""

    columns: tuple[str, ...] = COLUMNS

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.where = str(self.directory / SUBDIR)

    def lock(self) -> DirLock:
        return DirLock(self.directory)

    def day(self, start: int) -> DayWriter:
        return DayWriter(self.directory, start)

    def verify(self, file: str) -> dict[str, Any]:
        return verify(file)

    def rows(self, file: str) -> Iterator[StoredResult]:
        return rows(file)
