"""Cursor paging (``RankIndex.page_from``) on every rank index kind, against a plain Python
model of a board, while the board changes between pages (docs/architecture.md §5).

A Hypothesis state machine interleaves writes (scores that rise and fall: versioned
writes, as on ``last`` boards), removals and re-entries with the steps of paging walks: a
walk forward from the top page by each page's last row, and a walk backward from a page at
some offset by each page's first row. Every page is compared with the model at that
moment (its rows, the count ahead of the place and whether a member holds it, so the rows'
ranks, backwards too); and when a walk ends, every player whose score did not change during
it was seen exactly once (forward: the whole board; backward: everyone ahead of where it
began), and nobody was seen twice who did not move.

Each run gets its own event loop and, on Redis, its own key prefix, whose keys it deletes.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from podium.domain.boards import in_board_order
from podium.index.memory.index import MemoryIndex
from podium.index.redis.cluster import cluster_client, is_cluster_url
from podium.index.redis.index import RedisIndex
from podium.index.split.index import SplitIndex
from podium.ports import BoardKey, RankIndex, Slice
from tests.conftest import REDIS_URL, need
from tests.redis_keys import delete_prefixed

KEY = BoardKey("week", "2026-W44")
# Case and byte order matter ("B" < "_x" < "a" < "a1" < "b" < "é" in UTF-8 bytes), and
# more members than a page, so that walks take several pages.
MEMBERS = ["a", "B", "b", "a1", "_x", "A", "é", "0", "c", "d9", "Z", "zz"]
SCORES = st.integers(min_value=-3, max_value=3)  # few scores: many ties
RUN = f"podium-test-cursor-{secrets.token_hex(4)}"
_runs = itertools.count()

Row = tuple[str, int]


def model_slice(board: dict[str, int], at: Row, n: int, desc: bool, before: bool) -> Slice:
    """What ``page_from`` must answer, computed the obvious way: sort the board, find the
    place, take the rows on one side."""
    rows = in_board_order(board.items(), desc)
    member, score = at

    def is_ahead(row: Row) -> bool:
        key, place = (row[1], row[0]), (score, member)
        return key > place if desc else key < place

    ahead = [r for r in rows if is_ahead(r)]
    on = board.get(member) == score
    behind = [r for r in rows if not is_ahead(r) and r != (member, score)]
    return Slice(len(ahead), on, ahead[max(0, len(ahead) - n) :] if before else behind[:n])


@dataclass
class Walk:
    before: bool
    limit: int
    place: Row | None = None  # the cursor: the last row seen (forward) or the first (back)
    seen: list[str] = field(default_factory=list)
    # who must be seen exactly once: untouched members, on the board when the walk began
    # (backward: those ahead of where it began)
    owed: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)  # changed or left during the walk


class CursorMachine(RuleBasedStateMachine):
    """Subclassed per index kind with ``make`` (an index and how to clean up after it)."""

    make: Callable[[], tuple[RankIndex, Callable[[], Any]]]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.index, self._cleanup = self.run_async(self._make())
        self.board: dict[str, int] = {}
        self.version = 0
        self.desc = True
        self.walk: Walk | None = None
        self.walks = 0

    async def _make(self) -> tuple[RankIndex, Callable[[], Any]]:
        return type(self).make()

    def run_async(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def teardown(self) -> None:
        try:
            # A walk still under way ends on a board that no longer moves: checked too.
            for _ in range(len(MEMBERS) + 2):
                if self.walk is None:
                    break
                self.next_page()
            assert self.walk is None, "a walk of a still board did not end"
        finally:
            self._close()

    def _close(self) -> None:
        try:
            self.run_async(self._cleanup())
        finally:
            self.loop.close()

    @initialize(desc=st.booleans())
    def order(self, desc: bool) -> None:
        self.desc = desc

    # -- the board changes ------------------------------------------------------------

    def _touch(self, member: str) -> None:
        if self.walk is not None:
            self.walk.touched.add(member)

    @rule(entries=st.lists(st.tuples(st.sampled_from(MEMBERS), SCORES), min_size=1, max_size=5))
    def write(self, entries: list[Row]) -> None:
        versions = []
        for member, score in entries:
            self.version += 1
            versions.append(self.version)
            if self.board.get(member) != score:
                self._touch(member)
            self.board[member] = score
        self.run_async(
            self.index.write(KEY, entries, descending=self.desc, expire_at=None, versions=versions)
        )

    @rule(member=st.sampled_from(MEMBERS))
    def remove(self, member: str) -> None:
        self.version += 1
        if member in self.board:
            self._touch(member)
            del self.board[member]
        self.run_async(self.index.remove(KEY, [member], [self.version], expire_at=None))

    # -- paging walks -----------------------------------------------------------------

    def _rows(self) -> list[Row]:
        return in_board_order(self.board.items(), self.desc)

    @precondition(lambda self: self.walk is None)
    @rule(limit=st.integers(1, 4), before=st.booleans(), offset=st.integers(0, 8))
    def start(self, limit: int, before: bool, offset: int) -> None:
        """The first page by offset (forward walks from the top), as a client begins."""
        offset = offset if before else 0
        rows = self.run_async(
            self.index.page(KEY, offset, offset + limit - 1, descending=self.desc)
        )
        assert rows == self._rows()[offset : offset + limit]
        walk = Walk(before, limit, seen=[m for m, _ in rows])
        everyone = self._rows()
        walk.owed = {m for m, _ in (everyone[:offset] if before else everyone)}
        if rows:
            walk.place = rows[0] if before else rows[-1]
            self.walk = walk
        elif not before:
            assert not everyone  # an empty top page: an empty board, nothing to walk
        # (a backward walk from past the end has no first row to page back from)

    @precondition(lambda self: self.walk is not None)
    @rule()
    def next_page(self) -> None:
        walk = self.walk
        assert walk is not None and walk.place is not None
        got = self.run_async(
            self.index.page_from(
                KEY, walk.place, walk.limit, descending=self.desc, before=walk.before
            )
        )
        # The page, the count ahead of the place and whether it is held, so the ranks of
        # its rows (the first behind: ahead + on; the first ahead: ahead - len(rows)), are
        # exactly the model's at this moment.
        assert got == model_slice(self.board, walk.place, walk.limit, self.desc, walk.before)
        walk.seen += [m for m, _ in got.rows]
        done = not got.rows or (got.ahead - len(got.rows) == 0 if walk.before else False)
        if got.rows:
            walk.place = got.rows[0] if walk.before else got.rows[-1]
        if done or len(got.rows) < walk.limit:
            self._finish(walk)

    def _finish(self, walk: Walk) -> None:
        counts = Counter(walk.seen)
        for m in walk.owed - walk.touched:
            assert counts[m] == 1, (m, walk)  # no gap, no duplicate, for who stayed put
        for m, n in counts.items():
            assert n == 1 or m in walk.touched, (m, walk)  # seen twice only if it moved
        self.walk = None
        self.walks += 1

    @invariant()
    def count_agrees(self) -> None:
        assert self.run_async(self.index.count(KEY)) == len(self.board)


PROPERTY = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _run(make: Callable[[], tuple[RankIndex, Callable[[], Any]]], **overrides: Any) -> None:
    machine = type("Machine", (CursorMachine,), {"make": staticmethod(make)})
    run_state_machine_as_test(machine, settings=settings(PROPERTY, **overrides))  # type: ignore[no-untyped-call]


def _memory() -> tuple[RankIndex, Callable[[], Any]]:
    index = MemoryIndex()
    return index, index.close


def _split_memory() -> tuple[RankIndex, Callable[[], Any]]:
    index = SplitIndex([MemoryIndex() for _ in range(4)])
    return index, index.close


def _redis(url: str, shards: int | None) -> Callable[[], tuple[RankIndex, Callable[[], Any]]]:
    """One Redis index (``shards`` None), or a split index of ``shards`` shard indexes on
    one client, as bootstrap makes them (on one Redis or a cluster)."""

    def make() -> tuple[RankIndex, Callable[[], Any]]:
        prefix = f"{RUN}-{next(_runs)}"
        client = cluster_client(url) if is_cluster_url(url) else RedisIndex.client_from_url(url)
        index: RankIndex
        if shards is None:
            index = RedisIndex(client, prefix)
        else:
            index = SplitIndex([RedisIndex(client, prefix, shard=i) for i in range(shards)])

        async def cleanup() -> None:
            try:
                await delete_prefixed(client, prefix)
            finally:
                await client.aclose()

        return index, cleanup

    return make


def test_memory_index_cursors_match_the_model() -> None:
    _run(_memory)


def test_split_memory_index_cursors_match_the_model() -> None:
    _run(_split_memory)


def test_redis_index_cursors_match_the_model() -> None:
    need(REDIS_URL, "Redis")
    _run(_redis(REDIS_URL, None))


def test_split_redis_index_cursors_match_the_model() -> None:
    need(REDIS_URL, "Redis")
    _run(_redis(REDIS_URL, 16), max_examples=20)


def test_split_cluster_index_cursors_match_the_model(redis_cluster: Any) -> None:
    _run(_redis(redis_cluster.url, 16), max_examples=15)
