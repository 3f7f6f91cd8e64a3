"""Estimated ranks below the exact top of a split board, from a rank-shaped histogram.

The aggregator counts, on every shard, the members between ascending boundaries
(``bounds.plan_bounds``) and sums them here. A score then falls in one bucket, and the counts
alone bound its rank: every member in a bucket ahead of it in board order is ahead, every
member in a bucket behind it is behind, so the true rank, as of the counts, lies in
``[low, high]`` whatever happens inside the bucket. Inside, the estimate interpolates, on the
points lattice the boundaries lie on (``bounds.lattice``): a bucket of several points values
shares its members over the *occupied* values, each value's members spread over the time
parts the planner saw (the low bits of the score, ``Bounds.times``); a bucket inside one
value, over its time parts alone. Over a bucket of several values the density is taken as
linear, from the neighbouring buckets' densities, as a rank-shaped board's changes steadily.
Only the estimate depends on these models: ``low`` and ``high`` come from the counts alone.

A bucket in the gap between two points values (below a value's newest time part the planner
saw, on a descending board) holds only members that reached that value after the plan; with
``newest``, the time part of a score reached when the counts were taken, a score there stands
among them by its time: one reached after the counts (a player right after a match) behind
them all.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from podium.domain.bounds import MAX_BOUNDS, plan_bounds, sample_ranks
from podium.domain.codec import ScoreCodec
from podium.domain.lattice import Bounds, coordinate, lattice

__all__ = ["MAX_BOUNDS", "Bounds", "Estimate", "Histogram", "plan_bounds", "sample_ranks"]

_MAGIC = b"PH1"
_DESCENDING = 1
_TIMES = 2
_NEWEST = 4


@dataclass(frozen=True, slots=True)
class Estimate:
    rank: int  # 1-based estimated rank
    low: int  # 1-based, low <= true rank (counted edge)
    high: int  # true rank <= high (counted edge)


@dataclass(frozen=True, slots=True)
class Histogram:
    """Members per bucket ``[bounds[i], bounds[i+1])`` of score, summed over shards."""

    bounds: tuple[int, ...]  # ascending
    counts: tuple[int, ...]  # summed over shards; len(bounds) - 1
    descending: bool
    # Quantiles of the time parts members hold, when known (``Bounds.times``): the
    # interpolation inside a points value spreads its members as these say.
    times: tuple[int, ...] | None = None
    # The time part of a score reached when the counts were taken (codec.encode(0, s) for
    # the second s of the window they were taken at), when known.
    newest: int | None = None
    # Members with a score below bounds[i], for each i (len(bounds) of them).
    _below: tuple[int, ...] = field(init=False, repr=False, compare=False)
    # (time bits) -> (ref, step) of the boundaries' points lattice, filled on first use.
    _lattices: dict[int, tuple[int, int, tuple[float, ...]]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if len(self.bounds) < 2:
            raise ValueError("a histogram needs at least two boundaries")
        if len(self.counts) != len(self.bounds) - 1:
            raise ValueError(
                f"{len(self.counts)} counts for {len(self.bounds) - 1} buckets of the bounds"
            )
        if any(b >= a for b, a in pairwise(self.bounds)):
            raise ValueError("boundaries must be strictly ascending")
        if any(c < 0 for c in self.counts):
            raise ValueError("counts must not be negative")
        if self.times is not None and (
            len(self.times) < 2
            or self.times[0] < 0
            or self.times[-1] <= self.times[0]
            or any(b < a for a, b in pairwise(self.times))
        ):
            raise ValueError(f"time quantiles must ascend from 0 or more, got {self.times}")
        below = [0]
        for c in self.counts:
            below.append(below[-1] + c)
        object.__setattr__(self, "_below", tuple(below))

    @classmethod
    def summed(
        cls,
        bounds: Sequence[int],
        per_shard_counts: Sequence[Sequence[int]],
        *,
        descending: bool,
        times: tuple[int, ...] | None = None,
        newest: int | None = None,
    ) -> Histogram:
        """One histogram from every shard's ``count_between(bounds)``; ``times`` defaults to
        the time parts the planner saw, when ``bounds`` is what ``plan_bounds`` returned."""
        if times is None and isinstance(bounds, Bounds):
            times = bounds.times
        n = len(bounds) - 1
        totals = [0] * max(0, n)
        for counts in per_shard_counts:
            if len(counts) != n:
                raise ValueError(f"a shard gave {len(counts)} counts for {n} buckets")
            for i, c in enumerate(counts):
                totals[i] += c
        return cls(tuple(bounds), tuple(totals), descending, times, newest)

    @property
    def total(self) -> int:
        return self._below[-1]

    def estimate(self, score: int, codec: ScoreCodec, *, counted: bool = True) -> Estimate:
        """The 1-based rank of a member with this score, as of the counts. ``counted``: the
        member is among the counts (read back from the board they were taken on); a player
        whose score changed since is not, and may stand one place lower at most."""
        bounds = self.bounds
        i = bisect_right(bounds, score) - 1
        total = self.total
        if i < 0 or i >= len(self.counts):
            # Outside every bucket, so not among the counts: everyone counted is on one side.
            first = (i < 0) != self.descending
            exact = 1 if first else total + 1
            return Estimate(exact, exact, exact)
        n = self.counts[i]
        below = self._below[i]
        ahead = total - below - n if self.descending else below
        low = ahead + 1
        high = ahead + n + (0 if counted else 1)
        if high <= low:
            return Estimate(low, low, max(low, high))
        frac = self._fraction(i, score, codec.time_bits)  # of the bucket's members below
        inside = (1.0 - frac) * n if self.descending else frac * n
        rank = min(high, max(low, low + int(inside)))
        return Estimate(rank, low, high)

    def _fraction(self, i: int, score: int, time_bits: int) -> float:
        """Where the score stands in bucket i, as the share of the bucket's members below it,
        on the lattice coordinate (the index of the occupied points value plus the time
        part, each value's members spread over time as the time quantiles say). The density
        inside a bucket is taken as linear, from the densities of its neighbours (a
        rank-shaped board's density changes steadily over a bucket's width), and uniform when
        a neighbour is empty or a sentinel, or the bucket lies inside one points value."""
        lat = self._lattices.get(time_bits)
        if lat is None:
            ref, step = lattice(b >> time_bits for b in self.bounds[1:-1])
            coords = tuple(coordinate(b, time_bits, ref, step, self.times) for b in self.bounds)
            lat = self._lattices[time_bits] = (ref, step, coords)
        ref, step, coords = lat
        lo, hi = coords[i], coords[i + 1]
        if hi <= lo:
            return self._in_gap(i, score, time_bits)
        at = coordinate(score, time_bits, ref, step, self.times)
        t = min(1.0, max(0.0, (at - lo) / (hi - lo)))
        width = hi - lo
        if width < 1:  # inside one points value
            return t
        density = self.counts[i] / width
        e0 = self._edge_density(i - 1, density, width, coords)
        e1 = self._edge_density(i + 1, density, width, coords)
        return (e0 * t + (e1 - e0) * t * t / 2) / ((e0 + e1) / 2)

    def _in_gap(self, i: int, score: int, time_bits: int) -> float:
        """Where a score stands in a bucket between two points values: its members reached
        the value beside it after the plan, so they lie in time between the value's newest
        time part the plan saw (the bucket's edge in that value) and ``newest``; the middle
        when that is not known."""
        edge = self.bounds[i + 1] if self.descending else self.bounds[i]
        mask = (1 << time_bits) - 1
        if self.newest is None or score >> time_bits != edge >> time_bits:
            return 0.5
        t, seen = score & mask, edge & mask
        a, b = (self.newest, seen) if self.descending else (seen, self.newest)
        if b <= a:
            return 0.5
        return min(1.0, max(0.0, (t - a) / (b - a)))

    def _edge_density(
        self, j: int, density: float, width: float, coords: tuple[float, ...]
    ) -> float:
        """The density at the edge bucket i shares with its neighbour j, interpolated between
        the two buckets' centres; bucket i's own when j is empty, a sentinel or no bucket."""
        if j < 1 or j >= len(self.counts) - 1 or self.counts[j] == 0:
            return density
        w = coords[j + 1] - coords[j]
        if w < 1:
            return density
        return (density * w + self.counts[j] / w * width) / (w + width)

    def top_percent(self, rank: int) -> int:
        """The "topPercent" figure: the share of the board at or above this rank, rounded up
        to a whole percent, so 1 means the top 1 % (never 0: nobody is in the top 0 %) and
        100 the last place; ``ceil(100 * rank / total)`` within [1, 100]."""
        if self.total <= 0:
            return 100
        return min(100, max(1, math.ceil(100 * rank / self.total)))

    def encode(self) -> bytes:
        """Compact bytes for the published snapshot: a tag, the order, the boundaries as
        the first one and their gaps, the counts, each a LEB128 varint (zigzag where signed)."""
        out = bytearray(_MAGIC)
        flags = _DESCENDING if self.descending else 0
        flags |= (_TIMES if self.times else 0) | (_NEWEST if self.newest is not None else 0)
        out.append(flags)
        if self.newest is not None:
            _varint(out, self.newest)
        if self.times:
            _varint(out, len(self.times))
            _varint(out, self.times[0])
            for a, b in pairwise(self.times):
                _varint(out, b - a)
        _varint(out, len(self.bounds))
        first = self.bounds[0]
        _varint(out, (first << 1) if first >= 0 else ((-first << 1) - 1))
        for a, b in pairwise(self.bounds):
            _varint(out, b - a)
        for c in self.counts:
            _varint(out, c)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> Histogram:
        if data[: len(_MAGIC)] != _MAGIC or len(data) < len(_MAGIC) + 1:
            raise ValueError("not an encoded histogram")
        flags = data[len(_MAGIC)]
        if flags & ~(_DESCENDING | _TIMES | _NEWEST):
            raise ValueError(f"unknown histogram flags {flags}")
        pos = len(_MAGIC) + 1
        newest = None
        if flags & _NEWEST:
            newest, pos = _read(data, pos)
        times = None
        if flags & _TIMES:
            k, pos = _read(data, pos)
            first, pos = _read(data, pos)
            parts = [first]
            for _ in range(k - 1):
                gap, pos = _read(data, pos)
                parts.append(parts[-1] + gap)
            times = tuple(parts)
        n, pos = _read(data, pos)
        z, pos = _read(data, pos)
        bounds = [(z >> 1) if not z & 1 else -((z + 1) >> 1)]
        for _ in range(n - 1):
            gap, pos = _read(data, pos)
            bounds.append(bounds[-1] + gap)
        counts = []
        for _ in range(n - 1):
            c, pos = _read(data, pos)
            counts.append(c)
        if pos != len(data):
            raise ValueError("trailing bytes after an encoded histogram")
        return cls(tuple(bounds), tuple(counts), bool(flags & _DESCENDING), times, newest)


def _varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated histogram")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
