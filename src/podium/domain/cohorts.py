"""Leagues: a board played in cohorts of N, in tiers, with promotion and demotion.

A league board (``[[boards]]`` with ``cohort_size`` and ``tiers``) is a board like any other
and, besides, in each window, a cohort board per cohort: the window of the same board whose
id is the window's, a dot, the tier and the cohort's number (``2026-W44.gold-3``). So a
cohort's tallies, outbox changes, index key, freeze and final standings are a board
window's (as a group's window ``2026-W44@FR`` is), and its rank is exact: a cohort is one
small sorted set, kept whole on one index shard (``cohort_shard``).

A player's first result in a window places them: the record asks for the pending target
``2026-W44.gold*`` (their tier), and the store, inside the record's transaction, puts them
in the first open cohort of that tier (the first made first), or makes a new one (``fill``),
in an order the store keeps (SQLite's one writer; on Postgres a lock on the player's stripe
of the tier, ``stripe_of``). A retry finds the placement the first record made.

When a window freezes, each cohort freezes on its own, exactly once, and its top
``promote`` move a tier up and its bottom ``demote`` a tier down (``plan_moves``), written in
the same transaction as its final standings; a player's tier is then the one their latest
frozen cohort gave them (``Tier``), the lowest before any.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from podium.domain.models import FinalEntry
from podium.domain.sharding import bucket_of, shard_of
from podium.domain.windows import Window, WindowError, WindowRule, parse_window

SEP = "."  # window id, SEP, cohort: no window id holds a dot (domain/windows.py)
PENDING = "*"  # a target not placed yet: "2026-W44.gold*" (never stored, never a key)
MAX_COHORT = 1000
MAX_TIERS = 20
TIER = r"[a-z0-9][a-z0-9_-]{0,31}"
# The cohort part of a cohort's window id: its tier, a dash, its number, and on a store
# split by player the database that made it (``x`` and 8 hex digits), so that two
# databases never make the same id.
COHORT_RE = re.compile(rf"(?P<tier>{TIER})-(?P<n>[1-9][0-9]{{0,8}})(?P<origin>x[0-9a-f]{{8}})?")


class LeagueError(ValueError):
    """A league's configuration refused: ``field`` names the setting that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True, slots=True)
class League:
    """How a board is played in cohorts: ``cohort_size`` players each, in ``tiers`` (lowest
    first), the top ``promote`` of each moving up and the bottom ``demote`` down."""

    cohort_size: int
    tiers: tuple[str, ...]
    promote: int
    demote: int

    def __post_init__(self) -> None:
        check(self)

    @property
    def lowest(self) -> str:
        return self.tiers[0]

    def tier(self, name: str | None) -> str:
        """A stored tier as this league knows it: a tier no longer configured (or none)
        is the lowest."""
        return name if name in self.tiers else self.lowest

    def moved(self, tier: str, by: int) -> str:
        i = min(len(self.tiers) - 1, max(0, self.tiers.index(self.tier(tier)) + by))
        return self.tiers[i]


def check(league: League) -> None:
    """Every rule of a league's settings, raising ``LeagueError`` naming the setting."""
    size = league.cohort_size
    if not 2 <= size <= MAX_COHORT:
        raise LeagueError("cohort_size", f"expected 2 to {MAX_COHORT}, got {size}")
    if not 1 <= len(league.tiers) <= MAX_TIERS:
        raise LeagueError("tiers", f"name 1 to {MAX_TIERS} tiers, lowest first")
    for t in league.tiers:
        if not re.fullmatch(TIER, t):
            raise LeagueError("tiers", f"{t!r} must match {TIER}")
    if len(set(league.tiers)) != len(league.tiers):
        raise LeagueError("tiers", "a tier is named twice")
    for name, n in (("promote", league.promote), ("demote", league.demote)):
        if not 0 <= n <= size:
            raise LeagueError(name, f"expected 0 to cohort_size ({size}), got {n}")
    if league.promote + league.demote > size:
        raise LeagueError(
            "demote",
            f"promote + demote ({league.promote + league.demote}) is more than cohort_size "
            f"({size}): a player would move both ways",
        )


# -- ids ---------------------------------------------------------------------------------


def pending(window_id: str, tier: str) -> str:
    """The target window of a player not placed in this window yet."""
    return f"{window_id}{SEP}{tier}{PENDING}"


def cohort_id(window_id: str, tier: str, n: int, origin: str = "") -> str:
    return f"{window_id}{SEP}{tier}-{n}{origin}"


@dataclass(frozen=True, slots=True)
class CohortId:
    window: str  # the board window the cohort is part of
    tier: str
    n: int


