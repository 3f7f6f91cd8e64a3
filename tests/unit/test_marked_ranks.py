"""``MarkedRanks``: a read is answered only if the index's generation markers say the board
held its data throughout; a read that brought the markers from its own atomic step needs no
second look at them."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from podium.domain.boards import BoardSpec
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import Rebuilding
from podium.mending import MarkedRanks
from podium.ports import Around, BoardKey
from podium.ports.generations import Held

SPEC = BoardSpec("week", WindowRule(WindowKind.WEEK))
KEY = BoardKey("week", "2026-W44")


class Markers:
    """Generations whose tokens a test sets, counting how often they are asked."""

    def __init__(self, tokens: tuple[str | None, ...]) -> None:
        self.now = tokens
        self.asked = 0

    async def tokens(self) -> tuple[str | None, ...]:
        self.asked += 1
        return self.now

    async def held(self) -> list[Held]:
        raise AssertionError("a read never asks for the nodes")

    async def mark(self, shards: Sequence[int | None], token: str) -> None:
        raise AssertionError("a read never marks")

    async def lock(self, token: str, ttl_s: float) -> bool:
        raise AssertionError("a read never locks")

    async def unlock(self, token: str) -> None:
        raise AssertionError("a read never unlocks")


class Source:
    """A rank source whose ``around`` answers what the test puts in ``next``."""

    def __init__(self) -> None:
        self.next: Around | None = None

    def forget(self, changed_at: float | None = None) -> None:
        return None

    async def around(
        self, spec: BoardSpec, key: BoardKey, player_id: str, neighbors: int
    ) -> Around | None:
        return self.next


class Clock:
    def now(self) -> float:
        return 1_000.0


def _around(generation: tuple[str | None, ...] | None) -> Around:
    return Around(0, 10, [("a", 10)], None, exact=True, generation=generation)


def _marked(markers: Markers, source: Source) -> MarkedRanks:
    return MarkedRanks(source, markers, Clock())  # type: ignore[arg-type]


async def test_markers_read_in_the_same_step_are_the_check_after_it() -> None:
    markers, source = Markers(("t1",)), Source()
    ranks = _marked(markers, source)
    source.next = _around(("t1",))
    assert (await ranks.around(SPEC, KEY, "a", 2)) == source.next
    assert (await ranks.around(SPEC, KEY, "a", 2)) == source.next
    assert markers.asked == 0  # no second round trip for either read


async def test_a_read_without_its_own_markers_asks_for_them_after_it() -> None:
    markers, source = Markers(("t1",)), Source()
    ranks = _marked(markers, source)
    source.next = _around(None)  # an index that does not read them in its step
    await ranks.around(SPEC, KEY, "a", 2)
    source.next = None  # nobody found: no rows, so no markers came with them
    assert await ranks.around(SPEC, KEY, "zz", 2) is None
    assert markers.asked == 2


async def test_a_marker_gone_in_the_reads_own_step_is_a_503() -> None:
    markers, source = Markers(("t1",)), Source()
    ranks = _marked(markers, source)
    source.next = _around((None,))  # the board was read from an index that lost its data
    with pytest.raises(Rebuilding, match="being rebuilt"):
        await ranks.around(SPEC, KEY, "a", 2)
    # and the next read refuses at once, without asking the index (within GONE_S)
    source.next = _around(("t1",))
    with pytest.raises(Rebuilding):
        await ranks.around(SPEC, KEY, "a", 2)
    assert markers.asked == 0


async def test_a_token_changed_since_the_last_read_is_a_503_once() -> None:
    markers, source = Markers(("t1",)), Source()
    ranks = _marked(markers, source)
    source.next = _around(("t1",))
    await ranks.around(SPEC, KEY, "a", 2)
    source.next = _around(("t2",))  # emptied and rebuilt between the two reads
    with pytest.raises(Rebuilding, match="rebuilt while this read ran"):
        await ranks.around(SPEC, KEY, "a", 2)
    assert (await ranks.around(SPEC, KEY, "a", 2)) == source.next  # the new generation's


async def test_markers_of_another_number_are_a_reshard_not_a_rebuild() -> None:
    """A reshard (index/layout.py) switched the layout while the read ran: the markers of 4
    shards before it, of 8 after; both layouts were whole, so the read is answered."""
    markers, source = Markers(("t1",) * 4), Source()
    ranks = _marked(markers, source)
    source.next = _around(None)
    await ranks.around(SPEC, KEY, "a", 2)
    markers.now = ("t9",) * 8
    assert (await ranks.around(SPEC, KEY, "a", 2)) == source.next
