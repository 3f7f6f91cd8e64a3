"""The rules of one record step, shared by the service's pre-check and every store adapter.

The SQL differs per database; the decisions taken inside a record transaction do not, so
they live here once and each adapter only reads and writes rows around them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from podium.domain.boards import Aggregate, BoardSpec, Tally, fold
from podium.domain.codec import EncodingError
from podium.domain.cohorts import base_window, of_league
from podium.domain.models import ResultRecord, Target
from podium.domain.plans import UNKNOWN_GROUP, group_of
from podium.domain.tournaments import TournamentSpec, attempt, totals_of
from podium.domain.validation import capacity
from podium.domain.windows import GROUP_SEP
from podium.errors import Conflict, Forbidden, InvalidInput, RateLimited, WindowClosed

HOUR = 3600

__all__ = [
    "HOUR",
    "UNKNOWN_GROUP",
    "RecordState",
    "check_cap",
    "check_replay",
    "fold_targets",
    "open_targets",
    "place_in_groups",
    "plan_record",
    "shut",
    "step",
]


def check_replay(existing: ResultRecord, result: ResultRecord) -> None:
    """Raise unless ``result`` is a faithful retry of ``existing``."""
    if existing.key_id != result.key_id:
        raise Forbidden(f"match {result.match_id} was recorded by another game server")
    if not existing.same_content(result):
        raise Conflict(
            f"player {result.player_id} already has a different result for match {result.match_id}"
        )


def check_cap(
    count: int, cap: int | None, oldest: float | None, now: float, result: ResultRecord
) -> None:
    if cap is not None and count >= cap:
        retry = (oldest + HOUR - now) if oldest is not None else HOUR
        raise RateLimited(
            f"player {result.player_id} has {count} results in mode {result.mode} in the last "
            f"hour (cap {cap})",
            retry_after=int(retry) + 1,
        )


def step(
    spec: BoardSpec, target: Target, current: Tally | None, result: ResultRecord
) -> Tally | None:
    """Fold one result into one tally, refusing a total the board cannot encode."""
    new = fold(spec, current, result.points, result.ended_at)
    if isinstance(spec, TournamentSpec):
        new = attempt(spec, current, new)  # the version counts the results that counted
    if new is not None and result.metadata is not None:
        # The tally a result changes carries its metadata: on best and last boards only the
        # result that set the score changes it, on sums every one that moved the total.
        new = replace(new, metadata=result.metadata)
    if new is not None:
        codec = spec.codec
        limit = codec.points_limit
        if spec.aggregate is Aggregate.SUM and not -limit < new.total < limit:
            # A sum grows with every match: say how far it may go, not only that it fell off.
            raise InvalidInput(
                f"board {spec.name}: player {result.player_id}'s total would be {new.total} "
                f"points, past the board's capacity ({capacity(codec)})"
            )
        try:
            codec.encode(new.total, new.reached_at - target.start)
        except EncodingError as e:
            raise InvalidInput(f"board {spec.name}: {e}") from None
    return new


def fold_targets(
    live: Sequence[tuple[Target, BoardSpec]],
    current: dict[tuple[str, str], Tally],
    result: ResultRecord,
) -> tuple[dict[str, int], list[tuple[Target, Tally]]]:
    """Fold one result into every open target, in order: the total on each board, and the
    tallies that changed in fold order (``current`` is updated as it goes, so a board named
    twice folds twice). Nothing is written here, so an ``InvalidInput`` from ``step`` leaves
    nothing half done."""
    totals: dict[str, int] = {}
    changes: list[tuple[Target, Tally]] = []
    for target, spec in live:
        key = (target.board, target.window)
        cur = current.get(key)
        # Past a tournament's maxAttempts the result counts for the boards only.
        exhausted = isinstance(spec, TournamentSpec) and spec.exhausted(cur)
        new = None if exhausted else step(spec, target, cur, result)
        if new is not None:
            current[key] = new
            changes.append((target, new))
        final = new or cur
        assert final is not None
        if not of_league(target.window):  # a cohort's total is its board's: answered once
            totals.update(totals_of(spec, final))
    return totals, changes


def shut(target: Target, frozen: Collection[tuple[str, str]]) -> bool:
    """Whether a target's window takes no more results: it is frozen, or it is a league's
    cohort whose board window is. A freeze by hand freezes the board window, then its
    cohorts: a record that lands between the two counts for neither, so the cohorts'
    standings never hold a result the window's do not. (A record's targets name the
    board window beside its cohort, so ``frozen`` has it.)"""
    return (target.board, target.window) in frozen or (
        of_league(target.window) and (target.board, base_window(target.window)) in frozen
    )


def open_targets(
    targets: Sequence[tuple[Target, BoardSpec]], frozen: Collection[tuple[str, str]]
) -> list[tuple[Target, BoardSpec]]:
    """The targets whose window is not ``shut``; a result for frozen windows only is refused
    (it still counts for every longer window that is open, which is a separate target)."""
    kept = [(t, s) for t, s in targets if not shut(t, frozen)]
    if targets and not kept:
        windows = ", ".join(f"{t.board} {t.window}" for t, _ in targets)
        raise WindowClosed(f"endedAt falls in windows that are frozen: {windows}")
    return kept


def place_in_groups(
    targets: Sequence[tuple[Target, BoardSpec]], country: str | None
) -> list[tuple[Target, BoardSpec]]:
    """Targets on grouped boards point at the player's group window (``2026-W44@FR``),
    read inside the record transaction so that a move between groups cannot interleave."""
    group = group_of(country)
    return [
        (Target(t.board, f"{t.window}{GROUP_SEP}{group}", t.start), s) if s.group_by else (t, s)
        for t, s in targets
    ]


@dataclass(frozen=True, slots=True)
class RecordState:
    """Everything one player's record decides on, as a store read it (inside the record's
    transaction, or in the read before it): the result this match already has for the
    player, their results in the mode in the last hour (count, oldest ``recorded_at``), and,
    by placed ``(board, window)``, the frozen windows and the tallies there are."""

    existing: ResultRecord | None
    count: int
    oldest: float | None
    frozen: Collection[tuple[str, str]]
    tallies: dict[tuple[str, str], Tally]


@dataclass(frozen=True, slots=True)
class RecordPlan:
    """What a record writes: nothing on a replay (``replayed``), else the result and each
    change in fold order. ``totals`` are the player's totals by board either way."""

    totals: dict[str, int]
    replayed: bool
    changes: list[tuple[Target, Tally]]

    def last_values(self) -> list[tuple[Target, Tally]]:
        """Each changed tally at its last value (a board named twice changes twice)."""
        return list({(t.board, t.window): (t, n) for t, n in self.changes}.values())


def plan_record(
    result: ResultRecord,
    placed: Sequence[tuple[Target, BoardSpec]],
    state: RecordState,
    now: float,
    hourly_cap: int | None,
) -> RecordPlan:
    """The decisions of one record, the same on every store: a retry of the stored result is
    replayed with its stored totals (other content raises); a player over the hourly cap is
    refused; otherwise the result folds into every open target. Raises before anything is
    written (``InvalidInput`` from a total the board cannot encode, too)."""
    if state.existing is not None:
        check_replay(state.existing, result)
        # In target order, so a repeated board name resolves the same way everywhere.
        stored = {
            board: total
            for t, spec in placed
            if (t.board, t.window) in state.tallies and not of_league(t.window)
            for board, total in totals_of(spec, state.tallies[(t.board, t.window)]).items()
        }
        return RecordPlan(stored, True, [])
    check_cap(state.count, hourly_cap, state.oldest, now, result)
    live = open_targets(placed, state.frozen)
    totals, changes = fold_targets(live, dict(state.tallies), result)
    return RecordPlan(totals, False, changes)
