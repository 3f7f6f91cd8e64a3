"""``MarkedRanks``: a read is answered only if the index's generation markers say the board
held its data throughout; a read that brought the markers from its own atomic step needs no
second look at them."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from podium.domain.boards import BoardSpec
from podium.domain.histogram import Estimate
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import Rebuilding
from podium.ports import Around, BoardKey, Estimated
from podium.ports.generations import Held
from podium.service.ranks.marked import GONE_S, WHOLE_S, MarkedRanks

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

    async def version(self, key: BoardKey) -> bytes | None:
        return None

    async def around(
        self, spec: BoardSpec, key: BoardKey, player_id: str, neighbors: int
    ) -> Around | None:
        return self.next


class Clock:
    def __init__(self) -> None:
        self.at = 1_000.0

    def now(self) -> float:
        return self.at


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
    """A reshard (index/redis/layout.py) switched the layout while the read ran: the markers of 4
    shards before it, of 8 after; both layouts were whole, so the read is answered."""
    markers, source = Markers(("t1",) * 4), Source()
    ranks = _marked(markers, source)
    source.next = _around(None)
    await ranks.around(SPEC, KEY, "a", 2)
    markers.now = ("t9",) * 8
    assert (await ranks.around(SPEC, KEY, "a", 2)) == source.next


def _estimated(generation: dict[int, str | None] | None) -> Estimated:
    return Estimated(Estimate(500, 400, 600), 5.0, 10, 1_000.0, generation=generation)


async def test_an_estimate_s_one_marker_stands_in_for_its_shard() -> None:
    """An estimated rank reads one shard's score with that shard's marker: merged into the
    markers last seen, it is the check after the read, with no second round trip."""
    markers, source = Markers(("t1", "t1", "t1")), Source()
    ranks = _marked(markers, source)
    source.next = _estimated({1: "t1"})  # type: ignore[assignment]
    assert await ranks.around(SPEC, KEY, "a", 2) == source.next  # none seen yet: asked
    assert markers.asked == 1
    for _ in range(3):
        assert await ranks.around(SPEC, KEY, "a", 2) == source.next
    assert markers.asked == 1  # the read's own marker was the check
    source.next = _estimated({1: None})  # (1) lost its data
    with pytest.raises(Rebuilding, match="being rebuilt"):
        await ranks.around(SPEC, KEY, "a", 2)
    assert markers.asked == 1


async def test_an_estimate_s_marker_changed_since_last_seen_is_a_503_once() -> None:
    markers, source = Markers(("t1", "t1")), Source()
    ranks = _marked(markers, source)
    source.next = _estimated({0: "t1"})  # type: ignore[assignment]
    await ranks.around(SPEC, KEY, "a", 2)
    source.next = _estimated({0: "t2"})  # type: ignore[assignment]
    with pytest.raises(Rebuilding, match="rebuilt while this read ran"):
        await ranks.around(SPEC, KEY, "a", 2)
    assert await ranks.around(SPEC, KEY, "a", 2) == source.next
    assert markers.asked == 1


async def test_an_estimate_after_a_gone_marker_asks_for_every_marker() -> None:
    """Once a marker was seen gone, a shard's own marker cannot say the others came back:
    the next read (past GONE_S) asks for them all."""
    markers, source = Markers(("t1", None)), Source()
    ranks = _marked(markers, source)
    source.next = _estimated(None)  # type: ignore[assignment]
    with pytest.raises(Rebuilding):
        await ranks.around(SPEC, KEY, "a", 2)  # (1) gone: seen
    markers.now = ("t1", "t2")  # rebuilt
    ranks._seen_at -= 2 * GONE_S  # the gone marker seen long enough ago to ask again
    source.next = _estimated({0: "t1"})  # type: ignore[assignment]
    with pytest.raises(Rebuilding, match="rebuilt while this read ran"):
        await ranks.around(SPEC, KEY, "a", 2)  # every marker asked: (1) is another's now
    assert markers.asked == 2
    assert await ranks.around(SPEC, KEY, "a", 2) == source.next
    assert markers.asked == 2  # all seen there again: the read's own marker is the check


async def test_an_estimate_asks_for_every_marker_once_a_second() -> None:
    """The estimate comes from a histogram of every shard: a marker gone on another shard
    must stop it too, so every marker is read again once the last whole read is WHOLE_S
    old, and a gone one found there is a 503."""
    markers, source = Markers(("t1", "t1")), Source()
    clock = Clock()
    ranks = MarkedRanks(source, markers, clock)  # type: ignore[arg-type]
    source.next = _estimated({0: "t1"})  # type: ignore[assignment]
    await ranks.around(SPEC, KEY, "a", 2)
    await ranks.around(SPEC, KEY, "a", 2)
    assert markers.asked == 1
    markers.now = ("t1", None)  # shard 1 lost its data
    clock.at += WHOLE_S / 2
    assert await ranks.around(SPEC, KEY, "a", 2) == source.next  # within the second
    clock.at += WHOLE_S
    with pytest.raises(Rebuilding, match="being rebuilt"):
        await ranks.around(SPEC, KEY, "a", 2)
    assert markers.asked == 2
