"""Day files of pruned results: a rewrite merges what the file holds with the store's rows,
each key once, and gives the same bytes for the same rows; a file is checked against its
manifest; ``podium archive show`` prints it and refuses one that does not match."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from podium.archive import results as result_archive
from podium.cli.main import app
from podium.domain.retention import StoredResult

T0 = 1_792_800_000  # 2026-10-24T00:00:00Z


def r(player: str, match: str, ended: int = T0 + 10, flag: str | None = None) -> StoredResult:
    return StoredResult(player, match, "k1", "ranked", ended, 300, 42, 1_792_900_000.125, flag)


def write(directory: Path, *pages: list[StoredResult]) -> str:
    w = result_archive.DayWriter(directory, T0)
    for page in pages:
        w.add(page)
    return w.finish()


def test_a_rewrite_keeps_each_result_once_and_the_same_bytes(tmp_path: Path) -> None:
    first = [r("a", "m1"), r("b", "m1", flag="jump"), r("a", "m2", T0 + 20)]
    checksum = write(tmp_path, first[:2], first[2:])
    path = result_archive.day_path(tmp_path, T0)
    assert path.name == "2026-10-24.csv.gz"
    assert list(result_archive.rows(path)) == sorted(first, key=lambda x: x.key)
    # Killed before its deletes: the same rows again give the same file.
    assert write(tmp_path, first) == checksum
    assert write(tmp_path) == checksum
    # Rows the file lacks join it, in key order, and those it has are not doubled.
    more = [r("a", "m0", T0 + 5), r("b", "m1", flag="jump"), r("c", "m9", T0 + 30)]
    write(tmp_path, more)
    keys = [x.key for x in result_archive.rows(path)]
    assert keys == sorted({x.key for x in first + more})
    manifest = result_archive.verify(path)
    assert manifest["results"] == 5
    assert manifest["first"] == [T0 + 5, "a", "m0"] and manifest["last"] == [T0 + 30, "c", "m9"]


def test_holds_answers_for_keys_in_order(tmp_path: Path) -> None:
    write(tmp_path, [r("a", "m1"), r("c", "m1")])
    holds = result_archive.Holds(result_archive.day_path(tmp_path, T0))
    assert [holds(k) for k in [(T0, "z", "z"), (T0 + 10, "a", "m1"), (T0 + 10, "b", "m1")]] == [
        False,
        True,
        False,
    ]
    assert holds((T0 + 10, "c", "m1")) and not holds((T0 + 11, "a", "a"))


def test_only_one_pruner_holds_an_archive(tmp_path: Path) -> None:
    one, two = result_archive.DirLock(tmp_path), result_archive.DirLock(tmp_path)
    assert one.acquire()
    assert not two.acquire()
    one.release()
    assert two.acquire()
    two.release()


def test_archive_show_verifies_and_prints(tmp_path: Path) -> None:
    write(tmp_path, [r("a", "m1"), r("b", "m2", flag="streak")])
    path = result_archive.day_path(tmp_path, T0)
    done = CliRunner().invoke(app, ["archive", "show", str(path)])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert "2 results of 2026-10-24" in lines[0] and "(verified)" in lines[0]
    assert lines[2:] == [
        f"{T0 + 10},a,m1,k1,ranked,300,42,1792900000.125,",
        f"{T0 + 10},b,m2,k1,ranked,300,42,1792900000.125,streak",
    ]
    # A file changed after its manifest was written is refused, and says why.
    manifest = result_archive.manifest_path(path)
    m = json.loads(manifest.read_text())
    m["sha256"] = "0" * 64
    manifest.write_text(json.dumps(m))
    done = CliRunner().invoke(app, ["archive", "show", str(path)])
    assert done.exit_code == 1
    assert "is not the manifest's" in done.output
