"""A player's rank with neighbours, on the in-process index: one index read at one instant
(plus the one histogram read that shared ranks need), and the tie rules on top of it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest

from podium.config.settings import parse
from podium.domain.models import FrozenWindow, Profile
from podium.errors import IndexUnavailable, NotFound
from podium.index.memory.index import MemoryIndex
from podium.ports import Around, BoardKey, Placed, ScoreStore
from podium.ports.archive import Archive
from podium.service.boards import Boards
from podium.service.lifecycle import Lifecycle
from podium.service.profiles import ProfileCache
from podium.service.ranks.counted import CountedRanks
from podium.service.reads.reads import LAST_PAGE_S, Reads

# All-time boards hold points alone (no time packed in), so the scores below are the points.
BOARDS = [
    {"name": "first", "window": "all", "ties": "first"},
    {"name": "shared", "window": "all", "ties": "shared"},
    {"name": "asc", "window": "all", "order": "asc"},
]
POINTS = {"a": 50, "b": 40, "c": 40, "d": 40, "e": 30, "f": 20}


class Clock:
    def now(self) -> float:
        return 1_800_000_000.0


class Store:
    """Only what a live rank read asks of the store: nothing frozen, and no profiles."""

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        return {}

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        return {}

    async def friends(self, player_id: str) -> list[str]:
        return ["f", "ghost", "b", "e", player_id]


class CountingIndex(MemoryIndex):
    """The memory index, noting each read it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        if name in {"around", "rank", "ranks", "page", "count", "count_between"}:
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)


@pytest.fixture
async def reads() -> Reads:
    settings = parse({"boards": BOARDS})
    store = cast(ScoreStore, Store())
    clock = Clock()
    profiles = ProfileCache(store, clock)
    lifecycle = Lifecycle(settings, store, clock, cast(Archive, None), profiles)
    index = CountingIndex()
    for spec in settings.boards:
        entries = [(p, spec.codec.encode(pts)) for p, pts in POINTS.items()]
        await index.write(
            BoardKey(spec.name, "all"),
            entries,
            descending=spec.order == "desc",
            expire_at=None,
        )
    index.calls.clear()
    boards = Boards(settings.boards, clock)
    return Reads(
        settings, boards, store, CountedRanks(index, clock), index.copy, clock, lifecycle, profiles
    )


def rows(r: Any) -> list[tuple[int, str, int]]:
    return [(e.rank, e.player_id, e.points) for e in r.neighbors]


def index_of(reads: Reads) -> CountingIndex:
    """The index the reads count on (their rank source here: ``CountedRanks``)."""
    return cast(CountingIndex, cast(CountedRanks, reads.ranks).index)


def calls(reads: Reads) -> list[str]:
    return index_of(reads).calls


async def test_rank_with_neighbours_is_one_index_read(reads: Reads) -> None:
    # equal points: the member that sorts later by bytes first (as ZREVRANGE returns them)
    me = await reads.player_rank("first", "c", 2, None)
    assert (me.rank, me.points, me.exact) == (3, 40, True)
    assert rows(me) == [(1, "a", 50), (2, "d", 40), (3, "c", 40), (4, "b", 40), (5, "e", 30)]
    assert calls(reads) == ["around"]


async def test_neighbours_stop_at_the_ends_of_the_board(reads: Reads) -> None:
    top = await reads.player_rank("first", "a", 2, None)
    assert top.rank == 1 and [e.player_id for e in top.neighbors] == ["a", "d", "c"]
    bottom = await reads.player_rank("first", "f", 1, None)
    assert bottom.rank == 6 and [e.player_id for e in bottom.neighbors] == ["e", "f"]
    alone = await reads.player_rank("first", "e", 0, None)
    assert rows(alone) == [(5, "e", 30)]


async def test_shared_ranks_count_everyone_strictly_ahead(reads: Reads) -> None:
    me = await reads.player_rank("shared", "b", 1, None)
    assert (me.rank, me.points) == (2, 40)
    assert rows(me) == [(2, "c", 40), (2, "b", 40), (5, "e", 30)]
    # the first row ties with rows above the window: its rank is counted, not its position
    assert calls(reads) == ["around", "count_between"]
    last_of_the_tie = await reads.player_rank("shared", "b", 0, None)
    assert last_of_the_tie.rank == 2 and rows(last_of_the_tie) == [(2, "b", 40)]


async def test_ascending_board(reads: Reads) -> None:
    # lowest first, and on equal points byte order (as ZRANGE returns them)
    me = await reads.player_rank("asc", "c", 1, None)
    assert me.rank == 4
    assert rows(me) == [(3, "b", 40), (4, "c", 40), (5, "d", 40)]


async def test_absent_player_is_not_found(reads: Reads) -> None:
    with pytest.raises(NotFound):
        await reads.player_rank("first", "ghost", 2, None)
    with pytest.raises(NotFound):
        await reads.player_rank("shared", "ghost", 2, None)
    assert calls(reads) == ["around", "around"]


async def test_concurrent_misses_of_a_page_share_one_refill(reads: Reads) -> None:
    index = index_of(reads)
    pages = await asyncio.gather(*(reads.page("first", None, 0, 3) for _ in range(20)))
    assert index.calls.count("page") == 1
    assert all(p is pages[0] for p in pages)
    # equal scores: the later member first, as in Redis
    assert [e.player_id for e in pages[0].entries] == ["a", "d", "c"]
    await reads.page("first", None, 0, 3)  # now from the cache
    assert index.calls.count("page") == 1
    reads.clear_cache()
    await reads.page("first", None, 0, 3)
    assert index.calls.count("page") == 2


