"""The in-process index's bulk load (``MemoryIndex.replace`` builds each sorted list once):
a board loaded in bulk answers every read exactly as the same board built entry by entry
does, bans, duplicates, versions and metadata included."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.index.memory.index import MemoryIndex, _Board
from podium.ports import BoardKey, Meta

KEY = BoardKey("week", "2026-W44")

members = st.sampled_from([f"p{i}" for i in range(12)] + ["é", "Z", "a b", "\U0001f600"])
scores = st.integers(-(2**52), 2**52) | st.integers(-3, 3)  # wide, and many ties
texts = st.none() | st.sampled_from(['{"car":"kart"}', '{"lap":3}'])


def by_entry(
    banned: set[str],
    entries: Sequence[tuple[str, int]],
    versions: Sequence[int] | None,
    metadata: Sequence[Meta] | None,
) -> _Board:
    """The board as replace built it before the bulk load: one entry at a time."""
    board = _Board(banned=set(banned))
    for i, (member, score) in enumerate(entries):
        if member not in board.banned:
            board.set(member, score)
            if versions is not None:
                board.versions[member] = versions[i]
            if metadata is not None:
                board.set_meta(member, *metadata[i])
    return board


async def every_read(index: MemoryIndex, descending: bool, probes: list[str]) -> list[object]:
    n = await index.count(KEY)
    out: list[object] = [n, await index.page(KEY, 0, n + 1, descending=descending)]
    out.append(await index.ranks(KEY, probes, descending=descending))
    out.append(await index.scores(KEY, probes))
    out.append(await index.entry_metadata(KEY, probes))
    out.append(await index.scores_at(KEY, list(range(n + 1)), descending=descending))
    out.append(await index.count_between(KEY, [-(2**53), -1, 0, 1, 2**53]))
    for p in probes:
        out.append(await index.rank(KEY, p, descending=descending))
        out.append(await index.around(KEY, p, 2, descending=descending))
        for s in (-1, 0, 2):
            out.append(await index.ahead(KEY, [(p, s)], descending=descending))
            out.append(await index.near(KEY, p, s, 2, descending=descending))
            out.append(await index.page_after(KEY, (p, s), 3, descending=descending))
    return out


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(members, scores, st.integers(1, 9), texts), max_size=30),
    banned=st.sets(members, max_size=3),
    versioned=st.booleans(),
    with_meta=st.booleans(),
    descending=st.booleans(),
)
def test_a_bulk_loaded_board_answers_as_one_built_entry_by_entry(
    rows: list[tuple[str, int, int, str | None]],
    banned: set[str],
    versioned: bool,
    with_meta: bool,
    descending: bool,
) -> None:
    entries = [(m, s) for m, s, _, _ in rows]
    versions = [v for _, _, v, _ in rows] if versioned else None
    metadata: list[Meta] | None = [(v, t) for _, _, v, t in rows] if with_meta else None

    async def run() -> None:
        bulk, single = MemoryIndex(clock=lambda: 0.0), MemoryIndex(clock=lambda: 0.0)
        for index in (bulk, single):
            for p in banned:  # a ban before the rebuild, kept through it
                await index.ban([KEY], p)
        await bulk.replace(KEY, entries, expire_at=None, versions=versions, metadata=metadata)
        single._boards[KEY] = by_entry(banned, entries, versions, metadata)
        loaded, built = bulk._boards[KEY], single._boards[KEY]
        assert list(loaded.entries) == list(built.entries)
        assert loaded.scores == built.scores
        assert loaded.versions == built.versions
        assert loaded.meta == built.meta
        assert loaded.banned == built.banned
        probes = sorted({m for m, _ in entries} | banned | {"nobody"})
        assert await every_read(bulk, descending, probes) == await every_read(
            single, descending, probes
        )
        # and it takes writes afterwards as the other does
        for index in (bulk, single):
            await index.write(KEY, [("p1", 5), ("new", 1)], descending=descending, expire_at=None)
        assert await every_read(bulk, descending, probes) == await every_read(
            single, descending, probes
        )

    asyncio.run(run())


def test_a_large_bulk_load_sorts_in_board_order() -> None:
    """A fixed random board, larger than one of the sorted list's sublists many times over:
    its pages and ranks in the one order of ``domain.boards.board_key``."""
    import random

    rng = random.Random(23)
    entries = [(f"p_{i:06d}", rng.randint(0, 500)) for i in range(20_000)]

    async def run() -> None:
        index = MemoryIndex(clock=lambda: 0.0)
        await index.replace(KEY, entries, expire_at=None)
        expected = sorted(entries, key=lambda e: (e[1], e[0].encode()), reverse=True)
        assert await index.page(KEY, 0, len(entries), descending=True) == expected
        ranks = await index.ranks(KEY, [m for m, _ in expected[::997]], descending=True)
        assert [r.rank if r else None for r in ranks] == list(range(0, len(expected), 997))

    asyncio.run(run())
