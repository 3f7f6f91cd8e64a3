"""The updater with recounts (a flagged result rejected, domain/rejection.py) in its batch,
on the in-process index: a recount lowers a total the board writes with ``GT``, an older
change delivered again after it does not raise it back, a newer one in the same batch wins,
and a removal leaves the board; other players' changes go as ever."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from podium import metrics
from podium.config.settings import parse
from podium.domain.boards import Tally
from podium.domain.models import Change, Message
from podium.errors import IndexUnavailable
from podium.index.memory.index import MemoryIndex
from podium.ports import BoardKey
from podium.workers.updater import MARK_CHECK_S, Updater

T0 = 1_792_800_000  # 2026-10-24T00:00:00Z
WINDOW = "2026-W43"
KEY = BoardKey("week", WINDOW)


class Clock:
    def now(self) -> float:
        return float(T0 + 60)


class Moving:
    t = float(T0 + 60)

    def now(self) -> float:
        return self.t


class Store:
    async def banned(self, player_ids: Sequence[str]) -> set[str]:
        return set()


class Log:
    def __init__(self) -> None:
        self.batches: list[list[Message]] = []
        self.acked: list[Message] = []
        self.floor_asked = 0
        # set: the floor answers at once; cleared by a test, it answers once set again
        self.floor_answers = asyncio.Event()
        self.floor_answers.set()

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        return self.batches.pop(0) if self.batches else []

    async def ack(self, messages: Sequence[Message]) -> None:
        self.acked += messages

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        # the ack floor: past every message acked, unless a test holds it back
        self.floor_asked += 1
        await self.floor_answers.wait()
        return [not self.floor_held] * len(messages)

    floor_held = False


def _change(player: str, total: int, version: int, **kw: bool) -> Change:
    return Change("week", WINDOW, player, Tally(total, T0 + 10, version), T0, **kw)


def points(score: int) -> int:
    return parse({"boards": [{"name": "week", "window": "week"}]}).boards[0].codec.points(score)


async def _apply(up: Updater, log: Log, batch: list[Message]) -> None:
    log.batches.append(batch)
    assert await up.step() == len(batch)


async def test_recounts_lower_a_gt_board_and_stay_lowered() -> None:
    settings = parse({"boards": [{"name": "week", "window": "week"}]})
    index, log = MemoryIndex(Clock().now), Log()
    up = Updater(settings, Store(), index, index.copy, log, Clock())  # type: ignore[arg-type]
    await _apply(up, log, [_change("a", 900, 3), _change("b", 500, 1), _change("c", 70, 2)])

    # a's recount in a batch with an older change of theirs before it; c leaves the board
    await _apply(
        up,
        log,
        [
            _change("a", 900, 3),
            _change("a", 100, 4, replaces=True),
            _change("b", 600, 2),
            _change("c", 70, 3, removed=True, replaces=True),
        ],
    )
    page = await index.page(KEY, 0, 10, descending=True)
    assert [(m, points(s)) for m, s in page] == [("b", 600), ("a", 100)]
    # the old change delivered again: under the recount's version, it does not land
    await _apply(up, log, [_change("a", 900, 3), _change("c", 70, 2)])
    page = await index.page(KEY, 0, 10, descending=True)
    assert [m for m, _ in page] == ["b", "a"] and points(page[1][1]) == 100
    # a recount then a newer result in one batch: the newer total, by its version
    await _apply(
        up, log, [_change("a", 50, 5, replaces=True), _change("a", 80, 6), _change("a", 60, 5)]
    )
    [(_, s)] = [(m, s) for m, s in await index.page(KEY, 0, 10, descending=True) if m == "a"]
    assert points(s) == 80
    # later, by the board's order again
    await _apply(up, log, [_change("a", 550, 7)])
    assert [m for m, _ in await index.page(KEY, 0, 10, descending=True)] == ["b", "a"]
    await _apply(up, log, [_change("a", 1000, 8)])
    assert (await index.page(KEY, 0, 0, descending=True))[0][0] == "a"


class Ticking:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.t = float(T0 + 60)

    def now(self) -> float:
        return self.t


class Settled(Log):
    """The log, with what the updater renews and gives back recorded too."""

    def __init__(self) -> None:
        super().__init__()
        self.renewed: list[Message] = []
        self.given_back: list[Message] = []

    async def in_progress(self, messages: Sequence[Message]) -> None:
        self.renewed += messages

    async def nak(self, messages: Sequence[Message]) -> None:
        self.given_back += messages


class Down(MemoryIndex):
    """The in-process index, refusing writes while ``down`` (an outage of Redis)."""

    down = False

    async def write(self, *args: Any, **kwargs: Any) -> int:
        if self.down:
            raise IndexUnavailable("index down (test)")
        return await super().write(*args, **kwargs)


def _counted(name: str, labels: dict[str, str] | None = None) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels or {}) or 0.0


async def test_a_batch_held_past_its_lease_is_given_up_unwritten() -> None:
    settings = parse({"boards": [{"name": "week", "window": "week"}], "workers": {"lease_s": 2}})
    clock, log = Ticking(), Settled()
    index = Down(clock.now)
    up = Updater(settings, Store(), index, index.copy, log, clock)  # type: ignore[arg-type]
    lost = _counted("podium_lease_lost_total", {"role": "updater"})
    index.down = True
    log.batches.append([_change("a", 900, 3)])
    with pytest.raises(IndexUnavailable):
        await up.step()  # held, to be retried under a lease started again
    clock.t += 1.0
    with pytest.raises(IndexUnavailable):
        await up.step()
    assert len(log.renewed) == 1  # within its lease: started again, retried
    assert _counted("podium_lease_lost_total", {"role": "updater"}) == lost
    # The outage outlasts the lease (the log was out of reach too: nothing renewed it).
    clock.t += 2.5
    index.down = False
    assert await up.step() == 0  # given up; the log has nothing new
    assert _counted("podium_lease_lost_total", {"role": "updater"}) == lost + 1
    assert len(log.renewed) == 1 and not log.given_back and not log.acked
    assert await index.page(KEY, 0, 10, descending=True) == []  # never written late


async def test_entries_a_write_left_as_they_were_are_counted() -> None:
    settings = parse({"boards": [{"name": "week", "window": "week"}]})
    index, log = MemoryIndex(Clock().now), Log()
    up = Updater(settings, Store(), index, index.copy, log, Clock())  # type: ignore[arg-type]
    before = _counted("podium_board_writes_unchanged_total")
    await _apply(up, log, [_change("a", 900, 3), _change("b", 500, 1)])
    assert _counted("podium_board_writes_unchanged_total") == before
    # a's older total arrives late, b's newer one on time: one entry left as it was
    await _apply(up, log, [_change("a", 700, 2), _change("b", 600, 2)])
    assert _counted("podium_board_writes_unchanged_total") == before + 1
    page = await index.page(KEY, 0, 10, descending=True)
    assert [(m, points(s)) for m, s in page] == [("a", 900), ("b", 600)]


async def test_a_mark_is_noted_never_written_and_acked_with_its_batch() -> None:
    from podium.domain.marks import MARK_BOARD, mark_players
    from podium.index.memory.snapshots import MemorySnapshots

    settings = parse({"boards": [{"name": "week", "window": "week"}]})
    index, log, marks = MemoryIndex(Clock().now), Log(), MemorySnapshots(Clock().now)
    clock = Moving()
    up = Updater(settings, Store(), index, index.copy, log, clock, marks=marks)  # type: ignore[arg-type]
    p0, p1 = mark_players(2)

    def mark(player: str, at: float) -> Change:
        return Change(MARK_BOARD, "db1", player, Tally(0, 0, 0), at)

    batch: list[Message] = [_change("a", 900, 1), mark(p0, T0 + 5.5), mark(p1, T0 + 5.5)]
    # another updater still holds an earlier change of the partition: not noted yet
    log.floor_held = True
    await _apply(up, log, batch)
    assert log.acked == batch
    await up.noted()  # the note runs beside the next batch: waited for here
    assert log.floor_asked == 1
    assert await marks.read_marks() == {}
    log.floor_held = False
    await up.step()  # asked again only MARK_CHECK_S after the last time
    await up.noted()
    assert log.floor_asked == 1
    assert await marks.read_marks() == {}
    clock.t += 2 * MARK_CHECK_S
    await up.step()  # an idle step asks again
    await up.noted()
    assert await marks.read_marks() == {("db1", 0): T0 + 5.5, ("db1", 1): T0 + 5.5}
    page = await index.page(KEY, 0, 10, descending=True)
    assert [m for m, _ in page] == ["a"]  # the marks are on no board
    assert await index.page(BoardKey(MARK_BOARD, "db1"), 0, 10, descending=True) == []
    # a mark delivered again after a newer one never takes the watermark back
    await _apply(up, log, [mark(p0, T0 + 7.0)])
    await up.noted()
    await _apply(up, log, [mark(p0, T0 + 5.5)])
    await up.noted()
    assert await marks.read_marks() == {("db1", 0): T0 + 7.0, ("db1", 1): T0 + 5.5}


async def test_the_next_batch_does_not_wait_for_the_marks_note() -> None:
    """Noting marks asks the log for its floor and writes the index: two round trips the
    next batch would wait for (seconds on a slow link). It runs beside the next batch."""
    from podium.domain.marks import MARK_BOARD, mark_players
    from podium.index.memory.snapshots import MemorySnapshots

    settings = parse({"boards": [{"name": "week", "window": "week"}]})
    index, log, marks = MemoryIndex(Clock().now), Log(), MemorySnapshots(Clock().now)
    up = Updater(settings, Store(), index, index.copy, log, Moving(), marks=marks)  # type: ignore[arg-type]
    (p0,) = mark_players(1)
    log.floor_answers.clear()  # the log's floor slow to answer
    mark = Change(MARK_BOARD, "db1", p0, Tally(0, 0, 0), T0)
    # Both batches applied and acked while the note still waits for the floor (which, awaited
    # in the step, would hold them for ever: the bound only turns a hang into a failure).
    await asyncio.wait_for(_apply(up, log, [_change("a", 900, 1), mark]), 30)
    await asyncio.wait_for(_apply(up, log, [_change("b", 500, 1)]), 30)
    assert [m for m, _ in await index.page(KEY, 0, 10, descending=True)] == ["a", "b"]
    assert log.floor_asked == 1 and await marks.read_marks() == {}
    log.floor_answers.set()
    await up.noted()
    assert await marks.read_marks() == {("db1", 0): T0}
    await up.close()