async def test_a_failed_refill_fails_its_waiters_and_the_next_read_tries_again(
    reads: Reads,
) -> None:
    index = index_of(reads)
    real = index.page
    failing = True

    async def page(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        if failing:
            raise RuntimeError("index down")
        return await real(*args, **kwargs)

    index.page = page  # type: ignore[method-assign]
    results = await asyncio.gather(
        *(reads.page("first", None, 0, 3) for _ in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    failing = False
    page = await reads.page("first", None, 0, 3)
    assert [e.player_id for e in page.entries] == ["a", "d", "c"]


class EstimatingIndex(CountingIndex):
    """The memory index, saying that ranks from ``below`` (0-based) down are estimates, and
    estimating them one place too high, as a sharded index might."""

    below = 3

    async def around(self, *args: Any, **kwargs: Any) -> Around | None:
        found = await super().around(*args, **kwargs)
        if found is None or found.rank < self.below:
            return found
        return Around(found.rank, found.score, found.rows, found.profiles, exact=False)

    async def ranks(self, *args: Any, **kwargs: Any) -> list[Placed | None]:
        return [
            p if p is None or p.rank < self.below else Placed(p.rank - 1, p.score, False)
            for p in await super().ranks(*args, **kwargs)
        ]


def estimating(reads: Reads) -> Reads:
    index = EstimatingIndex()
    index._boards = index_of(reads)._boards
    ranks = CountedRanks(index, reads.clock)
    return Reads(
        reads.settings,
        reads.boards,
        reads.players,
        ranks,
        index.copy,
        reads.clock,
        reads.lifecycle,
        reads.profiles,
    )


async def test_a_rank_is_exact_as_the_index_says(reads: Reads) -> None:
    near_top = await estimating(reads).player_rank("first", "d", 1, None)
    assert (near_top.rank, near_top.exact) == (2, True)
    below = await estimating(reads).player_rank("first", "e", 1, None)
    assert below.exact is False
    assert (await reads.player_rank("first", "e", 1, None)).exact is True


async def test_friends_carry_whether_their_global_rank_is_exact(reads: Reads) -> None:
    page = await reads.friends_page("first", "c", None)
    # c and the friends on the board (not "ghost"), in board order; every place exact here
    assert [(e.rank, e.player_id, e.global_rank, e.global_exact) for e in page.entries] == [
        (1, "c", 3, True),
        (2, "b", 4, True),
        (3, "e", 5, True),
        (4, "f", 6, True),
    ]
    assert calls(reads) == ["ranks"]
    estimated = await estimating(reads).friends_page("first", "c", None)
    # still in board order (c ahead of b, by the bytes of their ids on equal scores), whatever
    # the estimates say
    assert [(e.rank, e.player_id, e.global_rank, e.global_exact) for e in estimated.entries] == [
        (1, "c", 3, True),
        (2, "b", 3, False),
        (3, "e", 4, False),
        (4, "f", 5, False),
    ]
    shared = await reads.friends_page("shared", "c", None)
    assert [(e.rank, e.player_id, e.global_rank, e.global_exact) for e in shared.entries] == [
        (1, "c", 2, True),
        (1, "b", 2, True),
        (3, "e", 5, True),
        (4, "f", 6, True),
    ]


class MovingClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


class GoingDown(CountedRanks):
    """Counted on the index until ``down``; then every page read finds the index out."""

    down = False

    async def top(self, spec: Any, key: BoardKey, start: int, stop: int) -> Any:
        if self.down:
            raise IndexUnavailable("the index is down")
        return await super().top(spec, key, start, stop)


async def test_a_page_is_answered_as_last_read_while_the_index_is_out_for_ten_minutes() -> None:
    """The seed's order: the top page may be stale (with its true asOf) while Redis is out
    and its boards are rebuilt; a page older than ``LAST_PAGE_S`` is not passed off."""
    settings = parse({"boards": BOARDS, "server": {"page_cache_s": 0}})
    store = cast(ScoreStore, Store())
    clock = MovingClock(1_800_000_000.0)
    profiles = ProfileCache(store, clock)
    lifecycle = Lifecycle(settings, store, clock, cast(Archive, None), profiles)
    index = MemoryIndex()
    spec = settings.boards[0]
    await index.write(
        BoardKey(spec.name, "all"),
        [(p, spec.codec.encode(pts)) for p, pts in POINTS.items()],
        descending=True,
        expire_at=None,
    )
    ranks = GoingDown(index, clock)
    boards = Boards(settings.boards, clock)
    reads = Reads(settings, boards, store, ranks, index.copy, clock, lifecycle, profiles)
    first = await reads.page("first", None, 0, 3)
    assert len(first.entries) == 3 and first.entries[0].player_id == "a"
    ranks.down = True
    assert LAST_PAGE_S >= 300  # minutes: a restarted Redis's boards are rebuilt meanwhile
    clock.t += LAST_PAGE_S - 1  # a Redis restarted and its boards still being rebuilt
    stale = await reads.page("first", None, 0, 3)
    assert stale.entries == first.entries and stale.as_of == first.as_of == 1_800_000_000.0
    clock.t += 2  # past it: an error that says the index is out, not an old page
    with pytest.raises(IndexUnavailable):
        await reads.page("first", None, 0, 3)
