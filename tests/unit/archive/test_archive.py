"""The archive file of a frozen window, written by several processes at once: a freeze that
two API processes (or an API process and the freezer) complete together writes it twice."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from podium.archive import standings as archive
from podium.archive.standings import FileArchive
from podium.domain.models import FinalEntry

ENTRIES = [
    FinalEntry(i + 1, i + 1, f"p{i:04d}", 10_000 - i, 1_790_000_000 + i) for i in range(5000)
]


def write_many(directory: str, times: int) -> tuple[str, str]:
    a = FileArchive(directory)
    out = ("", "")
    for _ in range(times):
        out = a._write("day", "2026-12-01", ENTRIES, 1_790_000_000.0)
    return out


def test_writers_at_once_all_succeed_with_the_same_file(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        got = pool.starmap(write_many, [(str(tmp_path), 20)] * 4)
    assert len(set(got)) == 1  # one name, one checksum
    name, _ = got[0]
    assert archive.read(tmp_path, name) == ENTRIES
    assert sorted(p.name for p in (tmp_path / "day").iterdir()) == [
        "2026-12-01.csv.gz",
        "2026-12-01.manifest.json",
    ]  # no temporary file left behind
