"""Reading a frozen window's archive file back, streamed: a player's line found by a search
of the bytes (never mistaken for a rank, a point count or the header), the file's bytes,
its CSV and its rows; and what the standings route and the cursors of past windows accept."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from pathlib import Path

import pytest

from podium.api.windows import _accepted, _takes_gzip
from podium.archive import standings as archive
from podium.archive.standings import FileArchive, _json_line, _rfc3339
from podium.domain.models import FinalEntry
from podium.domain.windows import to_rfc3339
from podium.errors import InvalidInput
from podium.service.reads.past import _decode, _encode

# Ids that read like the numbers around them, and one named like a column.
TRICKY = ["12", "7", "player_id", "-3", "a.b:c-d_e"]
ENTRIES = [
    FinalEntry(i + 1, i + 1, TRICKY[i] if i < 5 else f"p{i}", 2500 - i, 1_790_000_000 + 97 * i)
    for i in range(3000)
]


@pytest.fixture
def written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FileArchive, str, str]:
    # Small chunks: lines, and the needle itself, fall across chunk boundaries.
    monkeypatch.setattr(archive, "CHUNK", 97)
    a = FileArchive(tmp_path)
    name, checksum = a._write("day", "2026-12-01", ENTRIES, 1_790_000_000.0)
    return a, name, checksum


async def test_find_reads_the_id_field_only(written: tuple[FileArchive, str, str]) -> None:
    a, name, _ = written
    for e in ENTRIES[:10] + ENTRIES[-3:] + ENTRIES[1000:1003]:
        assert await a.find(name, e.player_id) == e
    # "12" is also a rank (line 12) and "7" a rank: found where they are ids, on lines 1, 2
    assert (await a.find(name, "12")) == ENTRIES[0]
    assert (await a.find(name, "7")) == ENTRIES[1]
    for absent in ("position", "4999", "1790000000", "p", "p30000"):
        assert await a.find(name, absent) is None


async def test_streams_give_the_file_its_csv_and_its_rows(
    written: tuple[FileArchive, str, str], tmp_path: Path
) -> None:
    a, name, checksum = written
    stored = (tmp_path / name).read_bytes()
    raw = b"".join([c async for c in a.raw(name)])
    assert raw == stored and hashlib.sha256(raw).hexdigest() == checksum
    assert await a.checksum(name) == checksum
    assert await a.checksum("day/none.csv.gz") is None
    text = b"".join([c async for c in a.text(name)])
    assert text == gzip.decompress(stored)
    lines = b"".join([c async for c in a.jsonl(name)]).decode().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "position": e.position,
            "rank": e.rank,
            "playerId": e.player_id,
            "points": e.points,
            "reachedAt": to_rfc3339(e.reached_at),
        }
        for e in ENTRIES
    ]


def test_the_format_follows_accept_and_gzip_accept_encoding() -> None:
    assert _accepted("") == "csv"
    assert _accepted("*/*") == "csv"
    assert _accepted("application/x-ndjson") == "jsonl"
    assert _accepted("text/csv;q=0.5, application/x-ndjson") == "jsonl"
    assert _accepted("application/x-ndjson;q=0.2, text/csv") == "csv"
    assert _accepted("application/jsonl, */*;q=0.1") == "jsonl"
    assert _takes_gzip("gzip, deflate, br")
    assert _takes_gzip("*")
    assert not _takes_gzip("")
    assert not _takes_gzip("identity")
    assert not _takes_gzip("gzip;q=0, br")
    assert not _takes_gzip("gzip;q=nonsense")


def test_a_cursor_pages_its_own_board_and_group_only() -> None:
    c = _encode("day", None, 1_790_000_000, "2026-09-20")
    assert _decode(c, "day", None) == (1_790_000_000, "2026-09-20")
    assert _decode(None, "day", None) is None
    for board, group in (("week", None), ("day", "FR")):
        with pytest.raises(InvalidInput, match="pages board day"):
            _decode(c, board, group)
    for bad in ("", "x", "not-one", _encode("day", None, 1, "w")[:-3], "W10=", "bnVsbA"):
        with pytest.raises(InvalidInput, match="cursor"):
            _decode(bad, "day", None)


def test_json_lines_write_times_as_to_rfc3339_does() -> None:
    rng = random.Random(7)
    times = [0, 86_399, 86_400, 951_868_799, 951_868_800] + [
        rng.randrange(0, 4_102_444_800) for _ in range(2000)
    ]
    for t in times:
        assert _rfc3339(t).decode() == to_rfc3339(t), t
    assert json.loads(_json_line(b"3,2,a.b,-5,1790000000", {})) == {
        "position": 3,
        "rank": 2,
        "playerId": "a.b",
        "points": -5,
        "reachedAt": to_rfc3339(1_790_000_000),
    }
