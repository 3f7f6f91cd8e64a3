"""Latencies and rates, recorded in bounded memory: a log-bucketed histogram (every value
within 1% of what it reports) and a count of events by second for the rates of the last few
seconds. Pure: times are given, never read from a clock here."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

# Relative precision of the histogram: a value v lands in the bucket (b^(i-1), b^i], whose
# upper edge is reported, at most 1% above v. Values are kept in microseconds, so that a
# millisecond is some hundred buckets up; a run of a day's latencies needs under 2,000.
_GROWTH = 1.01
_LOG_GROWTH = math.log(_GROWTH)


@dataclass
class Recorder:
    """Latencies in seconds; percentiles by nearest rank, each reported at most 1% above
    the true value and never above the largest recorded."""

    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = 0.0
    _buckets: dict[int, int] = field(default_factory=dict)

    def record(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        us = seconds * 1e6
        i = math.ceil(math.log(us) / _LOG_GROWTH) if us > 1 else 0
        self._buckets[i] = self._buckets.get(i, 0) + 1
        self.count += 1
        self.total += seconds
        self.low = min(self.low, seconds)
        self.high = max(self.high, seconds)

    def merge(self, other: Recorder) -> None:
        for i, n in other._buckets.items():
            self._buckets[i] = self._buckets.get(i, 0) + n
        self.count += other.count
        self.total += other.total
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile (0 < q <= 100) in seconds: the smallest recorded value
        that at least q% of the values are at or below; None with nothing recorded."""
        if not 0 < q <= 100:
            raise ValueError(f"q: expected above 0 and at most 100, got {q}")
        if self.count == 0:
            return None
        # ceil, with a hair off for the float error of e.g. 99.9% of 1000 (999.0000000001).
        rank = max(1, math.ceil(self.count * q / 100 - 1e-9))
        seen = 0
        for i in sorted(self._buckets):
            seen += self._buckets[i]
            if seen >= rank:
                edge = _GROWTH**i / 1e6 if i > 0 else 1e-6
                return min(max(edge, self.low), self.high)
        return self.high  # not reached: the buckets hold every value


@dataclass
class Rate:
    """Events counted by whole second of the run; ``per_s`` over the last ``window`` full
    seconds, so that the live figure moves with the load and does not jitter."""

    window: int = 5
    _seconds: deque[list[int]] = field(default_factory=deque)  # [second, count], oldest first

    def add(self, at: float, n: int = 1) -> None:
        second = int(at)
        if self._seconds and self._seconds[-1][0] == second:
            self._seconds[-1][1] += n
        elif not self._seconds or self._seconds[-1][0] < second:
            self._seconds.append([second, n])
        else:  # late (a task finishing out of order): into its own second, if still held
            for s in reversed(self._seconds):
                if s[0] <= second:
                    if s[0] == second:
                        s[1] += n
                    break
        while self._seconds and self._seconds[0][0] < second - self.window - 1:
            self._seconds.popleft()

    def per_s(self, now: float) -> float:
        """Events a second over the last ``window`` full seconds before ``now`` (fewer at
        the start of a run: those there have been)."""
        current = int(now)
        span = min(self.window, current)
        if span <= 0:
            return 0.0
        total = sum(n for s, n in self._seconds if current - span <= s < current)
        return total / span