def parse(window_id: str) -> CohortId | None:
    """The cohort a window id names; None for a window id that names no cohort."""
    base, sep, rest = window_id.partition(SEP)
    if not sep:
        return None
    m = COHORT_RE.fullmatch(rest)
    if m is None:
        return None
    return CohortId(base, m["tier"], int(m["n"]))


def is_cohort(window_id: str) -> bool:
    return parse(window_id) is not None


def of_league(window_id: str) -> bool:
    """Whether a target's window is a cohort's, placed or pending."""
    return window_id.endswith(PENDING) or parse(window_id) is not None


def pending_tier(window_id: str) -> tuple[str, str] | None:
    """(window, tier) of a pending target's window; None for any other window id."""
    if not window_id.endswith(PENDING):
        return None
    base, sep, tier = window_id[: -len(PENDING)].partition(SEP)
    return (base, tier) if sep else None


def base_window(window_id: str) -> str:
    """The board window a cohort (or pending target) is part of; any other id as it is."""
    return window_id.partition(SEP)[0]


def window_of(rule: WindowRule, window_id: str) -> Window:
    """Like ``domain.windows.parse_window``, also for a cohort's window: the board window's
    times under the cohort's id (what the updater, a rebuild and the reconciler need to
    pack its scores and expire its key). Raises ``WindowError``."""
    found = parse(window_id)
    if found is None:
        return parse_window(rule, window_id)
    w = rule.parse(found.window)
    return Window(window_id, w.start, w.end)


def cohort_window(rule: WindowRule, window_id: str) -> Window | None:
    """A cohort's window; None for any other id (or a cohort of no window of ``rule``)."""
    if parse(window_id) is None:
        return None
    try:
        return window_of(rule, window_id)
    except WindowError:
        return None


def cohort_shard(board: str, window_id: str, shards: int) -> int:
    """The one index shard a cohort's key lives on, by the cohort's own name, so that the
    cohort is one sorted set even on a board split by player."""
    return shard_of(f"{board}/{window_id}", shards)


# -- placing -----------------------------------------------------------------------------


def fill(open_cohorts: Sequence[tuple[str, int]], made: int, size: int) -> tuple[str | None, int]:
    """Where a new member goes: the first of ``open_cohorts`` (``(cohort, members)`` in
    the order they were made) with room, as ``(cohort, members after)``; ``(None, n)``: a
    new cohort, number ``n`` (``made`` of the tier exist)."""
    for cohort, members in open_cohorts:
        if members < size:
            return cohort, members + 1
    return None, made + 1


def stripe_of(player_id: str, stripes: int) -> int:
    """The stripe of players a placement queues in, on a store that stripes them (each
    stripe fills cohorts of its own, numbered ``stripe + 1``, ``stripe + 1 + stripes``, ...)."""
    return bucket_of(player_id) % stripes if stripes > 1 else 0


# -- zones and moves ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Zones:
    """Where a cohort's promotion and demotion start, by position (1-based): positions up
    to ``promote_through`` move up, from ``demote_from`` down (None: no such zone)."""

    promote_through: int | None
    demote_from: int | None


def zones(league: League, tier: str, members: int) -> Zones:
    """A cohort of ``members`` players in ``tier``: the top tier promotes no one, the
    lowest demotes no one; in a cohort too small for both zones, promotion comes first."""
    i = league.tiers.index(league.tier(tier))
    up = min(league.promote, members) if i < len(league.tiers) - 1 else 0
    down = min(league.demote, members - up) if i > 0 else 0
    return Zones(up or None, members - down + 1 if down else None)


@dataclass(frozen=True, slots=True)
class Move:
    """One member's outcome: their final place, and the tier they play the next window in
    (``by``: 1 up, -1 down, 0 where they were)."""

    player_id: str
    position: int
    rank: int
    points: int
    tier: str  # the cohort's
    next_tier: str
    by: int

    @property
    def change(self) -> str:
        return {1: "up", -1: "down"}.get(self.by, "stay")


def plan_moves(league: League, tier: str, final: Sequence[FinalEntry]) -> list[Move]:
    """Each member's move from a cohort's final standings (in position order)."""
    z = zones(league, tier, len(final))
    out = []
    for e in final:
        by = 0
        if z.promote_through is not None and e.position <= z.promote_through:
            by = 1
        elif z.demote_from is not None and e.position >= z.demote_from:
            by = -1
        nxt = league.moved(tier, by)
        out.append(Move(e.player_id, e.position, e.rank, e.points, tier, nxt, by))
    return out
