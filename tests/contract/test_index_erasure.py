"""A player erased from the rank index (``IndexErasure.erase_player``, and by the hash of
their id: ``IndexSweep.sweep_erased``), on every adapter:
in process, one Redis, a shard on it and on Redis Cluster, through Sentinel, and a board
split into shards on each. Every board window, its versions, metadata and ban set, and the
copy of profiles lose the player; the others keep their places."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from podium.domain.erasure import erased_among, erased_digest
from podium.domain.models import Profile
from podium.index.memory.index import MemoryIndex
from podium.index.split.index import SplitIndex
from podium.ports import BoardKey
from tests.contract.conftest import INDEXES, Backend, backend_of

WEEK = BoardKey("week", "2026-W44")
DAY = BoardKey("day", "2026-10-28")
TOURNEY = BoardKey("t:cup", "20261028T0000")
GONE = "zq-gone-7"


@pytest.fixture(params=INDEXES)
def backend(request: pytest.FixtureRequest) -> Backend:
    return backend_of(request, request.param)


@pytest.fixture
async def index(backend: Backend) -> AsyncIterator[Any]:
    idx = backend.index()
    try:
        yield idx
    finally:
        await idx.close()


async def _held(backend: Backend, index: Any) -> list[str]:
    """Everything the index holds that names the player: keys, members, fields, values."""
    if backend.prefix is None:
        shards = index.shards if isinstance(index, SplitIndex) else [index]
        out = []
        for shard in shards:
            assert isinstance(shard, MemoryIndex)
            for key, board in shard._boards.items():
                held = [*board.scores, *board.versions, *board.meta, *board.banned]
                out += [f"{key}: {m}" for m in held if GONE in m]
            out += [p for p in shard.copy._held if GONE in p]
        return out
    # Through Sentinel, the index's own client (its private server); else a plain one.
    raw = index._r if backend.kind == "sentinel" else backend.raw()
    out = []
    try:
        async for key in raw.scan_iter(match=f"{backend.prefix}:*"):
            kind = await raw.type(key)
            if kind == "zset":
                held = [m for m, _ in await raw.zrange(key, 0, -1, withscores=True)]
            elif kind == "hash":
                held = [f"{k}={v}" for k, v in (await raw.hgetall(key)).items()]
            elif kind == "set":
                held = list(await raw.smembers(key))
            else:
                held = [str(await raw.get(key))] if kind == "string" else []
            out += [f"{key}: {h}" for h in [key, *held] if GONE in h]
    finally:
        if backend.kind != "sentinel":
            await raw.aclose()
    return out


async def test_an_erased_player_leaves_every_key_and_the_others_keep_theirs(
    backend: Backend, index: Any
) -> None:
    others = [("a", 50), ("b", 20), ("c", 10)]
    await index.write(WEEK, [(GONE, 30), *others], descending=True, expire_at=None)
    await index.write(
        DAY,
        [(GONE, 7), ("a", 5)],
        descending=True,
        expire_at=None,
        versions=[3, 1],
        metadata=[(3, '{"skin":"red"}'), (1, None)],
    )
    await index.write(TOURNEY, [(GONE, 9), ("b", 1)], descending=True, expire_at=None)
    await index.ban([BoardKey("week", "2026-W43")], GONE)  # a ban set naming them
    await index.copy.write_profiles([(Profile(GONE, "Gone"), 1), (Profile("a", "Ann"), 1)])
    assert await _held(backend, index) != []

    assert await index.erase_player(GONE) >= 4
    assert await _held(backend, index) == []
    assert await index.page(WEEK, 0, 10, descending=True) == others  # moved up
    assert await index.page(DAY, 0, 10, descending=True) == [("a", 5)]
    assert await index.page(TOURNEY, 0, 10, descending=True) == [("b", 1)]
    assert await index.rank(WEEK, GONE, descending=True) is None
    assert await index.erase_player(GONE) == 0  # again: nothing


COHORT = BoardKey("league", "2026-10-28.bronze-1")  # a league cohort: its own shard
BANNED = BoardKey("week", "2026-W43")
SECRET = "sweep-secret"


def _erased(asked: list[int]) -> Any:
    """``ErasedAmong`` for GONE alone, by the hash of each id, noting each page's size."""
    digests = {erased_digest(SECRET, GONE)}

    def erased(ids: Any) -> set[str]:
        asked.append(len(ids))
        return erased_among(SECRET, digests, ids)

    return erased


