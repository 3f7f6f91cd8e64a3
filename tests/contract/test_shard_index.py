"""The reads a merge of shards needs (``ShardIndex``: ``scores``, ``ahead``, ``near``,
``scores_at``), one body per behaviour, on every adapter: memory, one Redis, a shard on
Redis and a shard on Redis Cluster (``tests/contract/conftest.py``).

Each answer is held against a plain Python reference built on the one board order
(``domain.boards.in_board_order``): the probe (member, score) is put among the board's
rows, its own row (if any) taken out first, and what stands around it is read off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import podium.index.redis.index as redis_index
from podium.domain.boards import in_board_order
from podium.index.redis.generations import RedisGenerations
from podium.ports import BoardKey, Near, ShardIndex
from tests.contract.conftest import SINGLE_INDEXES, Backend, backend_of

WEEK = BoardKey("week", "2026-W44")
MISSING = BoardKey("week", "1999-W01")
# "B" (0x42) < "_x" (0x5f) < "a" (0x61) < "a1" < "b"; "z" < "é" (0xc3 0xa9) < "😀" (0xf0 ...)
TRICKY = ["a", "B", "b", "a1", "_x", "A", "aa", "z", "é", "😀", "0", "a0"]
# Not on the board, each sorting between, before or after the members above.
ABSENT = ["", "a ", "ab", "é1", "zz", "😀😀", "A0", "Z", "~", "\x00", "a00"]
MAX = 2**53 - 1


@pytest.fixture(params=SINGLE_INDEXES)
def backend(request: pytest.FixtureRequest) -> Backend:
    return backend_of(request, request.param)


@pytest.fixture
async def index(backend: Backend) -> AsyncIterator[ShardIndex]:
    idx: Any = backend.index()
    try:
        yield idx
    finally:
        await idx.close()


def placed(entries: dict[str, int], member: str, score: int, descending: bool) -> Any:
    """The reference: the board's rows with the probe among them (its own row left out),
    and the probe's index in them."""
    rows = in_board_order(
        [*((m, s) for m, s in entries.items() if m != member), (member, score)], descending
    )
    return rows, rows.index((member, score))


def ref_ahead(entries: dict[str, int], member: str, score: int, descending: bool) -> int:
    return int(placed(entries, member, score, descending)[1])


def ref_near(entries: dict[str, int], member: str, score: int, n: int, descending: bool) -> Near:
    rows, i = placed(entries, member, score, descending)
    return Near(i, rows[max(0, i - n) : i], rows[i + 1 : i + 1 + n])


def probes_for(entries: dict[str, int]) -> list[tuple[str, int]]:
    """Every member at its own score, at every other score of the board and just beside
    them; every absent member likewise."""
    scores = sorted(set(entries.values()))
    around = sorted({s + d for s in scores for d in (-1, 0, 1)} | {-MAX, MAX})
    return [(m, s) for m in [*entries, *ABSENT] for s in around]


async def fill(index: ShardIndex, entries: dict[str, int], descending: bool) -> None:
    await index.write(WEEK, list(entries.items()), descending=descending, expire_at=None)


# -- scores ---------------------------------------------------------------------------------


async def test_scores_of_members_absent_and_repeated(index: ShardIndex, descending: bool) -> None:
    entries = {m: (i - 5) * 1000 for i, m in enumerate(TRICKY)} | {"max": MAX, "neg": -MAX}
    await fill(index, entries, descending)
    asked = [*reversed(entries), *ABSENT, "a", "max"]
    got = await index.scores(WEEK, asked)
    assert got == [entries.get(m) for m in asked]
    assert all(type(s) is int for s in got if s is not None)
    assert await index.scores(WEEK, []) == []
    assert await index.scores(MISSING, ["a", "b"]) == [None, None]
    await index.ban([WEEK], "a")
    assert await index.scores(WEEK, ["a", "b"]) == [None, entries["b"]]


