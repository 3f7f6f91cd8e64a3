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

Where the moves cannot tell, every bucket is counted: more than the list keeps; ``n`` went
back (the shard lost its data); or the shard's ``GENERATION`` is another than at the last
counts, which a rebuild that replaced the board whole moves (and appends a mark of), and so
does the mender where a shard's node took over after a failover or lost its data
(``ShardIndex.renew_counts``, before the log is applied again): that node may lack the last
writes of the old one, which none of its moves describes, and its ``n`` may have climbed
past the held one meanwhile. An erasure's removal is a move like any other
(``index/redis/lua/forget.lua``). And one bucket in ``ROTATE`` is counted every cycle
whatever the moves say, so a count some change left wrong unrecorded (a failover's lost
writes before the mender noticed it, within ``[index] watch_s``) is mended within
``ROTATE`` cycles even so.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from podium.domain.boards import BoardSpec
from podium.domain.windows import Window

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


def counted(boards: Sequence[BoardSpec], now: float) -> list[tuple[BoardSpec, Window]]:
    """The board windows whose counts an aggregator holds from cycle to cycle (and readers
    widen from its snapshots): each board's latest window to begin (on a schedule between
    two windows, the one that closed) and the one before it, each until it freezes (late
    results still land there). Boards split into groups are left out: their windows are not
    known ahead, and their reads count on the shards."""
    out: list[tuple[BoardSpec, Window]] = []
    for spec in boards:
        if spec.group_by is not None:
            continue
        latest = spec.rule.latest(int(now))
        for w in (latest, spec.rule.before(latest) if latest is not None else None):
            if w is not None and (w.end is None or now < w.end + spec.freeze_after_s):
                out.append((spec, w))
    return out
