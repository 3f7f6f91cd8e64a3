"""What a rebuilt generation of a board window differs by from the live one, read just
before the switch (``service/upkeep/gapless.py``): member counts, the top rows, and a sample of
ranks.

Both generations took every write since the rebuild began, so on a healthy index they
agree but for the writes in flight while the two were read; a difference beyond that is
what the live one had lost (a failover's last writes) or held wrongly, and the switch
mends it. Pure: the reads are the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Row = tuple[str, int]


@dataclass(frozen=True)
class Difference:
    live_members: int
    new_members: int
    top: int  # how many top rows were compared (the longer of the two tops)
    top_moved: int  # places in the top where the two hold another member or score
    only_live_top: tuple[str, ...]  # in the live top, not in the new one
    only_new_top: tuple[str, ...]
    sampled: int
    ranks_moved: int  # sampled members whose rank or score differs
    largest_shift: int  # the largest difference of rank among them
    missing_live: int  # sampled members the live generation lacks
    missing_new: int  # sampled members the new generation lacks

    @property
    def same(self) -> bool:
        return (
            self.live_members == self.new_members
            and self.top_moved == 0
            and self.ranks_moved == 0
            and self.missing_live == 0
            and self.missing_new == 0
        )

    def lines(self) -> list[str]:
        """The difference as an operator reads it, one fact a line."""
        delta = self.new_members - self.live_members
        out = [f"members: live {self.live_members:,}, new {self.new_members:,} ({delta:+,})"]
        out.append(f"top {self.top:,}: {self.top_moved:,} places differ")
        if self.only_live_top:
            out.append(f"  only in the live top: {', '.join(self.only_live_top[:10])}")
        if self.only_new_top:
            out.append(f"  only in the new top: {', '.join(self.only_new_top[:10])}")
        out.append(
            f"sample of {self.sampled:,} ranks: {self.ranks_moved:,} differ (largest shift "
            f"{self.largest_shift:,}), {self.missing_live:,} missing in the live generation, "
            f"{self.missing_new:,} missing in the new one"
        )
        return out


def compare(
    live_members: int,
    new_members: int,
    live_top: Sequence[Row],
    new_top: Sequence[Row],
    sample: Sequence[str],
    live_places: Sequence[tuple[int, int] | None],
    new_places: Sequence[tuple[int, int] | None],
) -> Difference:
    """``live_places`` and ``new_places``: each sampled member's (rank, score) in each
    generation, or None where it is not on the board, in the order of ``sample``."""
    top = max(len(live_top), len(new_top))
    moved = sum(
        1
        for i in range(top)
        if (live_top[i] if i < len(live_top) else None)
        != (new_top[i] if i < len(new_top) else None)
    )
    live_set = {m for m, _ in live_top}
    new_set = {m for m, _ in new_top}
    ranks_moved = largest = missing_live = missing_new = 0
    for old, new in zip(live_places, new_places, strict=True):
        if old is None or new is None:
            missing_live += old is None and new is not None
            missing_new += new is None and old is not None
            continue
        if old != new:
            ranks_moved += 1
            largest = max(largest, abs(old[0] - new[0]))
    return Difference(
        live_members,
        new_members,
        top,
        moved,
        tuple(m for m, _ in live_top if m not in new_set),
        tuple(m for m, _ in new_top if m not in live_set),
        len(sample),
        ranks_moved,
        largest,
        missing_live,
        missing_new,
    )
