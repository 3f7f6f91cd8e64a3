"""A player's rows out of the day files and into a pseudonym in standings files
(``archive/erasure.py``): new files, manifests that match them, other rows as they were."""

from __future__ import annotations

import json
from pathlib import Path

from podium.archive import results
from podium.archive.erasure import ArchiveFiles
from podium.archive.standings import FileArchive, read
from podium.domain.models import FinalEntry
from podium.domain.retention import StoredResult

DAY0 = 1_792_800_000


def _row(player: str, match: str, at: int) -> StoredResult:
    return StoredResult(player, match, "gs", "default", at, 60, 7, 1.25, None, '{"k":1}')


def test_a_day_file_is_written_again_without_the_player(tmp_path: Path) -> None:
    w = results.DayWriter(tmp_path, DAY0)
    w.add([_row("a", "m1", DAY0 + 1), _row("gone", "m2", DAY0 + 2), _row("b", "m3", DAY0 + 3)])
    w.finish()
    files = ArchiveFiles(tmp_path)
    assert [r["match_id"] for r in files.archived_results("gone")] == ["m2"]
    assert files.drop_results("gone") == 1
    path = results.day_path(tmp_path, DAY0)
    manifest = results.verify(path)  # the sha256 and count match the new file
    assert manifest["results"] == 2 and manifest["first"][1] == "a" and manifest["last"][1] == "b"
    assert [r.player_id for r in results.rows(path)] == ["a", "b"]
    assert b"gone" not in path.read_bytes() and not list(files.archived_results("gone"))
    assert files.drop_results("gone") == 0  # again: nothing
    assert not list(path.parent.glob(".*.tmp"))


def test_a_standings_file_takes_the_pseudonym_in_the_players_place(tmp_path: Path) -> None:
    entries = [
        FinalEntry(1, 1, "a", 90, 5),
        FinalEntry(2, 2, "gone", 80, 6),
        FinalEntry(3, 2, "b", 80, 7),
    ]
    name, old = FileArchive(tmp_path)._write("day", "2026-10-24", entries, 1.5)
    files = ArchiveFiles(tmp_path)
    renamed, new = files.rename_in_standings(name, "gone", "erased-x")
    assert renamed and new is not None and new != old
    after = read(tmp_path, name)
    assert [(e.position, e.rank, e.player_id, e.points) for e in after] == [
        (1, 1, "a", 90),
        (2, 2, "erased-x", 80),
        (3, 2, "b", 80),
    ]
    manifest = json.loads((tmp_path / "day" / "2026-10-24.manifest.json").read_text())
    assert manifest["sha256"] == new and manifest["frozenAt"] == 1.5
    # Again (a crash after the file, before the store's checksum): the file's as it is.
    assert files.rename_in_standings(name, "gone", "erased-x") == (False, new)
    assert files.rename_in_standings("day/none.csv.gz", "gone", "erased-x") == (False, None)
