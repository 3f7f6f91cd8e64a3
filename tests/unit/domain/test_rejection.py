"""A flagged result rejected (domain/rejection.py): which tallies it counted in, each one
recounted without it on every aggregate, frozen windows left alone; and the recount's
change on the stream, readable by updaters of before (no field when it is none)."""

from __future__ import annotations

import json

import pytest

from podium.domain.boards import Aggregate, BoardSpec, Order, Tally
from podium.domain.models import Change
from podium.domain.rejection import Counted, check_accept, check_reject, plan_reject
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import Conflict, NotFound
from podium.log.events import decode, encode

T0 = 1_792_800_000  # 2026-10-24T00:00:00Z, a Saturday
DAY = BoardSpec("day", WindowRule(WindowKind.DAY))
WEEK = BoardSpec("week", WindowRule(WindowKind.WEEK))
BEST = BoardSpec("best", WindowRule(WindowKind.WEEK), aggregate=Aggregate.BEST)
FAST = BoardSpec("fast", WindowRule(WindowKind.WEEK), aggregate=Aggregate.BEST, order=Order.ASC)
RANKED = BoardSpec("ranked", WindowRule(WindowKind.WEEK), modes=("ranked",))
SPECS = {s.name: s for s in (DAY, WEEK, BEST, FAST, RANKED)}


def _r(match: str, points: int, ended: int, mode: str = "default", meta: str | None = None):
    return Counted(match, mode, points, ended, float(ended), meta)


def test_each_tally_it_counted_in_is_recounted_without_it() -> None:
    jump = _r("jump", 900, T0 + 100)
    others = [_r("a", 10, T0 + 50, meta='{"lap":1}'), _r("b", 30, T0 + 86_400 + 10)]
    tallies = {
        ("day", "2026-10-24"): Tally(910, T0 + 100, 2),
        ("day", "2026-10-25"): Tally(30, T0 + 86_410, 1),  # another day: not its window
        ("week", "2026-W43"): Tally(940, T0 + 86_410, 3),
        ("best", "2026-W43"): Tally(900, T0 + 100, 2),
        ("fast", "2026-W43"): Tally(10, T0 + 50, 4),
        ("ranked", "2026-W43"): Tally(5, T0, 1),  # another mode's board
        ("gone", "2026-W43"): Tally(5, T0, 1),  # no longer configured
    }
    plan = {(r.board, r.window): r.after for r in plan_reject(jump, SPECS, tallies, others, [])}
    assert plan == {
        ("day", "2026-10-24"): Tally(10, T0 + 50, 3, metadata='{"lap":1}'),
        ("week", "2026-W43"): Tally(40, T0 + 86_410, 4),  # the last change had none
        ("best", "2026-W43"): Tally(30, T0 + 86_410, 3),  # the next best
        ("fast", "2026-W43"): Tally(10, T0 + 50, 5, metadata='{"lap":1}'),  # a new version
    }


def test_a_frozen_window_keeps_its_standings_and_a_lone_result_leaves_the_window() -> None:
    jump = _r("jump", 900, T0 + 100)
    tallies = {
        ("day", "2026-10-24"): Tally(900, T0 + 100, 1),
        ("week", "2026-W43"): Tally(900, 1, 1),
    }
    plan = plan_reject(jump, SPECS, tallies, [], [("week", "2026-W43")])
    assert [(r.board, r.after) for r in plan] == [("day", None)]
    # a group's window is shut by its board window's freeze
    grouped = {("day", "2026-10-24@FR"): Tally(900, T0 + 100, 1)}
    assert plan_reject(jump, SPECS, grouped, [], [("day", "2026-10-24")]) == []
    assert [r.window for r in plan_reject(jump, SPECS, grouped, [], [])] == ["2026-10-24@FR"]


def test_what_cannot_be_rejected_is_named() -> None:
    with pytest.raises(NotFound):
        check_reject("p1", "m1", False, None, None)
    with pytest.raises(Conflict, match="not flagged"):
        check_reject("p1", "m1", True, None, None)
    with pytest.raises(Conflict, match="accepted"):
        check_reject("p1", "m1", True, "jump", 5.0)
    check_reject("p1", "m1", True, "jump", None)
    with pytest.raises(Conflict, match="rejected"):
        check_accept("p1", "m1", 5.0)


def test_a_recount_travels_the_stream_and_an_older_event_reads_as_none() -> None:
    change = Change("week", "2026-W44", "p1", Tally(40, T0, 4), 1.5, replaces=True)
    payload = encode(change, "s", 7)
    assert json.loads(payload)["replaces"] is True
    assert decode(payload, None) == change
    plain = Change("week", "2026-W44", "p1", Tally(40, T0, 4), 1.5)
    event = json.loads(encode(plain, "s", 7))
    assert "replaces" not in event and decode(json.dumps(event).encode(), None) == plain
