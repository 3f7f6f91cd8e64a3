"""The mender (``workers/mender.py``) on a fake index's markers and a set clock: what it
confirms, and from when it replays after a failover, however late it is noticed; and which
changes a replay of some shards keeps (``replay.on_shards``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from podium import metrics
from podium.config.settings import parse
from podium.domain.boards import Tally
from podium.domain.cohorts import cohort_shard
from podium.domain.models import Change, ProfileChange
from podium.domain.sharding import shard_of
from podium.domain.windows import index_expiry
from podium.ports import BoardKey
from podium.ports.generations import Held
from podium.workers.mender import Mender, renew_counts
from podium.workers.replay import on_shards

REPLAY_S = 60.0
OLD, NEW = "run-a:repl-a", "run-b:repl-b"


class Clock:
    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t


class Marks:
    """Markers as a fake index holds them: shard -> (token, marked on, confirmed)."""

    def __init__(self, node: dict[int | None, str]) -> None:
        self.node = node  # the node that holds each shard now
        self.marks: dict[int | None, tuple[str, str, float | None]] = {}

    async def held(self) -> list[Held]:
        out = []
        for s, node in self.node.items():
            token, on, at = self.marks.get(s, (None, None, None))
            out.append(Held(s, token, on, node, at))
        return out

    async def tokens(self) -> tuple[str | None, ...]:
        return tuple(self.marks[s][0] if s in self.marks else None for s in self.node)

    async def mark(self, shards: Sequence[int | None], token: str, at: float) -> None:
        for s in shards:
            self.marks[s] = (token, self.node[s], at)

    async def confirm(self, held: Sequence[Held], at: float) -> None:
        for h in held:
            if self.marks.get(h.shard, (None, None))[:2] == (h.token, h.marked_on):
                self.marks[h.shard] = (h.token or "", h.marked_on or "", at)

    async def lock(self, token: str, ttl_s: float) -> bool:
        return True

    async def unlock(self, token: str) -> None:
        pass


class Replays:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.asked: list[tuple[float, Collection[int] | None]] = []  # (since when, shards)

    async def __call__(self, since_s: float, shards: Collection[int] | None) -> int:
        self.asked.append((self.clock.now() - since_s, shards))
        return 7


async def _rebuilt() -> int:
    return 0


def _mender(marks: Marks, clock: Clock, shards: int = 1) -> tuple[Mender, Replays]:
    replays = Replays(clock)
    return Mender(marks, _rebuilt, replays, clock, REPLAY_S, shards), replays


async def test_each_look_confirms_a_marker_on_its_own_node() -> None:
    clock, marks = Clock(1000.0), Marks({None: OLD})
    marks.marks[None] = ("t0", OLD, 900.0)
    m, replays = _mender(marks, clock)
    await m.step()
    assert marks.marks[None] == ("t0", OLD, 1000.0)
    clock.t = 1002.0
    await m.step()
    assert marks.marks[None] == ("t0", OLD, 1002.0)
    assert replays.asked == []


@pytest.mark.parametrize("late_s", [1.0, 600.0])
async def test_a_failover_replays_from_before_the_marker_was_last_confirmed(
    late_s: float,
) -> None:
    """Noticed a second or ten minutes after the change, the replay starts at the same
    point: the last confirmed time the promoted node replicated, less failover_replay_s."""
    clock, marks = Clock(1000.0), Marks({None: OLD})
    marks.marks[None] = ("t0", OLD, 990.0)
    m, replays = _mender(marks, clock)
    await m.step()  # confirmed at 1000 on the old node
    marks.node[None] = NEW  # the replica took over, with the marker as replicated
    clock.t = 1000.0 + late_s
    await m.step()
    assert replays.asked == [(1000.0 - REPLAY_S, None)]
    assert marks.marks[None] == ("t0", NEW, 1000.0 + late_s)  # the new node, named once
    await m.step()
    assert len(replays.asked) == 1


async def test_a_marker_without_a_time_replays_the_last_seconds() -> None:
    """A marker written by a release that kept no confirmed time: from now, as before."""
    clock, marks = Clock(5000.0), Marks({None: NEW})
    marks.marks[None] = ("t0", OLD, None)
    m, replays = _mender(marks, clock)
    await m.step()
    assert replays.asked == [(5000.0 - REPLAY_S, None)]


async def test_a_cluster_failover_replays_its_own_shards_from_the_oldest_confirmed() -> None:
    clock = Clock(2000.0)
    marks = Marks({0: OLD, 1: OLD, 2: "other:node", 3: OLD})
    for s in marks.node:
        marks.marks[s] = ("t0", marks.node[s], 1990.0)
    m, replays = _mender(marks, clock, shards=4)
    await m.step()
    assert {s: marks.marks[s][2] for s in marks.node} == dict.fromkeys(marks.node, 2000.0)
    marks.marks[1] = ("t0", OLD, 1995.0)  # confirmed last before the others
    marks.node[0] = marks.node[1] = NEW
    failovers = metrics.INDEX_FAILOVERS.labels("1")._value.get()
    clock.t = 2300.0
    await m.step()
    assert replays.asked == [(1995.0 - REPLAY_S, {0, 1})]
    assert metrics.INDEX_FAILOVERS.labels("1")._value.get() == failovers + 1
    # the shards that stayed were confirmed by the same look, and named no other node
    assert marks.marks[2] == ("t0", "other:node", 2300.0)
    assert marks.marks[3] == ("t0", OLD, 2300.0)


async def test_every_shard_moved_is_a_replay_of_every_change() -> None:
    clock, marks = Clock(100.0), Marks({0: NEW, 1: NEW})
    marks.marks = {0: ("t0", OLD, 90.0), 1: ("t0", OLD, 95.0)}
    m, replays = _mender(marks, clock, shards=2)
    replayed = metrics.REPLAYED_CHANGES._value.get()
    await m.step()
    assert replays.asked == [(90.0 - REPLAY_S, None)]
    assert metrics.REPLAYED_CHANGES._value.get() == replayed + 7


async def test_with_the_replay_off_a_failover_is_marked_and_not_replayed() -> None:
    clock, marks = Clock(100.0), Marks({None: NEW})
    marks.marks[None] = ("t0", OLD, 90.0)
    replays = Replays(clock)
    await Mender(marks, _rebuilt, replays, clock, 0).step()
    assert replays.asked == []
    assert marks.marks[None] == ("t0", NEW, 100.0)


@pytest.mark.parametrize("replay_s", [REPLAY_S, 0.0])
async def test_a_failover_sweeps_the_index_for_erased_players_once(replay_s: float) -> None:
    """After the replay (or with none), the index is swept for erased players, whose
    copies a replica may have kept; then the marker names the new node, so once."""
    clock, marks = Clock(100.0), Marks({None: OLD})
    marks.marks[None] = ("t0", OLD, 90.0)
    replays = Replays(clock)
    swept: list[int] = []

    async def sweep() -> int:
        swept.append(len(replays.asked))  # how many replays had run by then
        return 3

    m = Mender(marks, _rebuilt, replays, clock, replay_s, sweep=sweep)
    await m.step()
    assert swept == []  # no failover, no sweep
    marks.node[None] = NEW
    await m.step()
    assert swept == [1 if replay_s else 0]
    assert marks.marks[None] == ("t0", NEW, 100.0)
    await m.step()
    assert len(swept) == 1


@pytest.mark.parametrize("replay_s", [REPLAY_S, 0.0])
async def test_a_failover_marks_the_moved_shards_counts_anew_before_the_replay(
    replay_s: float,
) -> None:
    """The shards whose node changed, and only they, are marked as a new generation of
    counts, before the replay (whose writes are moves of the new node) and whether or not
    one runs; once: the marker names the new node after."""
    clock = Clock(100.0)
    marks = Marks({0: NEW, 1: OLD, 2: NEW})
    marks.marks = {s: ("t0", OLD, 90.0) for s in marks.node}
    replays = Replays(clock)
    renewed: list[tuple[list[int | None], int]] = []  # (shards, replays run by then)

    async def renew(shards: Sequence[int | None]) -> None:
        renewed.append((list(shards), len(replays.asked)))

    m = Mender(marks, _rebuilt, replays, clock, replay_s, 3, renew=renew)
    await m.step()
    assert renewed == [([0, 2], 0)]
    assert len(replays.asked) == (1 if replay_s else 0)
    await m.step()
    assert len(renewed) == 1


async def test_a_shard_that_lost_its_data_is_marked_anew_before_its_rebuild() -> None:
    clock, marks = Clock(100.0), Marks({0: OLD, 1: OLD})
    marks.marks = {1: ("t0", OLD, 90.0)}  # shard 0's marker is gone
    order: list[str] = []

    async def renew(shards: Sequence[int | None]) -> None:
        order.append(f"renew {list(shards)}")

    async def rebuilt() -> int:
        order.append("rebuild")
        return 0

    await Mender(marks, rebuilt, Replays(clock), clock, REPLAY_S, 2, renew=renew).step()
    assert order == ["renew [0]", "rebuild"]


class Shard:
    def __init__(self) -> None:
        self.renewed: list[tuple[BoardKey, int | None]] = []

    async def renew_counts(self, windows: Sequence[tuple[BoardKey, int | None]]) -> None:
        self.renewed += windows


async def test_the_windows_marked_anew_are_those_an_aggregator_counts() -> None:
    """Each board's latest window and the one before until it freezes, with the expiry a
    write gives them, on the shards named only; none on the unsplit index (no aggregator)."""
    settings = parse(
        {
            "index": {"shards": 3},
            "boards": [
                {"name": "week", "window": "week"},
                {"name": "ever", "window": "all"},
                {"name": "land", "window": "week", "group_by": "country"},
            ],
        }
    )
    now = 1_790_172_800.0  # a Wednesday: last week's window is frozen
    shards = [Shard(), Shard(), Shard()]
    needs: Any = SimpleNamespace(settings=settings, clock=Clock(now), shards=shards)
    await renew_counts(needs, [2, None])
    week = settings.boards[0].rule.latest(int(now))
    assert week is not None
    assert shards[2].renewed == [
        (BoardKey("week", week.id), index_expiry(week)),
        (BoardKey("ever", "all"), None),
    ]
    assert shards[0].renewed == shards[1].renewed == []
    await renew_counts(needs, [None])
    assert len(shards[2].renewed) == 2 and shards[0].renewed == []


def _change(player: str, window: str = "all") -> Change:
    return Change("b", window, player, Tally(5, 0, 1), committed_at=0.0)


def test_a_replay_of_some_shards_keeps_the_changes_written_to_them() -> None:
    keep = on_shards({3, 5}, 16)
    players = [f"p{i}" for i in range(200)]
    kept = {p for p in players if keep(_change(p))}
    assert kept == {p for p in players if shard_of(p, 16) in (3, 5)}
    assert all(keep(ProfileChange(p, 1, 0.0)) == (p in kept) for p in players)
    # A league cohort lives on a shard of its own, whoever the player.
    ids = (f"2026-W44.gold-{i}" for i in range(100))
    cohort = next(c for c in ids if cohort_shard("b", c, 16) == 3)
    assert all(keep(_change(p, cohort)) for p in players)


async def test_a_shard_moved_under_this_process_after_another_mended_it_is_replayed_again() -> None:
    """Another process replayed and marked the new node while this one still found the
    shard on the old node (a split brain: it wrote there until the heal). When this one
    finds the new node, already marked, it replays from before its own last look on the old
    node, once, and only the shards that moved."""
    clock, marks = Clock(1000.0), Marks({0: OLD, 1: "other:node"})
    for s in marks.node:
        marks.marks[s] = ("t0", marks.node[s], 990.0)
    m, replays = _mender(marks, clock, shards=2)
    await m.step()
    clock.t = 1030.0
    await m.step()  # its last look on the old node: 1030
    marks.node[0] = NEW
    marks.marks[0] = ("t0", NEW, 1031.0)  # marked by the other process, which replayed
    clock.t = 1050.0
    await m.step()
    assert replays.asked == [(1030.0 - REPLAY_S, {0})]
    clock.t = 1051.0
    await m.step()
    assert len(replays.asked) == 1


async def test_a_process_that_never_saw_the_old_node_does_not_replay_again() -> None:
    clock, marks = Clock(1000.0), Marks({None: NEW})
    marks.marks[None] = ("t0", NEW, 990.0)  # mended before this process's first look
    m, replays = _mender(marks, clock)
    await m.step()
    await m.step()
    assert replays.asked == []


async def test_a_shard_marked_anew_on_another_node_is_not_a_split_brain() -> None:
    """A reshard (or a rebuild) marks each shard under a new token, and after a reshard
    shard 0 is other keys, on another node: nothing this process wrote to the old node is
    missing there, so it replays nothing, where the same token on another node would have
    been replayed (the test above)."""
    clock, marks = Clock(1000.0), Marks({0: OLD, 1: "other:node"})
    for s in marks.node:
        marks.marks[s] = ("t0", marks.node[s], 990.0)
    m, replays = _mender(marks, clock, shards=2)
    await m.step()
    marks.node[0] = NEW
    marks.marks[0] = ("t1", NEW, 1001.0)  # the new layout's marker, another token
    clock.t = 1010.0
    await m.step()
    await m.step()
    assert replays.asked == []