async def test_marked_score_is_the_score_with_the_shard_s_marker(
    index: ShardIndex, descending: bool
) -> None:
    """The score as ``scores`` reads it, with the shard's generation marker read in the same
    step: the token the markers hold, None once it is gone; the in-process index keeps no
    markers and says so."""
    entries = {m: (i - 5) * 1000 for i, m in enumerate(TRICKY)} | {"max": MAX}
    await fill(index, entries, descending)
    raw: Any = getattr(index, "keys", None)
    marks = None
    if raw is not None:  # a Redis shard: its markers, as the mender writes them
        marks = RedisGenerations(index.client, [(0, raw)])
        await marks.mark([0], "t1", 0.0)
    for member in [*entries, *ABSENT[:3]]:
        got = await index.marked_score(WEEK, member)
        assert got.score == entries.get(member)
        assert got.marked is (marks is not None)
        assert got.token == ("t1" if marks is not None else None)
    assert (await index.marked_score(MISSING, "a")).score is None
    if marks is not None:  # the marker gone: the read says so, beside the score
        await index.client.delete(raw.generation())
        got = await index.marked_score(WEEK, "a")
        assert (got.score, got.token, got.marked) == (entries["a"], None, True)


# -- ahead ----------------------------------------------------------------------------------


async def test_ahead_matches_the_reference(index: ShardIndex, descending: bool) -> None:
    entries = {m: (i % 3) * 10 for i, m in enumerate(TRICKY)}  # runs of ties
    await fill(index, entries, descending)
    probes = probes_for(entries)
    got = await index.ahead(WEEK, probes, descending=descending)
    assert got == [ref_ahead(entries, m, s, descending) for m, s in probes]
    assert all(type(n) is int for n in got)


async def test_ahead_of_a_member_at_its_own_place_is_its_rank(
    index: ShardIndex, descending: bool
) -> None:
    entries = {m: (i * 7) % 5 for i, m in enumerate(TRICKY)}
    await fill(index, entries, descending)
    got = await index.ahead(WEEK, list(entries.items()), descending=descending)
    ranks = await index.ranks(WEEK, list(entries), descending=descending)
    assert got == [r.rank if r else None for r in ranks]


async def test_ahead_leaves_the_member_s_own_row_out(index: ShardIndex, descending: bool) -> None:
    """A member whose row moved since its score was read is the one being placed: never
    counted ahead of itself."""
    await fill(index, {"p": 50, "q": 40, "r": 30}, descending)
    # p is on the board at 50; placed at 35 it has q ahead on desc (and r on asc), not itself
    assert await index.ahead(WEEK, [("p", 35)], descending=descending) == [1]
    assert await index.ahead(WEEK, [("p", 60), ("p", 20)], descending=descending) == (
        [0, 2] if descending else [2, 0]
    )


async def test_ahead_on_a_long_run_of_ties(index: ShardIndex, descending: bool) -> None:
    """A board with shared ranks may hold long runs of one score: the count within the run
    must still follow member bytes (the scripts search such a run by halves)."""
    entries = {f"p{i:03d}": 7 for i in range(0, 240, 2)} | {"top": 9, "low": 3, "é": 7}
    await fill(index, entries, descending)
    probes = [(f"p{i:03d}", 7) for i in range(242)]  # members and those between them
    probes += [(m, s) for m in ("", "p", "p0", "p2399", "q", "é", "😀", "top") for s in (6, 7, 8)]
    got = await index.ahead(WEEK, probes, descending=descending)
    assert got == [ref_ahead(entries, m, s, descending) for m, s in probes]


async def test_ahead_of_nothing_and_on_a_missing_board(index: ShardIndex, descending: bool) -> None:
    assert await index.ahead(MISSING, [("a", 5), ("", 0)], descending=descending) == [0, 0]
    await fill(index, {"a": 1}, descending)
    assert await index.ahead(WEEK, [], descending=descending) == []
    await index.ban([WEEK], "a")  # now empty
    assert await index.ahead(WEEK, [("a", 1), ("b", 0)], descending=descending) == [0, 0]


async def test_ahead_of_many_probes_in_several_calls(
    index: ShardIndex, descending: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_index, "PROBES", 7)  # several script calls on Redis
    entries = {f"m{i}": i % 4 for i in range(30)}
    await fill(index, entries, descending)
    probes = [(f"m{i}", i % 5) for i in range(45)]
    got = await index.ahead(WEEK, probes, descending=descending)
    assert got == [ref_ahead(entries, m, s, descending) for m, s in probes]


