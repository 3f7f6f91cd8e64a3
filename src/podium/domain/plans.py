"""The plans both stores execute: pure decisions on rows already read, no I/O.

Each store reads the rows a use case needs in its own dialect, hands them to a plan here,
and writes what the plan says in one transaction. So the rule (who moves where, with which
version; what a freeze keeps) is written once, and the adapters hold only SQL.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from podium.domain.boards import BoardSpec, Tally, rank_standings
from podium.domain.cohorts import Move, base_window, plan_moves
from podium.domain.events import cohort_frozen_data, cohort_frozen_id, encode
from podium.domain.models import FinalEntry
from podium.domain.windows import GROUP_SEP, Window, split_group

UNKNOWN_GROUP = "ZZ"  # the group of players whose country is not known (ISO's "unknown")


def group_of(country: str | None) -> str:
    """The group window suffix a player's country places them in."""
    return country or UNKNOWN_GROUP


@dataclass(frozen=True, slots=True)
class GroupMove:
    """One tally of a player moving from one group window of a board to another: the store
    deletes it at ``old_window``, inserts ``tally`` at ``new_window``, and writes two outbox
    rows (a removal at the old window, the total at the new one), all with the new version,
    so no late change of the old group can put the player back there."""

    board: str
    old_window: str
    new_window: str
    tally: Tally


def plan_group_moves(
    rows: Iterable[tuple[str, str, Tally]], new_country: str | None
) -> list[GroupMove]:
    """The moves of a player's grouped tallies, given as ``(board, window, tally)`` (the open
    windows of the group they leave; final standings do not move), to the group of
    ``new_country``."""
    group = group_of(new_country)
    out = []
    for board, window, t in rows:
        base, _ = split_group(window)
        moved = replace(t, version=t.version + 1)  # its metadata moves with it
        out.append(GroupMove(board, window, f"{base}{GROUP_SEP}{group}", moved))
    return out


def group_pattern(country: str | None) -> str:
    """A SQL ``LIKE`` pattern for the windows of the group ``country`` places a player in."""
    return f"%{GROUP_SEP}{group_of(country)}"


def moves_group(before: str | None, after: str | None) -> bool:
    """Whether a profile change from country ``before`` to ``after`` moves the player
    between groups (no country and an unknown one are the same group)."""
    return group_of(before) != group_of(after)


@dataclass(frozen=True, slots=True)
class FreezePlan:
    """What freezing a window writes: how many players it ranked, its final standings down
    to the kept depth, and who it left out (banned at the freeze), which the store keeps
    so that the archive, written again from the tallies later, leaves them out too."""

    players: int
    final: list[FinalEntry]
    left_out: list[str]


def plan_freeze(
    spec: BoardSpec,
    window: Window,
    rows: Iterable[tuple[str, Tally]],
    banned: Collection[str],
    keep: int,
) -> FreezePlan:
    """Rank a window's tallies in board order, the way the index orders them, and keep the
    first ``keep`` places. The one rule of every freeze (a board's window, a tournament's
    run, a league's cohort): a player banned when it freezes is left out, as the live board
    left them out, and the ranks close up behind them (a banned first makes the next player
    first); an unban after it changes nothing, since frozen standings are final."""
    kept: list[tuple[str, Tally]] = []
    left_out: list[str] = []
    for p, t in rows:
        if p in banned:
            left_out.append(p)
        else:
            kept.append((p, t))
    ranked = rank_standings(spec, window, kept)
    final = [FinalEntry(pos, rank, p, t.total, t.reached_at) for pos, rank, p, t in ranked[:keep]]
    return FreezePlan(len(ranked), final, sorted(left_out))


@dataclass(frozen=True, slots=True)
class CohortFreezePlan:
    """What freezing a league cohort writes, in one transaction: its final standings (the
    whole cohort), each member's tier for the next window, and its ``cohort.frozen`` event
    (id and data, compact JSON)."""

    players: int
    final: list[FinalEntry]
    left_out: list[str]
    moves: list[Move]
    event_id: str
    event: str


def plan_cohort_freeze(
    spec: BoardSpec,
    window: Window,
    tier: str,
    rows: Iterable[tuple[str, Tally]],
    banned: Collection[str],
    now: float,
) -> CohortFreezePlan:
    """Rank a cohort's tallies as any freeze does (``plan_freeze``; ``window``: the
    cohort's), keep them all, and move its top and bottom (``domain.cohorts.plan_moves``)."""
    assert spec.league is not None
    plan = plan_freeze(spec, window, rows, banned, max(spec.exact_top, spec.league.cohort_size))
    moves = plan_moves(spec.league, tier, plan.final)
    base = base_window(window.id)
    data = cohort_frozen_data(spec.name, base, window.id, tier, now, moves)
    return CohortFreezePlan(
        plan.players,
        plan.final,
        plan.left_out,
        moves,
        cohort_frozen_id(spec.name, window.id),
        encode(data),
    )
