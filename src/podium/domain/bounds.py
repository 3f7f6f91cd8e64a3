"""Where a split board's histogram puts its boundaries (the estimated ranks below the exact top).

The aggregator asks every shard, about once a minute, for the scores at up to ``MAX_BOUNDS`` of
its own ranks (``sample_ranks``), and from those places at most ``MAX_BOUNDS`` boundaries
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
  values, not over the empty ones between (``lattice``). A value's edges are tight around the
  time parts seen, and the quantiles of those go with the boundaries (``Bounds.times``).
* **Where the samples disagree.** A tenth of the budget goes to splitting the buckets where
  the samples show the estimator's interpolation would be furthest off (``curve.Misfit``): a
  long tail at the end of the board, a points value crowded at one end of its time parts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

from podium.domain.codec import ScoreCodec
from podium.domain.curve import Cumulative, Misfit, shard_knots, summed
from podium.domain.lattice import BEYOND, LOWEST, Bounds, lattice, time_quantiles

# 1,000 until the churn benchmark (benchmarks/estimate_churn.py): intervals of about 0.2 % of
# the rank at 10 million players, where 1,000 gave 0.8 %, for a steady aggregator cycle of
# about 0.75 s against 0.35 s (BENCHMARKS.md)
MAX_BOUNDS = 8000

# A boundary may move to the nearest edge of a points value when that changes the rank at it
# by at most this share of the bucket's width; further than that, the value is split on time.
_SNAP = 0.25
# When the edges of heavy points values overflow the budget, each retry widens the buckets by this.
_RETRY = 1.15
_RETRIES = 60
_REFINE = 6
# The share of the budget kept for splitting the buckets where the samples show that the
# interpolation inside would be off (``curve.Misfit``).
_RESERVE = 0.1
# Time quantiles this close to an even spread (a share of the time parts' range) are taken
# as even: the samples stand for a few thousand members, so their quantiles wander by a few %.
_EVEN = 0.05
# Buckets touching at most this many points values are split at every value's floor.
_FEW = 6


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


def plan_bounds(
    samples: Sequence[Sequence[int | None]],
    shard_sizes: Sequence[int],
    *,
    exact_top: int,
    descending: bool,
    codec: ScoreCodec,
    max_bounds: int = MAX_BOUNDS,
    ranks: Sequence[Sequence[int]] | None = None,
    few: bool = True,
) -> Bounds:
    """Ascending boundaries (at most ``max_bounds``, at least 2) from every shard's scores at
    its sample ranks (``samples[j]`` for the shard of size ``shard_sizes[j]``, the sizes the
    ranks were asked with; the ranks are ``ranks[j]`` when given, else ``sample_ranks`` of
    the same total, size, ``exact_top`` and ``max_bounds``): rank-shaped below ``exact_top``
    (each bucket about 1 % of the rank at its top, or finer), on the points lattice of the
    samples, covering every possible score (the first at most any score, the last above any).
    ``few``: buckets of a few points values are split at their floors (``_split_few``); False
    plans as before that was done (the churn benchmark's reference)."""
    if max_bounds < 2:
        raise ValueError(f"max_bounds must be at least 2, got {max_bounds}")
    total = sum(shard_sizes)
    top = max(1, exact_top)
    knots = []
    sampled: list[int] = []
    # Each sample stands for the members of its shard from its rank to the next one asked:
    # the samples crowd near the top, and the time quantiles must be the whole board's (on an
    # ascending board the top is whoever got there first).
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
        knots.append(shard_knots(asked, scores, size, descending))
        for i, s in enumerate(scores):
            if s is not None:
                sampled.append(s)
                weights.append(float(asked[i + 1] - asked[i]) if i + 1 < len(scores) else 1.0)
    if not knots or total <= top:
        return Bounds((LOWEST, BEYOND))
    curve = summed(knots)
    lat = lattice(codec.points(s) for s in sampled)
    unit = codec.time_limit
    # The time parts seen: a window not yet over (or shorter than 2**T seconds) leaves the
    # rest of every points value empty, and members are not spread evenly over the rest.
    times = time_quantiles([s & (unit - 1) for s in sampled], weights) if unit > 1 else None
    if times and _even(times):
        # Spread evenly, as far as the samples can tell: their quantiles would only add noise.
        times = (times[0], times[-1])
    edges = (times[0], times[-1]) if times else (0, unit)
    # Every shard's last member is sampled, so the board's last member is the lowest sample
    # (descending) or the highest (ascending): both edges of the samples become boundaries,
    # so the last bucket does not reach to a sentinel (the one past the highest sample stays
    # in the same points value, or is the next value's floor, to keep to the lattice).
    high = max(sampled)
    past = high + 1
    if past >> codec.time_bits != high >> codec.time_bits:
        past = ((high >> codec.time_bits) + lat[1]) * unit
    extremes = (min(sampled), past)
    budget = max(2, max_bounds - int(_RESERVE * max_bounds)) if max_bounds >= 20 else max_bounds

    # Start from the ratio that fills the budget, coarsen until the edges of crowded points
    # values fit too, then refine between the last two tries to use what is left.
    def attempt(ratio: float) -> tuple[int, ...]:
        bounds = _place(curve, total, top, ratio, descending, codec, lat, edges, extremes)
        if few:
            bounds = _split_few(bounds, codec, lat)
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
        if len(best) > max_bounds:
            # A budget too small for even one bucket's edges: thin evenly, keeping both
            # sentinels (any subset of boundaries still counts every member exactly).
            inner = best[1:-1]
            keep = max_bounds - 2
            picked = {inner[i * len(inner) // keep] for i in range(keep)}
            return Bounds((LOWEST, *sorted(picked), BEYOND), times)
    if coarse != fine:
        for _ in range(_REFINE):
            mid = (fine + coarse) / 2
            tried = attempt(mid)
            if len(tried) <= budget:
                best, coarse = tried, mid
            else:
                fine = mid
    model = Misfit(curve, total, top, descending, codec.time_bits, lat, times)
    split = model.split(best, max_bounds - len(best))
    # The splits may leave a bucket of a few values again: their floors too, if they fit.
    fewer = _split_few(split, codec, lat) if few else split
    return Bounds(fewer if len(fewer) <= max_bounds else split, times)


def _split_few(bounds: tuple[int, ...], codec: ScoreCodec, lat: tuple[int, int]) -> tuple[int, ...]:
    """Each bucket that holds a few points values (``_FEW`` at most, two at least) split at
    their floors. There the estimator's density across values is least sure (the board's
    thin tails, where first matches land: one value may hold twenty times the next), and a
    score reached after the plan stands behind everyone on its value, at its floor's side of
    the value's bucket, not in the middle of the bucket beside it."""
    ref, step = lat
    unit = codec.time_limit
    out = set(bounds)
    for a, b in pairwise(bounds[1:-1]):
        pa, pb = a // unit, (b - 1) // unit  # the values the bucket [a, b) touches
        first = ref + -(-(pa - ref) // step) * step  # the lowest lattice value >= pa
        values = range(first, pb + 1, step)
        if 2 <= len(values) <= _FEW:
            out.update(v * unit for v in values if a < v * unit < b)
    return tuple(sorted(out))


def _even(times: tuple[int, ...]) -> bool:
    """The quantiles lie within ``_EVEN`` of an even spread over their range."""
    k = len(times) - 1
    span = times[-1] - times[0]
    return all(abs((t - times[0]) / span - i / k) <= _EVEN for i, t in enumerate(times))


def _place(
    curve: Cumulative,
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