async def test_ahead_with_scores_up_to_2_pow_53(index: ShardIndex, descending: bool) -> None:
    entries = {"max": MAX, "max-1": MAX - 1, "max-2": MAX - 2, "neg": -MAX, "neg+1": -MAX + 1}
    await fill(index, entries, descending)
    probes = [("x", s) for s in (MAX, MAX - 1, MAX - 2, MAX - 3, -MAX, -MAX + 1, 0)]
    probes += [("max", MAX - 1), ("max-1", MAX), ("neg", -MAX + 1)]
    got = await index.ahead(WEEK, probes, descending=descending)
    assert got == [ref_ahead(entries, m, s, descending) for m, s in probes]


# -- near -----------------------------------------------------------------------------------


async def test_near_matches_the_reference(index: ShardIndex, descending: bool) -> None:
    entries = {m: (i % 4) * 10 for i, m in enumerate(TRICKY)}
    await fill(index, entries, descending)
    probes = probes_for(entries)[::3]  # a third of them, every kind still among them
    for n in (0, 1, 2, 5, len(TRICKY) + 1):
        for member, score in probes:
            got = await index.near(WEEK, member, score, n, descending=descending)
            assert got == ref_near(entries, member, score, n, descending), (member, score, n)


async def test_near_of_a_member_that_moved_leaves_its_row_out(
    index: ShardIndex, descending: bool
) -> None:
    entries = {f"p{i}": i * 10 for i in range(8)}
    await fill(index, entries, descending)
    for member, score in [("p3", 55), ("p3", 5), ("p0", 75), ("p7", -1), ("p4", 40)]:
        for n in (1, 2, 3):
            got = await index.near(WEEK, member, score, n, descending=descending)
            assert got == ref_near(entries, member, score, n, descending), (member, score, n)
            assert member not in [m for m, _ in got.above + got.below]


async def test_near_at_the_ends_and_on_a_missing_board(index: ShardIndex, descending: bool) -> None:
    assert await index.near(MISSING, "a", 5, 3, descending=descending) == Near(0, [], [])
    entries = {"a": 1, "b": 2, "c": 3}
    await fill(index, entries, descending)
    top, bottom = (10, 0) if descending else (0, 10)
    ordered = in_board_order(entries.items(), descending)
    assert await index.near(WEEK, "x", top, 2, descending=descending) == Near(0, [], ordered[:2])
    assert await index.near(WEEK, "x", bottom, 2, descending=descending) == Near(3, ordered[1:], [])
    assert await index.near(WEEK, "x", bottom, 0, descending=descending) == Near(3, [], [])
    with pytest.raises(ValueError):
        await index.near(WEEK, "x", 1, -1, descending=descending)


async def test_near_on_a_long_run_of_ties(index: ShardIndex, descending: bool) -> None:
    entries = {f"p{i:03d}": 7 for i in range(0, 100, 2)} | {"top": 9, "low": 3}
    await fill(index, entries, descending)
    for member in ("p000", "p001", "p049", "p050", "p099", "p100", "o", "q"):
        got = await index.near(WEEK, member, 7, 3, descending=descending)
        assert got == ref_near(entries, member, 7, 3, descending), member


async def test_near_reads_scores_exactly(index: ShardIndex, descending: bool) -> None:
    entries = {"max": MAX, "max-1": MAX - 1, "half": 2**52 + 1, "neg": -MAX}
    await fill(index, entries, descending)
    got = await index.near(WEEK, "x", 2**52 + 1, 4, descending=descending)
    assert got == ref_near(entries, "x", 2**52 + 1, 4, descending)
    assert all(type(s) is int for _, s in got.above + got.below)
    assert type(got.ahead) is int


# -- scores_at ------------------------------------------------------------------------------


async def test_scores_at_each_rank(index: ShardIndex, descending: bool) -> None:
    entries = {m: (i * 7) % 5 for i, m in enumerate(TRICKY)} | {"max": MAX, "neg": -MAX}
    await fill(index, entries, descending)
    ordered = in_board_order(entries.items(), descending)
    ranks = [*range(len(ordered) + 3), 0, 10**9, 5]
    got = await index.scores_at(WEEK, ranks, descending=descending)
    assert got == [ordered[r][1] if r < len(ordered) else None for r in ranks]
    assert all(type(s) is int for s in got if s is not None)
    assert await index.scores_at(WEEK, [], descending=descending) == []
    assert await index.scores_at(MISSING, [0, 1], descending=descending) == [None, None]
    with pytest.raises(ValueError):
        await index.scores_at(WEEK, [0, -1], descending=descending)
