"""A flagged result rejected: which of the player's tallies it counted in, and each one
recounted without it. Pure: the stores read the rows inside one transaction, hand them to
``plan_reject`` and write what it says (the tallies, an outbox row per recount marked
``replaces``, the result marked rejected), so the rule is written once.

A recount folds the player's other results in the window (``boards.fold`` is order-free), so
it is right for every aggregate (a sum loses the points, a best falls to the next best), and
its version is one past the tally's: the updaters write it by that version, which may lower
a total ``GT`` would keep, and no older change of the player lands under it afterwards
(invariant 3 of docs/architecture.md). A window that is frozen keeps its final standings;
a tally no other result counts in is removed (a removal with the new version).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from podium.domain.boards import BoardSpec, Tally, fold
from podium.domain.cohorts import base_window, window_of
from podium.domain.windows import Window, WindowError, split_group
from podium.errors import Conflict, NotFound


@dataclass(frozen=True, slots=True)
class Counted:
    """One of a player's results as a recount reads it."""

    match_id: str
    mode: str
    points: int
    ended_at: int
    recorded_at: float
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class Recount:
    """One tally recounted: ``after`` None when no other result counts there (removed)."""

    board: str
    window: str
    before: Tally
    after: Tally | None


def counted_in(
    result: Counted, specs: Mapping[str, BoardSpec], tallies: Iterable[tuple[str, str]]
) -> list[tuple[str, str, BoardSpec, Window]]:
    """Which of the player's tallies, given as (board, window), the result counted in: a
    configured board that counts its mode, whose window (a group's or a cohort's too)
    contains its end. A tournament's run is left as it is (its boards are not configured)."""
    out = []
    for board, window_id in tallies:
        spec = specs.get(board)
        if spec is None or not spec.counts(result.mode):
            continue
        try:
            w = window_of(spec.rule, window_id)
        except WindowError:
            continue
        if w.contains(result.ended_at):
            out.append((board, window_id, spec, w))
    return out


def frozen_keys(board: str, window_id: str) -> list[tuple[str, str]]:
    """The (board, window) rows of ``frozen_windows`` that shut this tally's window: its
    own, and the board window of a group's or a cohort's."""
    base, _ = split_group(window_id)
    return list(dict.fromkeys([(board, window_id), (board, base), (board, base_window(base))]))


def recount(
    spec: BoardSpec, window: Window, before: Tally, others: Sequence[Counted]
) -> Tally | None:
    """The tally without the rejected result: the player's other results in the window
    folded again, in the order they were recorded (so the metadata is the last one's to
    change it), with a version one past ``before``'s."""
    tally: Tally | None = None
    for r in sorted(others, key=lambda r: (r.recorded_at, r.match_id)):
        if not (spec.counts(r.mode) and window.contains(r.ended_at)):
            continue
        new = fold(spec, tally, r.points, r.ended_at)
        if new is not None:
            tally = new if r.metadata is None else replace(new, metadata=r.metadata)
    if tally is None:
        return None
    return replace(tally, version=before.version + 1)


def plan_reject(
    result: Counted,
    specs: Mapping[str, BoardSpec],
    tallies: Mapping[tuple[str, str], Tally],
    others: Sequence[Counted],
    frozen: Iterable[tuple[str, str]],
) -> list[Recount]:
    """Every open tally the result counted in, recounted from ``others`` (the player's
    results that still count, the rejected one left out)."""
    shut = set(frozen)
    out = []
    for board, window_id, spec, w in counted_in(result, specs, sorted(tallies)):
        if any(k in shut for k in frozen_keys(board, window_id)):
            continue
        before = tallies[(board, window_id)]
        out.append(Recount(board, window_id, before, recount(spec, w, before, others)))
    return out


def check_reject(
    player_id: str,
    match_id: str,
    found: bool,
    flag: str | None,
    accepted_at: float | None,
) -> None:
    """Raise unless the stored result (``found``, its flag, its acceptance) may be rejected:
    a result that is not there is a 404, one never flagged or already accepted a 409."""
    if not found:
        raise NotFound(f"player {player_id} has no result in match {match_id}")
    if flag is None:
        raise Conflict(
            f"the result of player {player_id} in match {match_id} is not flagged: only a "
            "flagged result is reviewed"
        )
    if accepted_at is not None:
        raise Conflict(
            f"the result of player {player_id} in match {match_id} was accepted already: it "
            "counts, and stays counted"
        )


def check_accept(player_id: str, match_id: str, rejected_at: float | None) -> None:
    """A rejected result cannot be accepted afterwards (its points are out of the boards)."""
    if rejected_at is not None:
        raise Conflict(
            f"the result of player {player_id} in match {match_id} was rejected: it no longer "
            "counts"
        )
