"""Flags for results that deserve a human look before prizes: never a rejection.

Two plain rules, kept simple so a reviewer can tell why a result was flagged:

- a **jump**: far above the player's own recent results in the mode (at least ``JUMP_FACTOR``
  times their median of the last results, and at least a tenth of the mode's range above it),
  once they have ``MIN_HISTORY`` results;
- a **streak**: ``STREAK`` results in a row, this one included, all in the top
  ``1 - STREAK_SHARE`` of the mode's range.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from podium.domain.models import Mode

RECENT = 20  # how many earlier results the rules look at
MIN_HISTORY = 5
JUMP_FACTOR = 3.0
STREAK = 5
STREAK_SHARE = 0.95


def flag_for(points: int, recent: Sequence[int], mode: Mode) -> str | None:
    """Why this result looks suspicious, or None. ``recent``: the player's earlier results
    in the mode, newest first."""
    span = max(1, mode.max_points - mode.min_points)
    if len(recent) >= MIN_HISTORY:
        typical = median(recent[:RECENT])
        if points >= JUMP_FACTOR * max(typical, 1) and points - typical >= span / 10:
            n = len(recent[:RECENT])
            return f"jump: {points} points against a median of {typical:g} over the last {n}"
    high = mode.min_points + STREAK_SHARE * span
    run = [points, *recent[: STREAK - 1]]
    if len(run) == STREAK and all(p >= high for p in run):
        return f"streak: {STREAK} results in a row at {STREAK_SHARE:.0%}+ of the mode's range"
    return None
