"""Score packing (docs/architecture.md §2): points and the time they were reached in one
53-bit integer.

A Redis score is a double, exact for integers up to 2**53. We pack ``points`` into the high
bits and the second the points were reached into the low ``T`` bits. On descending boards the
time is inverted so that whoever got there first has the larger score; on ascending boards the
time is stored as is so that whoever got there first has the smaller one. Anything that does
not fit is refused loudly: a silently wrapped value would corrupt the order around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_BITS = 53


class EncodingError(ValueError):
    """Points or time that do not fit the board's score layout."""


def time_bits_for(window_seconds: int | None) -> int:
    """The number of low bits needed to hold any second of a window of this length.

    ``None`` (all-time boards, shared-rank boards) means the time is not packed at all.
    """
    if window_seconds is None:
        return 0
    if window_seconds <= 0:
        raise EncodingError(f"window length must be positive, got {window_seconds}")
    return max(1, (window_seconds - 1).bit_length())


@dataclass(frozen=True, slots=True)
class ScoreCodec:
    """Packs and unpacks one board's scores. ``time_bits == 0`` means points alone."""

    time_bits: int
    descending: bool = True
    # |points| must stay strictly below ``points_limit``; ``time_limit`` is 2^T. Computed
    # once: ``encode`` runs for every entry of a rebuild.
    points_limit: int = field(init=False, repr=False, compare=False)
    time_limit: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.time_bits < MAX_BITS:
            raise EncodingError(f"time bits must be in [0, {MAX_BITS}), got {self.time_bits}")
        object.__setattr__(self, "points_limit", 1 << (MAX_BITS - self.time_bits))
        object.__setattr__(self, "time_limit", 1 << self.time_bits)

    def encode(self, points: int, seconds_into_window: int = 0) -> int:
        if not -self.points_limit < points < self.points_limit:
            raise EncodingError(
                f"points {points} do not fit in {MAX_BITS - self.time_bits} bits "
                f"(|points| < {self.points_limit})"
            )
        if self.time_bits == 0:
            return points
        if not 0 <= seconds_into_window < self.time_limit:
            raise EncodingError(
                f"time {seconds_into_window}s does not fit in {self.time_bits} bits "
                f"(0 <= t < {self.time_limit})"
            )
        t = (self.time_limit - 1 - seconds_into_window) if self.descending else seconds_into_window
        score = points * self.time_limit + t
        # Negative points keep their order because the time part is always non-negative and
        # smaller than one step of points; the magnitude check above keeps us under 2**53.
        if abs(score) >= 1 << MAX_BITS:
            raise EncodingError(f"score {score} exceeds 2**{MAX_BITS}")
        return score

    def floor(self, points: int) -> int:
        """The smallest score holding ``points``: every score with these points lies in
        ``[floor(points), floor(points + 1))``, whatever the time part."""
        return points * self.time_limit

    def points(self, score: int) -> int:
        """The points packed in a score (floor division keeps negative points right)."""
        if self.time_bits == 0:
            return score
        return score >> self.time_bits

    def seconds(self, score: int) -> int | None:
        if self.time_bits == 0:
            return None
        t = score & (self.time_limit - 1)
        return (self.time_limit - 1 - t) if self.descending else t
