"""Where a split board's histogram puts its boundaries (the estimated ranks below the exact top).

The aggregator asks every shard, about once a minute, for the scores at a few hundred of its
own ranks (``sample_ranks``), and from those places at most ``MAX_BOUNDS`` boundaries
(``plan_bounds``); every few seconds it counts each shard's members between them. The counts
are exact, so the boundaries need not be: they only decide how fine the buckets are where.

Two rules shape them:

* **Rank-shaped.** A bucket is about ``1 %`` of the rank at its top (finer when the budget
  allows): an error within a bucket is then small *relative to the rank*, which is what a
  player reads ("top 5 %").
* **Whole points values.** A boundary sits on the floor of a points value (``codec.floor``),
  so a bucket holds whole points values, unless one value holds more players than a bucket
  should, and then that value gets its own edges and is split on time inside. Games that
  score in steps (multiples of 25, say) leave most points values empty; every sampled points
  value lies on one lattice ``ref + k * step``, and the boundaries are put on that lattice, so
  the estimator (``Histogram``) reads the step back from them and interpolates over occupied
  values, not over the empty ones between.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import pairwise

from podium.domain.codec import MAX_BITS, ScoreCodec
from podium.domain.lattice import Bounds, coordinate, lattice, time_quantiles

MAX_BOUNDS = 1000
# Every score is strictly inside (-2**53, 2**53) (codec.encode refuses the rest), and both
# sentinels are exact doubles, so a ZCOUNT on them means what it says.
LOWEST = -(1 << MAX_BITS) + 1
BEYOND = 1 << MAX_BITS

# A boundary may move to the nearest edge of a points value when that changes the rank at it
# by at most this share of the bucket's width; further than that, the value is split on time.
_SNAP = 0.25
# When the edges of heavy points values overflow the budget, each retry widens the buckets by this.
_RETRY = 1.15
_RETRIES = 60
_REFINE = 6
# The share of the budget kept for splitting the buckets where the samples show that the
# interpolation inside would be off, and the error (a share of the rank) worth a split.
_RESERVE = 0.1
_GOOD = 0.0002


def sample_ranks(
    total: int, shard_size: int, *, exact_top: int, max_bounds: int = MAX_BOUNDS
) -> list[int]:
    """The 0-based local ranks to ask one shard for (``scores_at``), given the board's total
    and that shard's size: spaced evenly in log(rank) from a little above the exact top's edge
    (a shard's rank r is about global rank ``r * total / shard_size``) to the shard's last
    member, at most ``max_bounds`` of them, ascending."""
    if shard_size <= 0 or total <= 0 or max_bounds < 1:
        return []
    last = shard_size - 1
    first = min(last, int(0.9 * exact_top * shard_size / total))
    if max_bounds == 1 or first == last:
        return [last]
    # Spaced on log(rank + 1) so that rank 0 is a valid start.
    lo, hi = math.log(first + 1), math.log(last + 1)
    n = max_bounds - 1
    ranks = {first, last}
    for i in range(1, n):
        ranks.add(min(last, max(first, round(math.exp(lo + (hi - lo) * i / n)) - 1)))
    return sorted(ranks)


class _Cumulative:
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


def _shard_knots(
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


def _summed(shards: list[list[tuple[int, float]]]) -> _Cumulative:
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
    return _Cumulative(xs, cs)


def plan_bounds(
    samples: Sequence[Sequence[int | None]],
    shard_sizes: Sequence[int],
    *,
    exact_top: int,
    descending: bool,
    codec: ScoreCodec,
    max_bounds: int = MAX_BOUNDS,
    ranks: Sequence[Sequence[int]] | None = None,
) -> Bounds:
    """Ascending boundaries (at most ``max_bounds``, at least 2) from every shard's scores at
    its sample ranks (``samples[j]`` for the shard of size ``shard_sizes[j]``, the sizes the
    ranks were asked with; the ranks are ``ranks[j]`` when given, else ``sample_ranks`` of
    the same total, size, ``exact_top`` and ``max_bounds``): rank-shaped below ``exact_top``
    (each bucket about 1 % of the rank at its top, or finer), on the points lattice of the
    samples, covering every possible score (the first at most any score, the last above any)."""
    if max_bounds < 2:
        raise ValueError(f"max_bounds must be at least 2, got {max_bounds}")
    total = sum(shard_sizes)
    top = max(1, exact_top)
    knots = []
    sampled: list[int] = []
    # Each sample counts once towards the time quantiles: weighting it by the members it
    # stands for (up to 1 % of the rank) would be as unbiased over the board and far noisier.
    weights: list[float] = []
    for j, (scores, size) in enumerate(zip(samples, shard_sizes, strict=True)):
        asked = (
            ranks[j]
            if ranks is not None
            else sample_ranks(total, size, exact_top=exact_top, max_bounds=max_bounds)
        )
        if len(asked) != len(scores):
            raise ValueError(f"shard {j}: {len(scores)} scores for {len(asked)} sample ranks")
        if size <= 0 or all(s is None for s in scores):
            continue
        knots.append(_shard_knots(asked, scores, size, descending))
        for s in scores:
            if s is not None:
                sampled.append(s)
                weights.append(1.0)
    if not knots or total <= top:
        return Bounds((LOWEST, BEYOND))
    curve = _summed(knots)
    lat = lattice(codec.points(s) for s in sampled)
    unit = codec.time_limit
    # The time parts seen: a window not yet over (or shorter than 2**T seconds) leaves the
    # rest of every points value empty, and members are not spread evenly over the rest.
    times = time_quantiles([s & (unit - 1) for s in sampled], weights) if unit > 1 else None
    edges = (times[0], times[-1]) if times else (0, unit)
    # Every shard's last member is sampled: these are the board's lowest and highest scores.
    high = max(sampled)
    past = high + 1 if (high + 1) >> codec.time_bits == high >> codec.time_bits else None
    extremes = (min(sampled), past or ((high >> codec.time_bits) + lat[1]) * unit)
    budget = max(2, max_bounds - int(_RESERVE * max_bounds)) if max_bounds >= 20 else max_bounds

    # Start from the ratio that fills the budget, coarsen until the edges of crowded points
    # values fit too, then refine between the last two tries to use what is left.
    def attempt(ratio: float) -> tuple[int, ...]:
        bounds = _place(curve, total, top, ratio, descending, codec, lat, edges, extremes)
        if (
            len(bounds) < budget
            and lattice(b >> codec.time_bits for b in bounds[1:-1])[1] != lat[1]
        ):
            # The estimator reads the step back from the boundaries: show it one whole step.
            cell = bounds[1] >> codec.time_bits
            if (cell + lat[1]) * unit < BEYOND:
                bounds = tuple(sorted({*bounds, (cell + lat[1]) * unit}))
        return bounds

    fine = math.exp(math.log(total / top) / max(1, budget - 2))
    best = attempt(fine)
    coarse = fine
    for _ in range(_RETRIES):
        if len(best) <= budget:
            break
        fine, coarse = coarse, 1 + (coarse - 1) * _RETRY
        best = attempt(coarse)
    else:
        # A budget too small for even one bucket's edges: thin evenly, keeping the sentinels.
        inner = best[1:-1]
        keep = max_bounds - 2
        thin = (LOWEST, *(inner[i * len(inner) // keep] for i in range(keep)), BEYOND)
        return Bounds(thin, times)
    if coarse != fine:
        for _ in range(_REFINE):
            mid = (fine + coarse) / 2
            tried = attempt(mid)
            if len(tried) <= budget:
                best, coarse = tried, mid
            else:
                fine = mid
    model = _Model(curve, total, top, descending, codec.time_bits, lat, times)
    return Bounds(model.split(best, max_bounds - len(best)), times)


class _Model:
    """How far the estimator's interpolation inside a bucket would be from the samples."""

    def __init__(
        self,
        curve: _Cumulative,
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
            if -neg < _GOOD:
                break
            added.add(x)
            room -= 1
            for a, b in ((lo, x), (x, hi)):
                error, y = self.worst(a, b)
                heapq.heappush(heap, (-error, y, a, b))
        return tuple(sorted({*bounds, *added}))


def _place(
    curve: _Cumulative,
    total: int,
    top: int,
    ratio: float,
    descending: bool,
    codec: ScoreCodec,
    lat: tuple[int, int],
    edges: tuple[int, int],
    extremes: tuple[int, int],
) -> tuple[int, ...]:
    ref, step = lat
    unit = codec.time_limit
    chosen = {LOWEST, BEYOND, *(x for x in extremes if LOWEST <= x < BEYOND)}
    rank = float(top)
    while rank < total:
        width = max(1.0, rank * (ratio - 1))
        # The count below a boundary at rank `rank` (its bucket above it in board order).
        target = total - rank if descending else rank - 1
        x = curve.score_at(target)
        p = codec.points(x)
        k = (p - ref) // step
        if p != ref + k * step or x >= BEYOND:
            # Between two lattice values: nobody should be there, so the next value's floor
            # counts the same members and keeps the boundary on the lattice.
            k += 1
        cell = ref + k * step
        # The value's edges, tight around the time parts seen (any score in the empty gap
        # between two values counts the same members; tight edges keep the gap out of a
        # bucket inside one value, where the estimator spreads members over time).
        lo = cell * unit + edges[0]
        hi = cell * unit + edges[1] if edges[1] < unit else (cell + step) * unit
        if not LOWEST < lo < BEYOND:
            rank = max(rank * ratio, rank + 1)
            continue
        if x <= lo or abs(curve.at(lo) - target) <= _SNAP * width:
            chosen.add(lo)
        elif hi < BEYOND and (x >= hi or abs(curve.at(hi) - target) <= _SNAP * width):
            chosen.add(hi)
        else:
            # One points value holds more than this bucket should: its own edges, and a
            # split on time inside it.
            chosen.update(b for b in (lo, x, hi) if LOWEST < b < BEYOND)
        rank = max(rank * ratio, rank + 1)
    return tuple(sorted(chosen))