async def test_a_sweep_takes_out_the_erased_by_the_hash_of_their_id_alone(
    backend: Backend, index: Any
) -> None:
    """What a promoted replica brought back (board members, versions, metadata, a cohort's
    board, a ban set, the profile copy) found with no id to look for: the hash of each id
    held, a page at a time; the others (a banned one among them) keep what they had."""
    filler = [(f"f{i:04d}", 1000 + i) for i in range(2500)]  # pages of a bigger board
    await index.write(WEEK, [(GONE, 30), ("a", 50), *filler], descending=True, expire_at=None)
    await index.write(
        DAY,
        [(GONE, 7), ("a", 5)],
        descending=True,
        expire_at=None,
        versions=[3, 1],
        metadata=[(3, '{"skin":"red"}'), (1, '{"k":1}')],
    )
    await index.write(
        COHORT, [(GONE, 9), ("b", 1)], descending=True, expire_at=None,
        metadata=[(1, '{"x":1}'), (1, '{"y":2}')],
    )  # fmt: skip
    await index.ban([BANNED], GONE)
    await index.ban([BANNED], "c")
    assert await index.copy.begin_profiles_copy("t", 0.0, 60.0)
    await index.copy.write_profiles([(Profile(GONE, "Gone"), 1), (Profile("a", "Ann"), 1)])
    assert await index.copy.end_profiles_copy("t")
    assert await _held(backend, index) != []

    asked: list[int] = []
    assert await index.sweep_erased(_erased(asked)) >= 4  # three boards, the copy
    assert await _held(backend, index) == []
    assert asked and max(asked) <= 1000 and sum(asked) >= len(filler)  # never all at once
    assert len(await index.page(WEEK, 0, 3000, descending=True)) == len(filler) + 1
    assert await index.page(DAY, 0, 10, descending=True) == [("a", 5)]
    assert await index.entry_metadata(DAY, ["a"]) == {"a": '{"k":1}'}
    assert await index.page(COHORT, 0, 10, descending=True) == [("b", 1)]
    assert await index.entry_metadata(COHORT, ["b"]) == {"b": '{"y":2}'}
    assert await index.copy.profiles(["a", GONE]) == {"a": Profile("a", "Ann")}
    # the banned one still refused there
    assert await index.write(BANNED, [("c", 1)], descending=True, expire_at=None) == 0
    assert await index.sweep_erased(_erased([])) == 0  # again: nothing


async def test_a_sweep_with_no_erased_player_changes_nothing(backend: Backend, index: Any) -> None:
    await index.write(WEEK, [(GONE, 30), ("a", 50)], descending=True, expire_at=None)
    await index.ban([BANNED], "c")
    assert await index.sweep_erased(lambda ids: set()) == 0
    assert await index.page(WEEK, 0, 10, descending=True) == [("a", 50), (GONE, 30)]
    assert await index.write(BANNED, [("c", 1)], descending=True, expire_at=None) == 0


async def test_forget_takes_a_player_off_without_a_ban(backend: Backend, index: Any) -> None:
    """``forget``: the member, its version and metadata gone, a ban set naming them
    emptied, and nothing refused after (the store refuses an erased player, not the
    index)."""
    await index.write(
        DAY, [(GONE, 7), ("a", 5)], descending=True, expire_at=None, versions=[3, 1],
        metadata=[(3, '{"skin":"red"}'), (1, None)],
    )  # fmt: skip
    await index.ban([WEEK], GONE)
    await index.forget([DAY, WEEK], GONE)
    assert await _held(backend, index) == []
    assert await index.page(DAY, 0, 10, descending=True) == [("a", 5)]
    # no version left behind, no ban: a write of them lands again (version 1 too)
    assert await index.write(DAY, [(GONE, 2)], descending=True, expire_at=None, versions=[1]) == 1
    assert await index.write(WEEK, [(GONE, 2)], descending=True, expire_at=None) == 1
