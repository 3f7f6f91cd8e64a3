"""The board's count of members below a score, as the planner estimates it from samples.

Every shard's scores at its sample ranks make a step curve of that shard's members below each
sampled score (``shard_knots``), piecewise linear between; their sum (``summed``) is the
board's (``Cumulative``). The planner reads target ranks off it, and checks against it how
far the estimator's interpolation inside a bucket would be from what the samples say
(``Misfit``), to split the buckets where it would be furthest.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import pairwise

from podium.domain.lattice import BEYOND, LOWEST, coordinate

# The error (a share of the rank) of the interpolation inside a bucket worth a split.
GOOD = 0.0002


class Cumulative:
    """The board's estimated count of members with a score below x, piecewise linear in x,
    summed over shards from each shard's samples."""

    def __init__(self, xs: list[int], cs: list[float]) -> None:
        self.xs = xs
        self.cs = cs

    def at(self, x: int) -> float:
        i = bisect_right(self.xs, x) - 1
        if i < 0:
            return 0.0
        if i >= len(self.xs) - 1:
            return self.cs[-1]
        x0, x1, c0, c1 = self.xs[i], self.xs[i + 1], self.cs[i], self.cs[i + 1]
        return c0 + (c1 - c0) * (x - x0) / (x1 - x0)

    def score_at(self, c: float) -> int:
        """The lowest score where the count below reaches c."""
        i = bisect_left(self.cs, c)
        if i <= 0:
            return self.xs[0]
        if i >= len(self.cs):
            return self.xs[-1]
        x0, x1, c0, c1 = self.xs[i - 1], self.xs[i], self.cs[i - 1], self.cs[i]
        return x0 + math.ceil((x1 - x0) * (c - c0) / (c1 - c0))


def shard_knots(
    ranks: Sequence[int], scores: Sequence[int | None], size: int, descending: bool
) -> list[tuple[int, float]]:
    """(score, members of this shard below it) from its samples; a score held at several
    sampled ranks (ties) becomes a step: the lowest count at the score, the highest past it."""
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for r, s in zip(ranks, scores, strict=False):
        if s is None:
            continue
        below = size - 1 - r if descending else r
        lo[s] = min(lo.get(s, below), below)
        hi[s] = max(hi.get(s, below), below)
    knots: list[tuple[int, float]] = [(LOWEST, 0.0)]
    for s in sorted(lo):
        knots.append((s, float(lo[s])))
        knots.append((s + 1, float(hi[s] + 1)))
    knots.append((BEYOND, float(size)))
    # Samples of one call are consistent, but keep the curve monotone whatever it was fed.
    out: list[tuple[int, float]] = []
    top = 0.0
    for x, c in knots:
        top = max(top, min(c, float(size)))
        if out and out[-1][0] == x:
            out[-1] = (x, top)
        else:
            out.append((x, top))
    return out


def summed(shards: list[list[tuple[int, float]]]) -> Cumulative:
    """The sum of the shards' piecewise-linear curves, in one sweep over all their knots: the
    sum's slope changes only where one shard's does."""
    events: dict[int, float] = {}
    for knots in shards:
        prev_slope = 0.0
        for (x0, c0), (x1, c1) in pairwise(knots):
            slope = (c1 - c0) / (x1 - x0)
            events[x0] = events.get(x0, 0.0) + slope - prev_slope
            prev_slope = slope
        events[knots[-1][0]] = events.get(knots[-1][0], 0.0) - prev_slope
    xs = sorted(events)
    cs: list[float] = []
    value, slope, prev = 0.0, 0.0, xs[0]
    for x in xs:
        value += slope * (x - prev)
        cs.append(value)
        slope += events[x]
        prev = x
    for i in range(1, len(cs)):  # float drift must not make the curve fall
        cs[i] = max(cs[i], cs[i - 1])
    return Cumulative(xs, cs)


class Misfit:
    """How far the estimator's interpolation inside a bucket would be from the samples."""

    def __init__(
        self,
        curve: Cumulative,
        total: int,
        top: int,
        descending: bool,
        time_bits: int,
        lat: tuple[int, int],
        times: tuple[int, ...] | None,
    ) -> None:
        self.curve, self.total, self.top, self.descending = curve, total, top, descending
        self.time_bits, self.lat, self.times = time_bits, lat, times

    def coord(self, x: int) -> float:
        return coordinate(x, self.time_bits, *self.lat, self.times)

    def worst(self, lo: int, hi: int) -> tuple[float, int]:
        """The largest error, as a share of the rank, of a uniform interpolation over
        [lo, hi) at the samples inside, and the sampled score where it is (or (0, lo))."""
        xs, cs = self.curve.xs, self.curve.cs
        u0, u1 = self.coord(lo), self.coord(hi)
        if u1 <= u0:
            return 0.0, lo
        c0, c1 = self.curve.at(lo), self.curve.at(hi)
        ref, step = self.lat
        found = (0.0, lo)
        for m in range(bisect_right(xs, lo), bisect_left(xs, hi)):
            x = xs[m]
            if ((x >> self.time_bits) - ref) % step:
                continue  # a boundary must stay on the lattice
            below = cs[m]
            rank = self.total - below if self.descending else below + 1
            if rank < self.top:
                continue  # the exact top: nobody reads these estimates
            error = abs(below - c0 - (c1 - c0) * (self.coord(x) - u0) / (u1 - u0)) / rank
            if error > found[0]:
                found = (error, x)
        return found

    def split(self, bounds: tuple[int, ...], room: int) -> tuple[int, ...]:
        """Split the worst buckets at their worst sample, while room lasts and it is worth it."""
        heap = []
        for lo, hi in pairwise(bounds):
            error, x = self.worst(lo, hi)
            heap.append((-error, x, lo, hi))
        heapq.heapify(heap)
        added: set[int] = set()
        while room > 0 and heap:
            neg, x, lo, hi = heapq.heappop(heap)
            if -neg < GOOD:
                break
            added.add(x)
            room -= 1
            for a, b in ((lo, x), (x, hi)):
                error, y = self.worst(a, b)
                heapq.heappush(heap, (-error, y, a, b))
        return tuple(sorted({*bounds, *added}))
