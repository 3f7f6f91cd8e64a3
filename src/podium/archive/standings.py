"""The archive (``ports/archive.py``): every frozen window's full standings as a compressed
file with a manifest.

Prizes are paid from this copy, never from the live board, so the file is written the same
way every time from the same standings (gzip without a timestamp, rows in board order) and
atomically (a temporary file renamed into place): re-writing it after a crash gives the
same bytes and the same checksum.
"""

from __future__ import annotations

import asyncio
import csv
import functools
import gzip
import hashlib
import io
import json
import os
import secrets
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from podium.domain.models import FinalEntry
from podium.domain.windows import DAY, to_rfc3339

COLUMNS = ("position", "rank", "player_id", "points", "reached_at")
CHUNK = 256 * 1024  # bytes of the file read at a time when it is streamed or searched
T = TypeVar("T")


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

    # -- reading back: streamed from the file, never the whole of it in memory; each
    # chunk is read (and decompressed) in a thread, so a large file holds no event loop.

    async def checksum(self, name: str) -> str | None:
        return await asyncio.to_thread(_checksum, self.dir / name)

    def raw(self, name: str) -> AsyncIterator[bytes]:
        return _threaded(_chunks(self.dir / name))

    def text(self, name: str) -> AsyncIterator[bytes]:
        return _threaded(_decompressed(self.dir / name))

    def jsonl(self, name: str) -> AsyncIterator[bytes]:
        return _threaded(_jsonl(self.dir / name))

    async def find(self, name: str, player_id: str) -> FinalEntry | None:
        return await asyncio.to_thread(_find, self.dir / name, player_id)


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


def _checksum(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        for chunk in _chunks(path):
            digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def _decompressed(path: Path) -> Iterator[bytes]:
    z = zlib.decompressobj(wbits=31)  # gzip framing
    for chunk in _chunks(path):
        if out := z.decompress(chunk):
            yield out
    if tail := z.flush():
        yield tail


def _lines(path: Path) -> Iterator[list[bytes]]:
    """The data lines of the CSV (after its header), a chunk's worth at a time."""
    carry = b""
    header = True
    for block in _decompressed(path):
        lines = (carry + block).split(b"\n")
        carry = lines.pop()
        if header and lines:
            lines = lines[1:]
            header = False
        yield lines
    if carry:
        yield [carry]


def _entry(line: bytes) -> FinalEntry:
    # Every field is a number or a player id (letters, digits, _.:-), so the writer never
    # quoted one: a split on commas reads what csv wrote.
    a, b, c, d, e = line.split(b",")
    return FinalEntry(int(a), int(b), c.decode(), int(d), int(e))


def _jsonl(path: Path) -> Iterator[bytes]:
    # Each second's RFC 3339 text, formatted once: a window's players reach their points
    # in far fewer distinct seconds than there are rows (at most 86,400 a day).
    times: dict[bytes, bytes] = {}
    for lines in _lines(path):
        if len(times) > TIMES_HELD:
            times.clear()
        if lines:
            yield b"".join([_json_line(line, times) for line in lines])


def _json_line(line: bytes, times: dict[bytes, bytes]) -> bytes:
    # Straight from the line's bytes, with no FinalEntry between: the numbers as csv wrote
    # them are JSON numbers, and a player id (letters, digits, _.:-) needs no escaping.
    a, b, c, d, e = line.split(b",")
    at = times.get(e)
    if at is None:
        at = times[e] = _rfc3339(int(e))
    return _JSON_LINE % (a, b, c, d, at)


_JSON_LINE = b'{"position":%s,"rank":%s,"playerId":"%s","points":%s,"reachedAt":"%s"}\n'
TIMES_HELD = 200_000  # seconds' texts one JSON lines stream holds


def _rfc3339(t: int) -> bytes:
    """``domain.windows.to_rfc3339`` for every row of a file: a window's rows share a few
    days, so each day's date is formatted once."""
    day, s = divmod(t, DAY)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return b"%s%02d:%02d:%02dZ" % (_date(day), h, m, s)


@functools.lru_cache(maxsize=1024)
def _date(day: int) -> bytes:
    return to_rfc3339(day * DAY)[:11].encode()  # 2026-10-28T


def _find(path: Path, player_id: str) -> FinalEntry | None:
    """A search of the bytes for ``,<id>,`` (a C-speed find, no parse of the rows that do
    not match), each hit checked to be the id field of its line: a rank may read like an
    id (``,12,``), and the header names its columns."""
    needle = f",{player_id},".encode()
    carry = b""
    for block in _decompressed(path):
        data = carry + block
        cut = data.rfind(b"\n") + 1
        found = _search(data[:cut], needle, player_id)
        if found is not None:
            return found
        carry = data[cut:]
    return _search(carry, needle, player_id)


def _search(data: bytes, needle: bytes, player_id: str) -> FinalEntry | None:
    at = data.find(needle)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        try:
            e = _entry(data[start : end if end >= 0 else len(data)])
        except ValueError:  # the header
            e = None
        if e is not None and e.player_id == player_id:
            return e
        at = data.find(needle, at + 1)
    return None


async def _threaded(items: Iterator[T]) -> AsyncIterator[T]:
    """A blocking iterator, each step in a thread."""
    done = object()
    try:
        while (item := await asyncio.to_thread(next, items, done)) is not done:
            yield item  # type: ignore[misc]
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()
