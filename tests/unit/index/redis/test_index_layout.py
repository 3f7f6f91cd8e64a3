"""The index's shard layouts (``index/redis/layout.py``, ``index/redis/keys.py``): the tags of a
layout a reshard built never meet the configured layout's; a process follows the layout record,
writes both layouts while the next is built and the one it left until every process can have
followed, and says so when its settings name another count."""

from __future__ import annotations

import fnmatch
import logging
import time
from typing import Any

import pytest

from podium import metrics
from podium.index.redis.keys import Keys, layout_pattern, shard_tag
from podium.index.redis.layout import Layout, LiveCopy, LiveIndex, Parts
from podium.ports import BoardKey

KEY = BoardKey("week", "2026-W44")


def test_a_built_layouts_tags_carry_its_count() -> None:
    assert shard_tag(3) == "{s03}"
    assert shard_tag(3, 32) == "{s03.32}"
    plain, built = Keys("p", shard_tag(3)), Keys("p", shard_tag(3, 32))
    assert plain.board(KEY) == "p:{s03}:week:2026-W44:z"
    assert built.board(KEY) == "p:{s03.32}:week:2026-W44:z"
    assert built.profiles(shard_tag(3, 32)) == "p:{s03.32}:profiles"
    # each pattern finds its own layout's keys and never the other's
    assert fnmatch.fnmatchcase(plain.board(KEY), layout_pattern("p", 4, False))
    assert not fnmatch.fnmatchcase(built.board(KEY), layout_pattern("p", 4, False))
    assert fnmatch.fnmatchcase(built.generation(), layout_pattern("p", 32, True))
    assert not fnmatch.fnmatchcase(built.generation(), layout_pattern("p", 3, True))
    assert not fnmatch.fnmatchcase(plain.generation(), layout_pattern("p", 32, True))
    # past 100 shards a tag has three digits, and the pattern too
    wide = Keys("p", shard_tag(120, 128))
    assert fnmatch.fnmatchcase(wide.generation(), layout_pattern("p", 128, True))
    assert not fnmatch.fnmatchcase(wide.generation(), layout_pattern("p", 12, True))


def test_the_record_and_its_next_share_one_slot() -> None:
    keys = Keys("p")
    assert keys.layout() == "p:{layout}" and keys.layout_next() == "p:{layout}:next"


class Record:
    """A layout record a test sets."""

    def __init__(self) -> None:
        self.live: int | None = None
        self.next: int | None = None

    async def read(self) -> tuple[int | None, int | None]:
        return self.live, self.next


class Split:
    """A layout's split index (and copy) that notes what was written to it."""

    def __init__(self, count: int) -> None:
        self.shards = [object()] * count
        self.shard_count = count
        self.written: list[str] = []

    async def write(self, key: BoardKey, entries: Any, **_: Any) -> int:
        self.written += [m for m, _ in entries]
        return len(entries)

    async def write_profiles(self, entries: Any) -> int:
        self.written.append("profile")
        return len(entries)

    async def count(self, key: BoardKey) -> int:
        return self.shard_count


def _layout(record: Record, configured: int = 4, watch_s: float = 0.05) -> Layout:
    def parts(count: int, tagged: bool) -> Parts:
        split: Any = Split(count)
        return Parts(count, tagged, split, split, split)

    return Layout(record, parts, configured, "p", watch_s)  # type: ignore[arg-type]


async def test_a_process_follows_the_record_and_writes_both_meanwhile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = Record()
    layout = _layout(record)
    index, copy = LiveIndex(layout), LiveCopy(layout)
    assert not await layout.follow()
    assert (layout.count, layout.tagged) == (4, False)
    count = index.count  # a method looked up once and kept reaches the live layout later
    assert await count(KEY) == 4

    record.next = 8  # a reshard builds 8 shards: every write lands in both
    assert not await layout.follow()
    await index.write(KEY, [("a", 1)], descending=True, expire_at=None)
    await copy.write_profiles([("x", 1)])
    four, eight = layout.parts(4, False).split, layout.parts(8, True).split
    assert four.written == eight.written == ["a", "profile"]  # type: ignore[attr-defined]

    switches = metrics.INDEX_LAYOUT_SWITCHES._value.get()
    record.live, record.next = 8, None  # the switch
    with caplog.at_level(logging.INFO):
        assert await layout.follow()
    assert (layout.count, layout.tagged, index.shard_count, len(index.shards)) == (8, True, 8, 8)
    assert await count(KEY) == 8
    assert metrics.INDEX_LAYOUT_SWITCHES._value.get() == switches + 1
    assert "switched from 4 shards to 8 shards (tagged)" in caplog.text
    assert "set index.shards = 8" in caplog.text
    # the layout left is written too until every process can have followed
    await index.write(KEY, [("b", 1)], descending=True, expire_at=None)
    assert four.written[-1] == eight.written[-1] == "b"  # type: ignore[attr-defined]
    layout._left_until = time.monotonic() - 1  # as once watch_s and a margin passed
    await index.write(KEY, [("c", 1)], descending=True, expire_at=None)
    assert four.written[-1] == "b" and eight.written[-1] == "c"  # type: ignore[attr-defined]


async def test_without_a_record_the_configured_layout_is_live() -> None:
    layout = _layout(Record(), configured=16)
    await layout.follow()
    assert (layout.count, layout.tagged, layout.both()) == (16, False, [layout.live])
