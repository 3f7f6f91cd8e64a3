"""How the aggregator keeps a shard's histogram counts from one cycle to the next without
counting every bucket again: what lets it count a board of 10 million players at 8,000
boundaries within its period (issue 34). Counting every bucket costs one ``ZCOUNT`` each
on every shard, about 0.5 s of Redis a cycle on 16 shards however little the board moved.

Every write that changes a member's score, in the same atomic step, bumps the shard's
tally of writes ``n`` (``domain/changes.py``) and appends the move, old score and new, to
the shard's list of moves (write.lua, ban.lua; ``index/memory/board.py``), which keeps at
least the last ``MOVES_KEPT``. The aggregator reads, in one atomic step, ``n``, the moves
since the ``n`` of its last counts, and the counts of a few buckets; the held counts plus
those moves are then the counts at this ``n``, exactly, and need no ``ZCOUNT``.

Where the moves cannot tell (more than the list keeps, ``n`` went back: the shard lost its
data, or a rebuild replaced the board whole, which appends a ``GENERATION`` mark), every
bucket is counted. And one bucket in ``ROTATE`` is counted every cycle whatever the moves
say, so a change no move recorded (an erasure's removal, a promoted replica that lacked
the last writes until the mender replays them) leaves no count wrong for more than
``ROTATE`` cycles.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

MOVES_KEPT = 2048  # each shard keeps at least this many of its last moves (write.lua)
ROTATE = 16  # every bucket is counted at least once in this many cycles

# (old score, new score), None where the member was not on the board before, or is not after
Move = tuple[int | None, int | None]


def applied(
    counts: Sequence[int], bounds: Sequence[int], moves: Sequence[Move]
) -> list[int] | None:
    """``counts`` (of the buckets ``[bounds[i], bounds[i+1])``) after ``moves``; None when they
    cannot be what was counted (a bucket would fall below zero): count them all instead."""
    out = list(counts)
    if len(bounds) < 2:  # no buckets
        return out
    lo, hi = bounds[0], bounds[-1]
    for old, new in moves:
        # lo <= s < hi: bucket bisect_right - 1, from 0 to len(counts) - 1
        if old is not None and lo <= old < hi:
            i = bisect_right(bounds, old) - 1
            out[i] -= 1
            if out[i] < 0:
                return None
        if new is not None and lo <= new < hi:
            out[bisect_right(bounds, new) - 1] += 1
    return out


def rotating(buckets: int, turn: int) -> list[int]:
    """The buckets counted in cycle ``turn`` whatever the moves say: one in ``ROTATE``."""
    return list(range(turn % ROTATE, buckets, ROTATE))


def runs(buckets: Sequence[int]) -> list[tuple[int, int]]:
    """Ascending bucket positions as runs of neighbours, ``(first, last + 1)`` each: one
    stretch of bounds per run for the shard's count."""
    out: list[tuple[int, int]] = []
    for i in buckets:
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out
