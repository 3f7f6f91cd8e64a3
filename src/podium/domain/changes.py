"""How far a board moved since the aggregator counted it: what keeps an estimated rank's
interval true at the moment of the answer, not only as of the counts (invariant 6 of
docs/architecture.md).

A histogram's ``[low, high]`` bounds a rank among the members it counted. By the time a
reader uses it (a cycle and a hold later, about 2 s), other members have overtaken the
reader, new ones have entered ahead of it, and on boards whose totals can fall some have
dropped behind it. Every write that changes a member's score is tallied, in the same atomic
step as the write itself (write.lua, ``index/memory/board.py``), under the *bands* of score
it touched; the aggregator reads each shard's tallies before it counts, and a reader reads
them again at the time of its answer. A member can only have changed sides of a score ``s``
by a write that moved it across ``s``, so through ``band(s)``; or by entering or leaving on
``s``'s side. So the difference of the tallies bounds how many more (and fewer) members are
ahead of ``s`` than the counts say, whatever happened inside the bands.

The tallies of one board window on one shard, by field:

- ``+b``: writes whose score rose, for each band ``b`` from the old score's to the new one's;
- ``-b``: writes whose score fell, for each band from the new score's to the old one's;
- ``e<o>``: members that entered with a score of octave ``o`` (``band // SUB``);
- ``x<o>``: members that left (a versioned removal, a ban) from a score of octave ``o``;
- ``n``: every write that changed a score, so that a reset tally (a Redis that lost its
  data) is seen, and the estimate is counted afresh instead;
- ``g``: the generation of the counts: moved by one each time a rebuild replaced the board
  window's sorted set whole (swap.lua, switch.lua), which moves members no band tallies, and
  by a bump drawn below ``RENEWAL`` where the mender marks a shard's windows anew (a node
  that took over after a failover, or lost its data: it may lack writes no tally of its
  own describes, renew.lua); either way the estimate is counted afresh too.

Bands are monotone in the score: ``SUB`` of them per doubling, on the score as a whole
(points and time together), so the same function runs in Lua and here without the board's
codec: ``math.frexp`` in both, exact for every score up to 2^53.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from podium.domain.histogram import Estimate

SUB = 8  # bands per doubling of the score (write.lua's SUB)
WRITES = "n"
GENERATION = "g"
# A shard's windows marked anew (``ShardIndex.renew_counts``) move ``g`` by a bump drawn from
# 1 to this, not by one: the node that took over may lack an earlier move of ``g`` (a swap,
# or a mark, among its last lost writes), and one more would bring back the very ``g`` the
# aggregator and readers hold, which says nothing changed.
RENEWAL = 1 << 30


def band(score: int) -> int:
    """The band of a score: 0 for every score below 1 (negative totals share it), else
    ``SUB`` per doubling; never lower for a higher score."""
    if score < 1:
        return 0
    m, e = math.frexp(score)  # score = m * 2**e, 0.5 <= m < 1
    return e * SUB + int((2.0 * m - 1.0) * SUB)


def octave(score: int) -> int:
    return band(score) // SUB


def tallies(old: int | None, new: int | None) -> list[str]:
    """The fields one write bumps by one: a member from ``old`` to ``new`` (None: not on the
    board before, or not after). As write.lua and ban.lua bump them."""
    if old == new:
        return []
    if old is None:
        assert new is not None
        return [WRITES, f"e{octave(new)}"]
    if new is None:
        return [WRITES, f"x{octave(old)}"]
    sign, lo, hi = ("+", old, new) if new > old else ("-", new, old)
    return [WRITES, *(f"{sign}{b}" for b in range(band(lo), band(hi) + 1))]


@dataclass(frozen=True, slots=True)
class Changes:
    """The tallies of a board window: each shard's writes in all (``n``), by shard position,
    and every field summed over the shards."""

    writes: tuple[int, ...]
    fields: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def summed(cls, per_shard: Sequence[Mapping[str, int]]) -> Changes:
        total: dict[str, int] = {}
        for tally in per_shard:
            for k, v in tally.items():
                if k != WRITES:
                    total[k] = total.get(k, 0) + int(v)
        return cls(tuple(int(t.get(WRITES, 0)) for t in per_shard), total)

    def since(self, earlier: Changes) -> Changes | None:
        """What changed between ``earlier`` and these tallies; None when that cannot be told
        (another number of shards, a shard's tally went back: its data was lost, or a
        rebuild replaced a shard's board, or the mender marked a shard's counts anew)."""
        if len(self.writes) != len(earlier.writes):
            return None
        if any(a < b for a, b in zip(self.writes, earlier.writes, strict=True)):
            return None
        if self.fields.get(GENERATION, 0) != earlier.fields.get(GENERATION, 0):
            return None  # a board replaced, or a shard marked anew: no band tells what moved
        diff = {}
        for k, v in self.fields.items():
            d = v - earlier.fields.get(k, 0)
            if d < 0:
                return None
            if d:
                diff[k] = d
        if any(k not in self.fields for k in earlier.fields):
            return None
        writes = tuple(a - b for a, b in zip(self.writes, earlier.writes, strict=True))
        return Changes(writes, diff)

    def moves(self, score: int, *, descending: bool) -> tuple[int, int]:
        """At most how many fewer, and how many more, members can be ahead of ``score`` in
        board order than before these changes (both never negative)."""
        b, o = band(score), octave(score)
        rose = self.fields.get(f"+{b}", 0)
        fell = self.fields.get(f"-{b}", 0)
        entered = left = 0
        for k, v in self.fields.items():
            kind = k[0]
            if kind in "ex":
                at = int(k[1:])
                if at >= o if descending else at <= o:  # on the side ahead of the score
                    if kind == "e":
                        entered += v
                    else:
                        left += v
        if descending:  # ahead is a higher score: a rise may overtake, a fall drop behind
            return fell + left, rose + entered
        return rose + left, fell + entered

    def encode(self) -> dict[str, object]:
        return {"n": list(self.writes), "f": dict(self.fields)}

    @classmethod
    def decode(cls, body: Mapping[str, object]) -> Changes:
        writes = body["n"]
        fields = body["f"]
        if not isinstance(writes, list) or not isinstance(fields, dict):
            raise ValueError("malformed changes")
        return cls(tuple(int(w) for w in writes), {str(k): int(v) for k, v in fields.items()})


def widened(est: Estimate, fewer: int, more: int) -> Estimate:
    """An estimate's interval as of the moment the tallies were read: ``fewer`` members less
    ahead at most, ``more`` more at most; the estimate itself stays inside it."""
    low = max(1, est.low - fewer)
    high = est.high + more
    return Estimate(min(high, max(low, est.rank)), low, high)
