"""The coordinate a split board's histogram interpolates on: occupied points values, then time.

A score packs points in its high bits and the time they were reached in its low ``T`` bits
(``codec``). Interpolating on the score itself would spread a bucket's members over points
values nobody holds (a game that scores in steps of 25 leaves 24 in 25 empty) and over time
parts nobody holds (a window shorter than ``2**T`` seconds, or not over yet). So the
coordinate of a score is ``k + f``: ``k`` the index of its points value on the lattice
``ref + k * step`` that every sampled points value lies on, ``f`` the share of the members
seen whose time part is below its own (``times``, quantiles of the time parts the planner's
samples showed). On a board without steps or gaps this is the score, scaled.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence

from podium.domain.codec import MAX_BITS

TIME_QUANTILES = 16  # shares of the time parts kept: 17 integers in the snapshot
# Every score is strictly inside (-2**53, 2**53) (codec.encode refuses the rest), and both
# sentinels are exact doubles, so a ZCOUNT on them means what it says.
LOWEST = -(1 << MAX_BITS) + 1
BEYOND = 1 << MAX_BITS


def lattice(points: Iterable[int]) -> tuple[int, int]:
    """``(ref, step)``: every one of these points values is ``ref + k * step`` for the largest
    such step (1 when the values share no step, or there are fewer than two distinct)."""
    ref: int | None = None
    step = 0
    for p in points:
        if ref is None:
            ref = p
        else:
            step = math.gcd(step, p - ref)
    return (0 if ref is None else ref), (step or 1)


def time_quantiles(
    parts: Sequence[int], weights: Sequence[float], k: int = TIME_QUANTILES
) -> tuple[int, ...] | None:
    """The time parts at shares 0, 1/k, ..., 1 of these members (each standing for
    ``weights[i]`` members), the last one past the highest: ``k + 1`` ascending integers, or
    None when there is nothing to learn (no members, or all on one time part)."""
    if not parts:
        return None
    pairs = sorted(zip(parts, weights, strict=True))
    lo, hi = pairs[0][0], pairs[-1][0] + 1
    if hi - lo <= 1:
        return None
    total = sum(w for _, w in pairs)
    out = [lo]
    seen = 0.0
    it = iter(pairs)
    part = lo
    for i in range(1, k):
        share = total * i / k
        while seen < share:
            part, w = next(it)
            seen += w
        out.append(max(out[-1], part))
    out.append(hi)
    return tuple(out)


def coordinate(
    score: int, time_bits: int, ref: int, step: int, times: Sequence[int] | None
) -> float:
    """``k + f`` for a score on the k-th lattice value (``f`` in [0, 1] from the time
    quantiles, or the time part over ``2**T`` without them); a score off the lattice (between
    two values, where the samples saw nobody) stands at the start of the next value, so the
    coordinate never falls as the score rises."""
    points = score >> time_bits
    k, off = divmod(points - ref, step)
    if off:
        return float(k + 1)
    t = score - (points << time_bits)
    if not times:
        return k + t / (1 << time_bits)
    j = bisect_right(times, t) - 1
    if j < 0:
        return float(k)
    last = len(times) - 1
    if j >= last:
        return float(k + 1)
    return k + (j + (t - times[j]) / (times[j + 1] - times[j])) / last


class Bounds(tuple[int, ...]):
    """Ascending boundaries, as ``plan_bounds`` places them, with the quantiles of the time
    parts its samples showed (``times``, see ``time_quantiles``), which ``Histogram.summed``
    keeps for its interpolation. It is a tuple for everything else (``count_between`` takes
    it as it is)."""

    times: tuple[int, ...] | None

    def __new__(cls, bounds: Iterable[int], times: tuple[int, ...] | None = None) -> Bounds:
        out = super().__new__(cls, bounds)
        out.times = times
        return out
