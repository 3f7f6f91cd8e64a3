"""The rank index contract: one body per behaviour, run against every adapter.

Every adapter (memory, one Redis, a shard of a split board on Redis and on Redis Cluster,
``tests/contract/conftest.py``) must answer exactly alike, down to Redis's own order for
equal scores: ``ZREVRANGE`` returns equal scores in reverse byte order of the member,
``ZRANGE`` in byte order (invariant 4 of docs/architecture.md). Ranks are 0-based. The expiry
tests are per adapter, because memory and Redis show an expiry differently (a clock versus a
TTL).
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rx
from redis.asyncio.sentinel import MasterNotFoundError, SlaveNotFoundError

from podium.domain.boards import in_board_order
from podium.errors import IndexUnavailable, InternalError, Unavailable
from podium.index.memory.index import MemoryIndex
from podium.index.redis.errors import translate, translated
from podium.index.redis.index import RedisIndex
from podium.ports import Around, BoardKey, Placed, RankIndex
from tests.conftest import REDIS_URL
from tests.contract.conftest import INDEXES, Backend, backend_of
from tests.proxy import Proxy

WEEK = BoardKey("week", "2026-W44")
DAY = BoardKey("day", "2026-10-28")
MISSING = BoardKey("week", "1999-W01")

# Members chosen to catch case and byte-order mistakes: "B" (0x42) < "_x" (0x5f) < "a" (0x61)
# < "a1" < "b"; "z" (0x7a) < "é" (0xc3 0xa9) < "😀" (0xf0 ...) in UTF-8 byte order.
TRICKY = ["a", "B", "b", "a1", "_x", "A", "aa", "z", "é", "😀", "0", "a0"]
MAX = 2**53 - 1


def board_order(entries: dict[str, int], descending: bool) -> list[tuple[str, int]]:
    """The reference order (``in_board_order``): (score, member bytes) ascending, reversed on
    descending boards."""
    return in_board_order(entries.items(), descending)


@pytest.fixture(params=INDEXES)
def backend(request: pytest.FixtureRequest) -> Backend:
    """Memory, or Redis under a key prefix of our own (deleted afterwards): one Redis, a
    shard on it, a shard on the cluster."""
    return backend_of(request, request.param)


@pytest.fixture
async def index(backend: Backend) -> AsyncIterator[RankIndex]:
    idx: RankIndex = backend.index()
    try:
        yield idx
    finally:
        await idx.close()


async def full(index: RankIndex, key: BoardKey, descending: bool) -> list[tuple[str, int]]:
    return await index.page(key, 0, 10_000, descending=descending)


# -- writes ---------------------------------------------------------------------------------


async def test_ping(index: RankIndex) -> None:
    await index.ping()


async def test_write_gt_keeps_the_highest_score(index: RankIndex) -> None:
    assert await index.write(WEEK, [("p1", 10), ("p2", 7)], descending=True, expire_at=None) == 2
    assert await index.write(WEEK, [("p1", 5)], descending=True, expire_at=None) == 0  # lower
    assert await index.write(WEEK, [("p1", 10)], descending=True, expire_at=None) == 0  # equal
    assert await index.rank(WEEK, "p1", descending=True) == Placed(0, 10, True)
    assert await index.write(WEEK, [("p2", 15)], descending=True, expire_at=None) == 1  # higher
    assert await full(index, WEEK, True) == [("p2", 15), ("p1", 10)]
    # within one batch, in order: the lower replay after the higher one changes nothing
    assert (
        await index.write(WEEK, [("p3", 4), ("p3", 9), ("p3", 6)], descending=True, expire_at=None)
        == 2
    )
    assert await index.rank(WEEK, "p3", descending=True) == Placed(2, 9, True)


async def test_write_lt_keeps_the_lowest_score(index: RankIndex) -> None:
    assert await index.write(WEEK, [("p1", 10), ("p2", 7)], descending=False, expire_at=None) == 2
    assert await index.write(WEEK, [("p1", 15)], descending=False, expire_at=None) == 0  # higher
    assert await index.write(WEEK, [("p1", 10)], descending=False, expire_at=None) == 0  # equal
    assert await index.rank(WEEK, "p1", descending=False) == Placed(1, 10, True)
    assert await index.write(WEEK, [("p1", 3)], descending=False, expire_at=None) == 1  # lower
    assert await full(index, WEEK, False) == [("p1", 3), ("p2", 7)]
    assert (
        await index.write(WEEK, [("p3", 9), ("p3", 4), ("p3", 6)], descending=False, expire_at=None)
        == 2
    )
    assert await index.rank(WEEK, "p3", descending=False) == Placed(1, 4, True)


async def test_replayed_and_reordered_writes_converge(index: RankIndex, descending: bool) -> None:
    batches = [[("a", 1), ("b", 5)], [("a", 3), ("c", 2)], [("b", 4), ("a", 2), ("c", 6)]]
    for batch in batches:
        await index.write(WEEK, batch, descending=descending, expire_at=None)
    for batch in reversed(batches):  # replay everything, in the other order
        assert await index.write(WEEK, batch[::-1], descending=descending, expire_at=None) == 0
    pick = max if descending else min
    every = [entry for batch in batches for entry in batch]
    expected = {m: pick(s for mm, s in every if mm == m) for m in "abc"}
    assert await full(index, WEEK, descending) == board_order(expected, descending)


async def test_write_of_nothing(index: RankIndex, descending: bool) -> None:
    assert await index.write(WEEK, [], descending=descending, expire_at=None) == 0
    assert await index.count(WEEK) == 0
    assert await full(index, WEEK, descending) == []


async def test_keys_are_independent(index: RankIndex) -> None:
    await index.write(WEEK, [("p1", 10)], descending=True, expire_at=None)
    await index.write(DAY, [("p1", 3), ("p2", 4)], descending=True, expire_at=None)
    assert await index.count(WEEK) == 1
    assert await index.count(DAY) == 2
    assert await index.rank(WEEK, "p1", descending=True) == Placed(0, 10, True)
    assert await index.rank(DAY, "p1", descending=True) == Placed(1, 3, True)


# -- order ----------------------------------------------------------------------------------


async def test_equal_scores_desc_reverse_byte_order(index: RankIndex) -> None:
    await index.write(WEEK, [(m, 100) for m in TRICKY], descending=True, expire_at=None)
    got = [m for m, _ in await full(index, WEEK, True)]
    assert got == [m for m, _ in in_board_order([(m, 100) for m in TRICKY], descending=True)]
    assert got[:3] == ["😀", "é", "z"]
    assert got.index("b") < got.index("a1") < got.index("a") < got.index("_x") < got.index("B")


async def test_equal_scores_asc_byte_order(index: RankIndex) -> None:
    await index.write(WEEK, [(m, 100) for m in TRICKY], descending=False, expire_at=None)
    got = [m for m, _ in await full(index, WEEK, False)]
    assert got == [m for m, _ in in_board_order([(m, 100) for m in TRICKY], descending=False)]
    assert got[:4] == ["0", "A", "B", "_x"]


async def test_order_mixes_scores_and_ties(index: RankIndex, descending: bool) -> None:
    entries = {m: (i % 3) * 10 for i, m in enumerate(TRICKY)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    assert await full(index, WEEK, descending) == board_order(entries, descending)


async def test_desc_and_asc_read_the_same_set_mirrored(index: RankIndex) -> None:
    entries = {m: (i % 4) for i, m in enumerate(TRICKY)}
    await index.write(WEEK, list(entries.items()), descending=True, expire_at=None)
    desc = await full(index, WEEK, True)
    asc = await full(index, WEEK, False)
    assert desc == asc[::-1]


# -- pages ----------------------------------------------------------------------------------


async def test_page_slices(index: RankIndex, descending: bool) -> None:
    entries = {f"p{i}": i * (1 if i % 2 else 2) for i in range(10)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    ordered = board_order(entries, descending)
    n = len(ordered)
    for start in range(n + 3):
        for stop in range(n + 3):
            expected = ordered[start : stop + 1] if start <= stop else []
            got = await index.page(WEEK, start, stop, descending=descending)
            assert got == expected, (start, stop)
    assert await index.page(WEEK, 0, 0, descending=descending) == ordered[:1]
    assert await index.page(WEEK, n - 1, n - 1, descending=descending) == ordered[-1:]
    assert await index.page(WEEK, n, n + 100, descending=descending) == []  # start past the end
    assert await index.page(WEEK, 3, 10**9, descending=descending) == ordered[3:]  # stop past it
    assert await index.page(WEEK, 5, 4, descending=descending) == []  # start > stop
    assert await index.page(WEEK, 0, -1, descending=descending) == []  # limit 0 at offset 0


async def test_page_of_an_empty_or_missing_board(index: RankIndex, descending: bool) -> None:
    assert await index.page(MISSING, 0, 99, descending=descending) == []
    assert await index.page(MISSING, 0, 0, descending=descending) == []
    assert await index.page(MISSING, 5, 2, descending=descending) == []
    await index.write(WEEK, [("p1", 1)], descending=descending, expire_at=None)
    await index.ban([WEEK], "p1")  # now empty
    assert await index.page(WEEK, 0, 99, descending=descending) == []


async def test_page_after_is_a_keyset_page_in_board_order(
    index: RankIndex, descending: bool
) -> None:
    # ties across members of every byte order, so a cursor inside a run of equal scores
    entries = {m: (i * 7) % 4 for i, m in enumerate(TRICKY)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    ordered = board_order(entries, descending)
    for n in (1, 2, 5, 100):
        assert await index.page_after(WEEK, None, n, descending=descending) == ordered[:n]
        for i, row in enumerate(ordered):
            got = await index.page_after(WEEK, row, n, descending=descending)
            assert got == ordered[i + 1 : i + 1 + n], (row, n)
    # a walk by the last row of each page lists the board once, in order
    walked: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    while page := await index.page_after(WEEK, cursor, 3, descending=descending):
        walked += page
        cursor = page[-1]
    assert walked == ordered
    assert await index.page_after(WEEK, None, 0, descending=descending) == []
    with pytest.raises(ValueError):
        await index.page_after(WEEK, None, -1, descending=descending)


async def test_page_after_a_cursor_that_moved_or_left(index: RankIndex, descending: bool) -> None:
    entries = {"a": 10, "b": 20, "c": 30, "d": 40}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    # "b" moved from 20 to 35 after the page that ended on it: the page goes on from where
    # (b, 20) stood, b itself left out wherever it is now
    await index.write(WEEK, [("b", 35)], descending=True, expire_at=None)
    if not descending:
        await index.ban([WEEK], "b")
        await index.unban([WEEK], "b")
        await index.write(WEEK, [("b", 35)], descending=False, expire_at=None)
    behind = {"desc": [("a", 10)], "asc": [("c", 30), ("d", 40)]}
    order = "desc" if descending else "asc"
    assert await index.page_after(WEEK, ("b", 20), 5, descending=descending) == behind[order]
    # a cursor whose member is gone, or was never there, places by its score and bytes
    await index.ban([WEEK], "b")
    assert await index.page_after(WEEK, ("b", 20), 5, descending=descending) == behind[order]
    # "c0" sorts after "c" by bytes: ahead of (c, 30) on desc, behind it on asc
    tie = {"desc": [("c", 30), ("a", 10)], "asc": [("d", 40)]}
    assert await index.page_after(WEEK, ("c0", 30), 5, descending=descending) == tie[order]
    assert await index.page_after(MISSING, ("a", 1), 5, descending=descending) == []
    assert await index.page_after(MISSING, None, 5, descending=descending) == []


# -- ranks ----------------------------------------------------------------------------------


async def test_rank_of_each_member(index: RankIndex, descending: bool) -> None:
    entries = {m: (i * 7) % 5 for i, m in enumerate(TRICKY)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    ordered = board_order(entries, descending)
    for i, (member, score) in enumerate(ordered):
        assert await index.rank(WEEK, member, descending=descending) == Placed(i, score, True)
    assert await index.rank(WEEK, "nobody", descending=descending) is None
    assert await index.rank(WEEK, "A ", descending=descending) is None  # near miss
    assert await index.rank(MISSING, "a", descending=descending) is None


async def test_ranks_agree_with_page(index: RankIndex, descending: bool) -> None:
    entries = {m: (i * 3) % 4 for i, m in enumerate(TRICKY)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    page = await full(index, WEEK, descending)
    asked = ["nobody", *reversed(TRICKY), "a", "ghost", "b"]  # absent, every member, repeats
    got = await index.ranks(WEEK, asked, descending=descending)
    assert len(got) == len(asked)
    for player, hit in zip(asked, got, strict=True):
        if player in entries:
            assert hit is not None, player
            assert hit.exact is True
            assert page[hit.rank] == (player, hit.score)
            assert await index.rank(WEEK, player, descending=descending) == hit
        else:
            assert hit is None, player


async def test_ranks_of_nobody_on_empty_and_missing_boards(
    index: RankIndex, descending: bool
) -> None:
    assert await index.ranks(MISSING, [], descending=descending) == []
    assert await index.ranks(MISSING, ["a", "b"], descending=descending) == [None, None]
    await index.write(WEEK, [("a", 1)], descending=descending, expire_at=None)
    assert await index.ranks(WEEK, [], descending=descending) == []
    await index.ban([WEEK], "a")
    assert await index.count(WEEK) == 0
    assert await index.ranks(WEEK, ["a", "b"], descending=descending) == [None, None]
    assert await index.rank(WEEK, "a", descending=descending) is None


# -- around: a rank with its neighbours ------------------------------------------------------


async def test_around_each_member(index: RankIndex, descending: bool) -> None:
    entries = {m: (i * 7) % 5 for i, m in enumerate(TRICKY)}  # ties, in byte order
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    ordered = board_order(entries, descending)
    for neighbors in (0, 1, 2, 5, len(TRICKY)):
        for i, (member, score) in enumerate(ordered):
            rows = ordered[max(0, i - neighbors) : i + neighbors + 1]
            expected = Around(i, score, rows, None, exact=True)
            got = await index.around(WEEK, member, neighbors, descending=descending)
            assert got == expected, (member, neighbors)


async def test_around_at_the_ends_of_the_board(index: RankIndex, descending: bool) -> None:
    entries = {f"p{i}": i for i in range(6)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    ordered = board_order(entries, descending)
    first, last = ordered[0][0], ordered[-1][0]
    assert await index.around(WEEK, first, 2, descending=descending) == Around(
        0, ordered[0][1], ordered[:3], None, exact=True
    )
    assert await index.around(WEEK, last, 2, descending=descending) == Around(
        5, ordered[-1][1], ordered[3:], None, exact=True
    )
    assert await index.around(WEEK, first, 100, descending=descending) == Around(
        0, ordered[0][1], ordered, None, exact=True
    )


async def test_around_agrees_with_rank_and_page(index: RankIndex, descending: bool) -> None:
    entries = {m: (i * 3) % 4 for i, m in enumerate(TRICKY)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    for member in TRICKY:
        found = await index.around(WEEK, member, 2, descending=descending)
        assert found is not None
        rank, score, rows = found.rank, found.score, found.rows
        assert await index.rank(WEEK, member, descending=descending) == Placed(rank, score, True)
        assert rows == await index.page(WEEK, max(0, rank - 2), rank + 2, descending=descending)
        assert rows[rank - max(0, rank - 2)] == (member, score)  # the player's own row


async def test_around_of_someone_absent(index: RankIndex, descending: bool) -> None:
    assert await index.around(MISSING, "a", 2, descending=descending) is None
    await index.write(WEEK, [("a", 1), ("b", 2)], descending=descending, expire_at=None)
    assert await index.around(WEEK, "nobody", 2, descending=descending) is None
    assert await index.around(WEEK, "A", 0, descending=descending) is None  # case matters
    await index.ban([WEEK], "a")
    assert await index.around(WEEK, "a", 2, descending=descending) is None
    await index.ban([WEEK], "b")  # now an empty board
    assert await index.around(WEEK, "b", 2, descending=descending) is None


# -- exactness -----------------------------------------------------------------------------


async def test_every_place_on_one_sorted_set_is_exact(index: RankIndex, descending: bool) -> None:
    """Both adapters hold a board in one sorted set, so every rank they give is exact
    (invariant 6 of docs/architecture.md: an estimate would say exact=False)."""
    entries = {m: (i * 7) % 5 for i, m in enumerate(TRICKY)}
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    for member in TRICKY:
        placed = await index.rank(WEEK, member, descending=descending)
        assert placed is not None and placed.exact is True
        around = await index.around(WEEK, member, 2, descending=descending)
        assert around is not None and around.exact is True
    hits = await index.ranks(WEEK, [*TRICKY, "nobody"], descending=descending)
    assert [h.exact if h else None for h in hits] == [True] * len(TRICKY) + [None]


async def test_count(index: RankIndex, descending: bool) -> None:
    assert await index.count(MISSING) == 0
    await index.write(WEEK, [("a", 1), ("b", 2), ("a", 3)], descending=descending, expire_at=None)
    assert await index.count(WEEK) == 2
    await index.write(WEEK, [("c", 2), ("b", 0)], descending=descending, expire_at=None)
    assert await index.count(WEEK) == 3
    await index.ban([WEEK], "b")
    assert await index.count(WEEK) == 2


# -- bans -----------------------------------------------------------------------------------


async def test_ban_removes_and_refuses_later_writes_on_those_keys_only(
    index: RankIndex, descending: bool
) -> None:
    third = BoardKey("season", "S1")
    for key in (WEEK, DAY, third):
        await index.write(key, [("cheat", 50), ("fair", 40)], descending=descending, expire_at=None)
    await index.ban([WEEK, DAY], "cheat")
    for key in (WEEK, DAY):
        assert await index.rank(key, "cheat", descending=descending) is None
        assert await index.count(key) == 1
        # a replayed or late change must not put them back
        assert (
            await index.write(
                key, [("cheat", 10**6), ("cheat", -(10**6))], descending=descending, expire_at=None
            )
            == 0
        )
        assert await index.rank(key, "cheat", descending=descending) is None
        # others on the same board are still written, in the same batch as the banned one
        better = 41 if descending else 39
        assert (
            await index.write(
                key,
                [("cheat", 99), ("fair", better), ("new", 1)],
                descending=descending,
                expire_at=None,
            )
            == 2
        )
        assert await index.rank(key, "fair", descending=descending) is not None
        assert [m for m, _ in await full(index, key, descending)] == (
            ["fair", "new"] if descending else ["new", "fair"]
        )
    # another key for the same player is untouched and still writable
    assert await index.rank(third, "cheat", descending=descending) == Placed(
        0 if descending else 1, 50, True
    )
    better = 60 if descending else 30
    assert await index.write(third, [("cheat", better)], descending=descending, expire_at=None) == 1
    assert await index.rank(third, "cheat", descending=descending) == Placed(0, better, True)


async def test_ban_on_a_missing_board_still_refuses_writes(
    index: RankIndex, descending: bool
) -> None:
    await index.ban([WEEK], "cheat")
    assert await index.count(WEEK) == 0
    assert await index.write(WEEK, [("cheat", 5)], descending=descending, expire_at=None) == 0
    assert await index.count(WEEK) == 0
    await index.ban([], "cheat")  # no keys: nothing to do


async def test_ban_is_idempotent_and_per_player(index: RankIndex, descending: bool) -> None:
    await index.write(WEEK, [("a", 1), ("b", 2), ("c", 3)], descending=descending, expire_at=None)
    await index.ban([WEEK], "b")
    await index.ban([WEEK], "b")
    await index.ban([WEEK], "nobody")
    assert dict(await full(index, WEEK, descending)) == {"a": 1, "c": 3}


async def test_unban_lets_writes_in_again(index: RankIndex, descending: bool) -> None:
    await index.write(WEEK, [("p", 10), ("q", 20)], descending=descending, expire_at=None)
    await index.write(DAY, [("p", 10)], descending=descending, expire_at=None)
    await index.ban([WEEK, DAY], "p")
    await index.unban([WEEK], "p")
    # unban restores nothing by itself: the store requeues the player's totals
    assert await index.rank(WEEK, "p", descending=descending) is None
    assert await index.write(WEEK, [("p", 10)], descending=descending, expire_at=None) == 1
    assert await index.rank(WEEK, "p", descending=descending) == Placed(
        1 if descending else 0, 10, True
    )
    # still banned where it was not lifted
    assert await index.write(DAY, [("p", 10)], descending=descending, expire_at=None) == 0
    assert await index.count(DAY) == 0
    await index.unban([DAY, MISSING], "p")  # unban where never banned, or no board: harmless
    assert await index.write(DAY, [("p", 11)], descending=descending, expire_at=None) == 1
    await index.unban([WEEK], "never-banned")
    assert await index.count(WEEK) == 2


# -- replace --------------------------------------------------------------------------------


async def test_replace_swaps_the_whole_board(index: RankIndex, descending: bool) -> None:
    await index.write(
        WEEK, [("old1", 100), ("old2", 5), ("kept", 1)], descending=descending, expire_at=None
    )
    fresh = {"kept": 50, "new1": 50, "new2": 7, "B": 50}
    await index.replace(WEEK, list(fresh.items()), expire_at=None)
    assert await full(index, WEEK, descending) == board_order(fresh, descending)
    assert await index.count(WEEK) == 4
    assert await index.rank(WEEK, "old1", descending=descending) is None
    # the rebuilt board is written with GT/LT semantics as before
    worse = 1 if descending else 99
    assert await index.write(WEEK, [("kept", worse)], descending=descending, expire_at=None) == 0
    assert await index.rank(WEEK, "kept", descending=descending) is not None
    assert dict(await full(index, WEEK, descending))["kept"] == 50


async def test_replace_with_duplicates_keeps_the_last(index: RankIndex, descending: bool) -> None:
    await index.replace(WEEK, [("a", 1), ("b", 2), ("a", 3)], expire_at=None)
    assert dict(await full(index, WEEK, descending)) == {"a": 3, "b": 2}


async def test_replace_keeps_banned_players_out(index: RankIndex, descending: bool) -> None:
    await index.write(WEEK, [("cheat", 9), ("fair", 8)], descending=descending, expire_at=None)
    await index.ban([WEEK], "cheat")
    await index.replace(WEEK, [("cheat", 99), ("fair", 8), ("other", 7)], expire_at=None)
    assert dict(await full(index, WEEK, descending)) == {"fair": 8, "other": 7}
    # the ban outlives the rebuild
    assert await index.write(WEEK, [("cheat", 100)], descending=descending, expire_at=None) == 0
    assert await index.rank(WEEK, "cheat", descending=descending) is None
    await index.unban([WEEK], "cheat")
    assert await index.write(WEEK, [("cheat", 100)], descending=descending, expire_at=None) == 1


async def test_empty_replace_leaves_an_empty_board(index: RankIndex, descending: bool) -> None:
    await index.write(WEEK, [("a", 1), ("b", 2)], descending=descending, expire_at=None)
    await index.replace(WEEK, [], expire_at=None)
    assert await index.count(WEEK) == 0
    assert await full(index, WEEK, descending) == []
    assert await index.ranks(WEEK, ["a", "b"], descending=descending) == [None, None]
    # only banned players in the new content is empty too
    await index.write(WEEK, [("a", 1)], descending=descending, expire_at=None)
    await index.ban([WEEK], "x")
    await index.replace(WEEK, [("x", 5)], expire_at=None)
    assert await index.count(WEEK) == 0
    # and an empty replace of a board that never existed
    await index.replace(MISSING, [], expire_at=None)
    assert await index.count(MISSING) == 0


async def test_replace_leaves_other_keys_alone(index: RankIndex, descending: bool) -> None:
    await index.write(DAY, [("a", 1)], descending=descending, expire_at=None)
    await index.replace(WEEK, [("b", 2)], expire_at=None)
    await index.replace(WEEK, [], expire_at=None)
    assert await full(index, DAY, descending) == [("a", 1)]


# -- big scores -----------------------------------------------------------------------------


async def test_scores_up_to_2_pow_53_round_trip_exactly(index: RankIndex, descending: bool) -> None:
    # neighbours that a float32 or a lossy decimal rendering would merge or reorder
    entries = {
        "max": MAX,
        "max-1": MAX - 1,
        "max-2": MAX - 2,
        "half": 2**52 + 1,
        "big": 123_456_789_012_345,
        "zero": 0,
        "neg": -MAX,
        "neg+1": -MAX + 1,
    }
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
    ordered = board_order(entries, descending)
    assert await full(index, WEEK, descending) == ordered
    for i, (member, score) in enumerate(ordered):
        assert await index.rank(WEEK, member, descending=descending) == Placed(i, score, True)
    got = await index.ranks(WEEK, list(entries), descending=descending)
    assert [hit.score if hit else None for hit in got] == list(entries.values())
    for hit in got:
        assert hit is not None and type(hit.rank) is int and type(hit.score) is int
    for i, (member, score) in enumerate(ordered):
        around = await index.around(WEEK, member, 1, descending=descending)
        assert around == Around(i, score, ordered[max(0, i - 1) : i + 2], None, exact=True)
        assert around is not None and type(around.rank) is int and type(around.score) is int
        assert all(type(s) is int for _, s in around.rows)
    assert all(type(s) is int for _, s in await full(index, WEEK, descending))
    # GT/LT compare these neighbours exactly
    step = 1 if descending else -1
    assert (
        await index.write(WEEK, [("max-2", MAX - 2 - step)], descending=descending, expire_at=None)
        == 0
    )
    assert (
        await index.write(WEEK, [("half", 2**52 + 1 + step)], descending=descending, expire_at=None)
        == 1
    )
    assert await index.rank(WEEK, "half", descending=descending) is not None
    assert dict(await full(index, WEEK, descending))["half"] == 2**52 + 1 + step
    await index.replace(DAY, [("max", MAX), ("max-1", MAX - 1)], expire_at=None)
    assert await full(index, DAY, descending) == board_order(
        {"max": MAX, "max-1": MAX - 1}, descending
    )


# -- expiry: memory (a controllable clock) ----------------------------------------------------


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_memory_key_disappears_after_expire_at() -> None:
    clock = FakeClock(1_000_000.0)
    index = MemoryIndex(clock=clock)
    await index.write(WEEK, [("a", 1), ("b", 2)], descending=True, expire_at=1_000_100)
    await index.write(DAY, [("a", 1)], descending=True, expire_at=None)
    await index.ban([WEEK], "cheat")
    clock.now = 1_000_099.0
    assert await index.count(WEEK) == 2
    assert await index.rank(WEEK, "a", descending=True) == Placed(1, 1, True)
    clock.now = 1_000_101.0
    assert await index.count(WEEK) == 0
    assert await index.page(WEEK, 0, 10, descending=True) == []
    assert await index.rank(WEEK, "a", descending=True) is None
    assert await index.ranks(WEEK, ["a", "b"], descending=True) == [None, None]
    assert await index.count(DAY) == 1  # no expiry: lives on
    # the ban went with the board, as the ban set's TTL takes it away on Redis
    assert await index.write(WEEK, [("cheat", 3)], descending=True, expire_at=1_000_200) == 1
    await index.close()


async def test_memory_write_without_expiry_keeps_the_earlier_one() -> None:
    clock = FakeClock(1_000_000.0)
    index = MemoryIndex(clock=clock)
    await index.write(WEEK, [("a", 1)], descending=True, expire_at=1_000_100)
    await index.write(WEEK, [("b", 2)], descending=True, expire_at=None)
    await index.write(
        WEEK, [], descending=True, expire_at=2_000_000
    )  # nothing written, as on Redis
    clock.now = 1_000_101.0
    assert await index.count(WEEK) == 0
    await index.close()


async def test_memory_replace_sets_the_expiry() -> None:
    clock = FakeClock(1_000_000.0)
    index = MemoryIndex(clock=clock)
    await index.write(WEEK, [("a", 1)], descending=True, expire_at=None)
    await index.replace(WEEK, [("b", 2)], expire_at=1_000_050)
    clock.now = 1_000_049.0
    assert await index.count(WEEK) == 1
    clock.now = 1_000_051.0
    assert await index.count(WEEK) == 0
    await index.replace(WEEK, [("c", 3)], expire_at=None)
    clock.now = 9_000_000.0
    assert await index.count(WEEK) == 1
    await index.close()


# -- expiry: Redis (the TTL itself) ------------------------------------------------------------


async def test_redis_write_sets_the_expiry(redis_pair: tuple[RedisIndex, Any]) -> None:
    index, raw = redis_pair
    board = index.keys.board(WEEK)
    at = int(time.time()) + 3600
    await index.write(WEEK, [("a", 1)], descending=True, expire_at=at)
    assert await raw.pexpiretime(board) == at * 1000
    assert 3500 < await raw.ttl(board) <= 3600
    # a write without an expiry leaves the one there
    await index.write(WEEK, [("b", 2)], descending=True, expire_at=None)
    assert await raw.pexpiretime(board) == at * 1000
    # a later write moves it
    await index.write(WEEK, [("a", 5)], descending=True, expire_at=at + 60)
    assert await raw.pexpiretime(board) == (at + 60) * 1000
    # no expiry at all: the key is persistent
    await index.write(DAY, [("a", 1)], descending=True, expire_at=None)
    assert await raw.ttl(index.keys.board(DAY)) == -1


async def test_redis_ban_set_gets_the_board_expiry(redis_pair: tuple[RedisIndex, Any]) -> None:
    index, raw = redis_pair
    at = int(time.time()) + 3600
    await index.write(WEEK, [("a", 1), ("cheat", 2)], descending=True, expire_at=at)
    await index.ban([WEEK], "cheat")
    bans = index.keys.bans(WEEK)
    assert await raw.sismember(bans, "cheat")
    assert await raw.pexpiretime(bans) == at * 1000
    # the ban set must never expire before its board (or a replay would re-add the player)
    await index.write(WEEK, [("a", 3)], descending=True, expire_at=at + 600)
    assert await raw.pexpiretime(index.keys.board(WEEK)) == (at + 600) * 1000
    assert await raw.pexpiretime(bans) >= (at + 600) * 1000


async def test_redis_ban_before_the_board_exists_gets_its_expiry_later(
    redis_pair: tuple[RedisIndex, Any],
) -> None:
    index, raw = redis_pair
    at = int(time.time()) + 3600
    await index.ban([WEEK], "cheat")  # no board yet: nothing to copy an expiry from
    bans = index.keys.bans(WEEK)
    assert await raw.ttl(bans) == -1
    await index.write(WEEK, [("cheat", 1), ("a", 2)], descending=True, expire_at=at)
    assert await raw.pexpiretime(index.keys.board(WEEK)) == at * 1000
    assert await raw.pexpiretime(bans) >= at * 1000  # and it does not live for ever


async def test_redis_replace_sets_the_expiry(redis_pair: tuple[RedisIndex, Any]) -> None:
    index, raw = redis_pair
    board = index.keys.board(WEEK)
    at = int(time.time()) + 3600
    await index.write(WEEK, [("a", 1)], descending=True, expire_at=at)
    await index.replace(WEEK, [("b", 2)], expire_at=at + 60)
    assert await raw.pexpiretime(board) == (at + 60) * 1000
    await index.replace(WEEK, [("c", 3)], expire_at=None)
    assert await raw.ttl(board) == -1
    # no staging set is left behind; beside the board, only the tallies of its writes and
    # their moves, which each replace marks (a board replaced whole, domain/recount.py)
    keys = [k async for k in raw.scan_iter(match=f"{index.keys.prefix}:*")]
    assert sorted(keys) == sorted([board, index.keys.changes(WEEK), index.keys.moves(WEEK)])
    assert await raw.ttl(index.keys.moves(WEEK)) == -1  # as the board's, after the last


async def test_redis_replace_gives_the_ban_set_the_new_expiry(
    redis_pair: tuple[RedisIndex, Any],
) -> None:
    index, raw = redis_pair
    bans = index.keys.bans(WEEK)
    at = int(time.time()) + 3600
    await index.write(WEEK, [("a", 1), ("cheat", 2)], descending=True, expire_at=at)
    await index.ban([WEEK], "cheat")
    await index.replace(WEEK, [("a", 1), ("cheat", 2)], expire_at=at + 600)
    assert await raw.pexpiretime(index.keys.board(WEEK)) == (at + 600) * 1000
    assert await raw.pexpiretime(bans) == (at + 600) * 1000
    await index.replace(WEEK, [("a", 1)], expire_at=None)  # a board that never expires
    assert await raw.ttl(index.keys.board(WEEK)) == -1
    assert await raw.ttl(bans) == -1
    assert await raw.sismember(bans, "cheat")


async def test_redis_expired_board_is_gone(redis_pair: tuple[RedisIndex, Any]) -> None:
    index, _ = redis_pair
    # an expiry in the past removes the key at once, as the memory index does on next read
    await index.write(WEEK, [("a", 1)], descending=True, expire_at=int(time.time()) - 10)
    assert await index.count(WEEK) == 0
    assert await index.rank(WEEK, "a", descending=True) is None


async def test_redis_reads_alike_over_resp2_and_resp3(redis_prefix: str, descending: bool) -> None:
    """redis-py speaks RESP3 by default, where a score comes back as a double; a client set to
    RESP2 gets decimal strings (as scripts always do). Every read must decode both exactly."""
    entries = {"max": MAX, "max-2": MAX - 2, "half": 2**52 + 1, "e15": 10**15, "neg": -MAX}
    entries |= {"a": 5, "b": 5}
    members = [*entries, "nobody"]
    resp3 = RedisIndex.from_url(REDIS_URL, prefix=redis_prefix)
    resp2 = RedisIndex(
        aioredis.Redis.from_url(REDIS_URL, decode_responses=True, protocol=2), redis_prefix
    )
    try:
        await resp3.write(WEEK, list(entries.items()), descending=descending, expire_at=None)
        ordered = board_order(entries, descending)
        for index in (resp3, resp2):
            assert await full(index, WEEK, descending) == ordered
            assert await index.page(WEEK, 2, 4, descending=descending) == ordered[2:5]
            position = {m: Placed(i, s, True) for i, (m, s) in enumerate(ordered)}
            assert await index.ranks(WEEK, members, descending=descending) == [
                position.get(m) for m in members
            ]
            assert await index.around(WEEK, "half", 1, descending=descending) == Around(
                position["half"].rank,
                2**52 + 1,
                ordered[position["half"].rank - 1 : position["half"].rank + 2],
                None,
                exact=True,
            )
            assert await index.count_between(WEEK, [-MAX, 0, 6, MAX]) == [1, 2, 3]
    finally:
        await resp2.close()
        await resp3.close()


async def test_redis_ban_during_a_rebuild_holds(redis_pair: tuple[RedisIndex, Any]) -> None:
    """A ban that lands while a rebuild is filling its staging set must hold on the board
    the rebuild swaps in."""
    index, raw = redis_pair
    entries = [(f"p{i:04d}", i) for i in range(2500)]  # several staging chunks
    await index.write(WEEK, entries, descending=True, expire_at=None)
    real_pipeline = index._r.pipeline
    calls = 0

    def pipeline_then_ban(*args: Any, **kwargs: Any) -> Any:
        pipe = real_pipeline(*args, **kwargs)
        real_execute = pipe.execute

        async def execute() -> Any:
            nonlocal calls
            calls += 1
            out = await real_execute()
            if calls == 1:  # after the first staging chunk
                await index.ban([WEEK], "p2499")
            return out

        pipe.execute = execute
        return pipe

    index._r.pipeline = pipeline_then_ban
    try:
        await index.replace(WEEK, entries, expire_at=None)
    finally:
        index._r.pipeline = real_pipeline
    assert calls >= 3
    assert await index.rank(WEEK, "p2499", descending=True) is None
    assert await index.count(WEEK) == 2499
    assert [k async for k in raw.scan_iter(match=f"{index.keys.prefix}:*stage*")] == []


# -- Redis errors: one table (index/redis/errors.py) ---------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        rx.ConnectionError("Connection refused"),
        rx.TimeoutError("Timeout reading from socket"),
        rx.BusyLoadingError("Redis is loading the dataset in memory"),
        rx.MaxConnectionsError("Too many connections"),
        rx.AuthenticationError("invalid username-password pair"),
        rx.ReadOnlyError("You can't write against a read only replica."),
        rx.TryAgainError("Multiple keys request during rehashing of slot"),
        rx.ClusterDownError("The cluster is down"),
        rx.MasterDownError("Link with MASTER is down"),
        rx.ClusterError("TTL exhausted."),
        rx.MovedError("3999 127.0.0.1:6381"),
        rx.AskError("3999 127.0.0.1:6381"),
        rx.SlotNotCoveredError("Slot 3999 not covered"),
        rx.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        rx.ResponseError("BUSY Redis is busy running a script."),
        rx.ResponseError("MISCONF Redis is configured to save RDB snapshots"),
        rx.RedisClusterException(
            "Redis Cluster cannot be connected. Please provide at least one reachable node: x"
        ),
        rx.RedisClusterException("All slots are not covered after query all startup_nodes."),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError(),
        OSError(113, "No route to host"),
        MasterNotFoundError("No master found for 'podium'"),
        SlaveNotFoundError("No slave found for 'podium'"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_redis_transient_errors_are_unavailable(error: BaseException) -> None:
    assert isinstance(translate(error), IndexUnavailable)


def test_a_sentinel_that_names_no_primary_is_an_outage_that_says_sentinel() -> None:
    found = translate(MasterNotFoundError("No master found for 'podium'"))
    assert isinstance(found, IndexUnavailable)
    assert str(found) == "redis sentinel: No master found for 'podium'"


@pytest.mark.parametrize(
    "error",
    [
        rx.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        rx.ResponseError("ERR user_script:3: Script attempted to access nonexistent global"),
        rx.ResponseError("wrong number of arguments for 'zadd' command"),
        rx.NoScriptError("No matching script. Please use EVAL."),
        rx.DataError("Invalid input of type: 'NoneType'"),
        rx.InvalidResponse("Protocol Error: b'x'"),
        rx.NoPermissionError("this user has no permissions to run the 'eval' command"),
        rx.ClusterCrossSlotError(),
        rx.CrossSlotTransactionError("keys in different slots"),
        rx.RedisClusterException("EVALSHA - all keys must map to the same key slot"),
        rx.RedisClusterException("No way to dispatch this command to Redis Cluster."),
        rx.ExecAbortError("Transaction discarded because of previous errors."),
        rx.RedisError("something redis-py adds one day"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_redis_programming_errors_are_internal(error: BaseException) -> None:
    found = translate(error)
    assert isinstance(found, InternalError) and not isinstance(found, Unavailable)
    assert found.status == 500


def test_translated_raises_from_the_driver_error_and_lets_others_through() -> None:
    wrong = rx.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    with pytest.raises(InternalError) as caught, translated:
        raise wrong
    assert caught.value.__cause__ is wrong and wrong.__traceback__ is not None
    down = rx.ConnectionError("Connection refused")
    with pytest.raises(IndexUnavailable) as unavailable, translated:
        raise down
    assert unavailable.value.__cause__ is down
    with pytest.raises(KeyError), translated:  # not a driver's error: not translated
        raise KeyError("ours")


async def test_a_connection_closed_under_a_call_is_an_outage_not_a_bug() -> None:
    """redis-py raises a plain AttributeError when another task closed a connection between
    its connect and its first write (a cluster client relearning its slots after a
    failover): an outage, a 503 to retry. The same error raised by our own code is a bug and
    passes untouched."""
    from redis.asyncio.connection import Connection

    closed = Connection(host="127.0.0.1", port=1)  # never connected: no writer
    with pytest.raises(IndexUnavailable) as unavailable, translated:
        await closed._send_packed_command([b"PING\r\n"])
    assert isinstance(unavailable.value.__cause__, AttributeError)
    assert "closed under the call" in str(unavailable.value)
    writer: Any = None
    with pytest.raises(AttributeError), translated:  # ours, not the driver's: not translated
        writer.writelines([b"PING\r\n"])


def test_a_slot_missing_from_the_cluster_clients_map_is_an_outage_not_a_bug() -> None:
    """The cluster client looks a slot up in its map, which a failover has it learn again:
    a slot not in it raises a plain KeyError inside redis-py, an outage to retry. A KeyError
    of our own passes untouched (above)."""
    from redis.asyncio.cluster import NodesManager

    relearning = NodesManager([], require_full_coverage=False, connection_kwargs={})
    with pytest.raises(IndexUnavailable) as unavailable, translated:
        relearning.get_node_from_slot(5461)
    assert isinstance(unavailable.value.__cause__, KeyError)


async def test_redis_bug_is_internal_not_unavailable(
    redis_pair: tuple[RedisIndex, Any],
) -> None:
    """A programming error (here a board's key holding a string, or bounds that are not
    numbers) is a 500 to be fixed, never an outage to wait out."""
    index, raw = redis_pair
    await index.write(DAY, [("a", 1)], descending=True, expire_at=None)
    await raw.set(index.keys.board(WEEK), "not a sorted set")
    calls = [
        index.page(WEEK, 0, 9, descending=True),
        index.rank(WEEK, "a", descending=True),
        index.ranks(WEEK, ["a", "b"], descending=False),
        index.around(WEEK, "a", 2, descending=True),
        index.count(WEEK),
        index.count_between(WEEK, [0, 10]),
        index.write(WEEK, [("a", 5)], descending=True, expire_at=None),
        index.ban([WEEK], "a"),
        index.count_between(DAY, ["low", "high"]),  # type: ignore[list-item]
    ]
    for call in calls:
        with pytest.raises(InternalError) as caught:
            await call
        assert not isinstance(caught.value, Unavailable)
        assert isinstance(caught.value.__cause__, rx.ResponseError)
    assert await index.count(DAY) == 1  # the rest of the index still answers


async def test_redis_unreachable_is_unavailable() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    index = RedisIndex.from_url(f"redis://127.0.0.1:{port}/0", prefix="podium-test-nowhere")
    try:
        for call in (
            index.ping(),
            index.page(WEEK, 0, 9, descending=True),
            index.around(WEEK, "a", 2, descending=True),
            index.write(WEEK, [("a", 1)], descending=True, expire_at=None),
        ):
            with pytest.raises(IndexUnavailable) as caught:
                await call
            assert caught.value.retry_after >= 1 and caught.value.__cause__ is not None
    finally:
        await index.close()


async def test_redis_connection_cut_is_unavailable(redis_prefix: str) -> None:
    """A Redis that goes away under an open connection (a crash, a failover)."""
    target = urlparse(REDIS_URL)
    proxy = Proxy(target.hostname or "127.0.0.1", target.port or 6379)
    await proxy.start()
    index = RedisIndex.from_url(f"redis://127.0.0.1:{proxy.port}/0", prefix=redis_prefix)
    try:
        await index.write(WEEK, [("a", 1)], descending=True, expire_at=None)
        assert await index.around(WEEK, "a", 1, descending=True) is not None
        await proxy.cut()
        for call in (index.around(WEEK, "a", 1, descending=True), index.count(WEEK)):
            with pytest.raises(IndexUnavailable):
                await call
    finally:
        await index.close()
        await proxy.cut()


async def test_count_between_is_a_half_open_histogram(index: RankIndex) -> None:
    await index.write(
        WEEK, [("a", 1), ("b", 5), ("c", 5), ("d", 9), ("e", 10)], descending=True, expire_at=None
    )
    assert await index.count_between(WEEK, [0, 5, 10, 11]) == [1, 3, 1]
    assert await index.count_between(WEEK, [5, 6]) == [2]
    assert await index.count_between(WEEK, [100, 200]) == [0]
    assert await index.count_between(DAY, [0, 10, 20]) == [0, 0]  # a missing board
    assert await index.count_between(WEEK, [0]) == []


# -- versioned writes (boards whose totals can fall) ---------------------------------------


async def test_versioned_write_follows_versions_not_scores(
    index: RankIndex, descending: bool
) -> None:
    async def write(member: str, score: int, version: int) -> int:
        return await index.write(
            WEEK, [(member, score)], descending=descending, expire_at=None, versions=[version]
        )

    assert await write("a", 100, 1) == 1
    assert await write("a", 40, 3) == 1  # a real fall lands
    assert await write("a", 500, 2) == 0  # an older change, replayed late, does not
    assert await write("a", 40, 3) == 0  # a repeat changes nothing
    assert await index.rank(WEEK, "a", descending=descending) == Placed(0, 40, True)
    # several changes of one player in one batch: the newest wins, whatever the order
    await index.write(
        WEEK,
        [("b", 9), ("b", 7), ("b", 8)],
        descending=descending,
        expire_at=None,
        versions=[5, 7, 6],
    )
    b = await index.rank(WEEK, "b", descending=descending)
    assert b is not None and b.score == 7


async def test_versioned_ban_and_unban(index: RankIndex, descending: bool) -> None:
    await index.write(WEEK, [("a", 10)], descending=descending, expire_at=None, versions=[4])
    await index.ban([WEEK], "a")
    assert (
        await index.write(WEEK, [("a", 11)], descending=descending, expire_at=None, versions=[5])
        == 0
    )
    await index.unban([WEEK], "a")
    # after an unban the store resends the current total with the version already seen
    assert (
        await index.write(WEEK, [("a", 11)], descending=descending, expire_at=None, versions=[5])
        == 1
    )
    assert await index.rank(WEEK, "a", descending=descending) == Placed(0, 11, True)


async def test_versioned_replace_keeps_versions(index: RankIndex, descending: bool) -> None:
    await index.replace(WEEK, [("a", 10), ("b", 20)], expire_at=None, versions=[3, 8])
    assert (
        await index.write(WEEK, [("a", 99)], descending=descending, expire_at=None, versions=[2])
        == 0
    )
    assert (
        await index.write(WEEK, [("b", 1)], descending=descending, expire_at=None, versions=[9])
        == 1
    )
    page = await index.page(WEEK, 0, 10, descending=True)
    assert page == [("a", 10), ("b", 1)]


async def test_a_recount_lowers_a_gt_board_and_older_changes_stay_under_it(
    index: RankIndex, descending: bool
) -> None:
    """A rejected result's recount is written by its version on a board written by order
    (``GT``/``LT``): the total moves against the order, and the version stays as a floor, so
    an older change delivered again cannot bring the total back; newer ones land by order."""

    async def w(member: str, score: int, version: int, by_version: bool = False) -> int:
        return await index.write(
            WEEK,
            [(member, score)],
            descending=descending,
            expire_at=None,
            versions=[version] if by_version else None,
            metadata=[(version, None)],
        )

    best, worse, better = (100, 40, 150) if descending else (40, 100, 20)
    assert await w("a", best, 3) == 1
    await w("b", 70, 1)
    assert await w("a", worse, 4, by_version=True) == 1  # the recount lands, against the order
    assert await w("a", best, 3) == 0  # the old change again: under the floor
    assert await w("a", worse, 4, by_version=True) == 0  # the recount again: nothing
    assert (await index.rank(WEEK, "a", descending=descending)) == Placed(1, worse, True)
    assert await w("a", better, 5) == 1  # a newer result counts by the order again
    assert (await index.rank(WEEK, "a", descending=descending)) == Placed(0, better, True)
    assert await w("b", better + (1 if descending else -1), 2) == 1  # no floor: as before


# -- entry metadata ---------------------------------------------------------------------------
# The index keeps each entry's metadata (the result that set the score) in the same step as
# the score: where the member's score is the written entry's (written, or held already),
# unless a newer version's metadata is held. So a change applied twice, late or out of order
# never brings back an older entry's metadata.

CAR = '{"car":"mx5"}'
KART = '{"car":"kart"}'


async def meta(index: RankIndex, key: BoardKey, *members: str) -> dict[str, str]:
    return await index.entry_metadata(key, list(members))


async def test_metadata_follows_the_score_a_gt_write_keeps(index: RankIndex) -> None:
    w = index.write
    await w(WEEK, [("p1", 10), ("p2", 7)], descending=True, expire_at=None,
            metadata=[(1, CAR), (1, None)])  # fmt: skip
    assert await meta(index, WEEK, "p1", "p2", "nobody") == {"p1": CAR}
    # a lower score (an older change, delivered late) leaves the score and its metadata
    await w(WEEK, [("p1", 5)], descending=True, expire_at=None, metadata=[(0, KART)])
    assert await meta(index, WEEK, "p1") == {"p1": CAR}
    # a higher one brings its own
    await w(WEEK, [("p1", 12)], descending=True, expire_at=None, metadata=[(2, KART)])
    assert await meta(index, WEEK, "p1") == {"p1": KART}
    # the same score again (a retry, or a change that moved no score): the newer version's
    await w(WEEK, [("p1", 12)], descending=True, expire_at=None, metadata=[(1, CAR)])
    assert await meta(index, WEEK, "p1") == {"p1": KART}
    await w(WEEK, [("p1", 12)], descending=True, expire_at=None, metadata=[(3, CAR)])
    assert await meta(index, WEEK, "p1") == {"p1": CAR}
    # a newer change without metadata clears it, and an older one cannot bring it back
    await w(WEEK, [("p1", 20)], descending=True, expire_at=None, metadata=[(4, None)])
    assert await meta(index, WEEK, "p1") == {}
    await w(WEEK, [("p1", 12)], descending=True, expire_at=None, metadata=[(3, CAR)])
    assert await meta(index, WEEK, "p1") == {}
    # on an equal score too: the version of the change without metadata is kept
    await w(WEEK, [("p1", 20)], descending=True, expire_at=None, metadata=[(5, KART)])
    assert await meta(index, WEEK, "p1") == {"p1": KART}
    await w(WEEK, [("p1", 20)], descending=True, expire_at=None, metadata=[(6, None)])
    assert await meta(index, WEEK, "p1") == {}
    await w(WEEK, [("p1", 20)], descending=True, expire_at=None, metadata=[(5, KART)])
    assert await meta(index, WEEK, "p1") == {}
    # a batch with no metadata in it clears what the board held
    await w(WEEK, [("p1", 25)], descending=True, expire_at=None, metadata=[(7, CAR)])
    await w(WEEK, [("p1", 30), ("p2", 9)], descending=True, expire_at=None,
            metadata=[(8, None), (2, None)])  # fmt: skip
    assert await meta(index, WEEK, "p1", "p2") == {}
    # the scores moved exactly as without metadata
    assert await full(index, WEEK, True) == [("p1", 30), ("p2", 9)]


async def test_metadata_on_an_ascending_board(index: RankIndex) -> None:
    await index.write(WEEK, [("p1", 10)], descending=False, expire_at=None, metadata=[(1, CAR)])
    await index.write(WEEK, [("p1", 15)], descending=False, expire_at=None, metadata=[(2, KART)])
    assert await meta(index, WEEK, "p1") == {"p1": CAR}  # 15 is worse here: not written
    await index.write(WEEK, [("p1", 3)], descending=False, expire_at=None, metadata=[(3, KART)])
    assert await meta(index, WEEK, "p1") == {"p1": KART}


async def test_metadata_on_a_versioned_board(index: RankIndex, descending: bool) -> None:
    def write(score: int, version: int, text: str | None) -> Any:
        return index.write(
            WEEK, [("a", score)], descending=descending, expire_at=None,
            versions=[version], metadata=[(version, text)],
        )  # fmt: skip

    await write(10, 2, CAR)
    assert await meta(index, WEEK, "a") == {"a": CAR}
    await write(50, 1, KART)  # older: neither its score nor its metadata
    assert await meta(index, WEEK, "a") == {"a": CAR}
    assert await index.rank(WEEK, "a", descending=descending) == Placed(0, 10, True)
    await write(4, 3, KART)  # newer, lower: a fall, with its metadata
    assert await meta(index, WEEK, "a") == {"a": KART}
    await write(4, 4, None)
    assert await meta(index, WEEK, "a") == {}
    await write(9, 5, CAR)
    # a removal (a move to another group) takes the metadata with the member
    assert await index.remove(WEEK, ["a"], [6], expire_at=None) == 1
    assert await meta(index, WEEK, "a") == {}
    await write(9, 5, CAR)  # the older write on its way: refused, metadata and all
    assert await meta(index, WEEK, "a") == {}


async def test_a_write_without_metadata_leaves_it(index: RankIndex) -> None:
    """A caller that gives no metadata (a process from before it) changes none."""
    await index.write(WEEK, [("p1", 10)], descending=True, expire_at=None, metadata=[(1, CAR)])
    await index.write(WEEK, [("p1", 11)], descending=True, expire_at=None)
    assert await meta(index, WEEK, "p1") == {"p1": CAR}


async def test_metadata_is_per_board_window(index: RankIndex) -> None:
    await index.write(WEEK, [("p1", 10)], descending=True, expire_at=None, metadata=[(1, CAR)])
    await index.write(DAY, [("p1", 10)], descending=True, expire_at=None, metadata=[(1, KART)])
    assert await meta(index, WEEK, "p1") == {"p1": CAR}
    assert await meta(index, DAY, "p1") == {"p1": KART}
    assert await meta(index, MISSING, "p1") == {}
    assert await index.entry_metadata(WEEK, []) == {}


async def test_around_brings_the_rows_metadata(index: RankIndex) -> None:
    rows = [(f"p{i}", 100 - i) for i in range(6)]
    texts = [CAR if i % 2 else None for i in range(6)]
    await index.write(WEEK, rows, descending=True, expire_at=None,
                      metadata=[(1, t) for t in texts])  # fmt: skip
    found = await index.around(WEEK, "p3", 1, descending=True)
    assert found is not None
    # read in the same step where the index can (None: the reads ask for it separately)
    if found.metadata is not None:
        assert found.metadata == {"p3": CAR}
    assert await meta(index, WEEK, *(m for m, _ in found.rows)) == {"p3": CAR}


async def test_a_ban_drops_the_metadata_and_a_rebuild_restores_it(index: RankIndex) -> None:
    await index.write(WEEK, [("p1", 10), ("p2", 8)], descending=True, expire_at=None,
                      metadata=[(1, CAR), (1, KART)])  # fmt: skip
    await index.ban([WEEK], "p1")
    assert await meta(index, WEEK, "p1", "p2") == {"p2": KART}
    await index.write(WEEK, [("p1", 12)], descending=True, expire_at=None, metadata=[(2, CAR)])
    assert await meta(index, WEEK, "p1") == {}  # refused while banned, metadata too
    await index.unban([WEEK], "p1")
    # a rebuild: exactly the entries given, and their metadata (p2's is gone with it)
    await index.replace(WEEK, [("p1", 10), ("p2", 8), ("p3", 1)], expire_at=None,
                        metadata=[(1, KART), (1, None), (3, CAR)])  # fmt: skip
    assert await meta(index, WEEK, "p1", "p2", "p3") == {"p1": KART, "p3": CAR}
    # the versions it restored order the next writes
    await index.write(WEEK, [("p3", 1)], descending=True, expire_at=None, metadata=[(2, KART)])
    assert await meta(index, WEEK, "p3") == {"p3": CAR}
    await index.replace(WEEK, [], expire_at=None, metadata=[])
    assert await meta(index, WEEK, "p1", "p3") == {}


# -- what podium status reads ----------------------------------------------------------------


async def test_nodes_name_each_shard_and_its_replication(index: RankIndex) -> None:
    nodes = await index.nodes()
    # one node a shard: a split index numbers them in order; a lone shard says its own
    # number, and a whole board on one sorted set has none
    shards = getattr(index, "shard_count", None)
    lone = getattr(index, "shard", None)
    assert [n.shard for n in nodes] == (list(range(shards)) if shards else [lone])
    assert all(n.up and n.why is None for n in nodes), nodes
    # Redis's own role and offset, or none at all where there is no Redis (in process)
    assert all(n.role in ("master", None) for n in nodes), nodes
    assert all((n.role is None) == (n.offset is None) for n in nodes), nodes
    assert all(":" in n.node or n.node == "in process" for n in nodes), nodes
