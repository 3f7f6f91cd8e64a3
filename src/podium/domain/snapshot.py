"""What the rank aggregator publishes of a split board: its exact merged top and histogram.

A snapshot is read by every API process about once a second, so it is plain JSON (ASCII:
member ids are escaped), with the top as two arrays rather than a list of pairs, and the
histogram in its own compact encoding inside it.

``as_of`` is the time of the oldest part it was merged from: the aggregator reuses a shard's
previous list for a few seconds when that shard does not answer, and then says so here.
"""

from __future__ import annotations

import base64
import json
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from podium.domain.changes import Changes
from podium.domain.histogram import Histogram

VERSION = 1
# Readers stop using a snapshot this long after it was published (its time to live in the
# snapshot store): the aggregator's publish sets it, and a reader passes over a snapshot
# older than one it used for at most this long (``service/ranks/snapshot.py``).
SNAPSHOT_TTL_S = 15.0


@dataclass(frozen=True, slots=True)
class Snapshot:
    as_of: float
    total: int  # members on the board, summed over the shards
    top: tuple[tuple[str, int], ...]  # the exact merged top, in board order
    descending: bool
    histogram: Histogram | None = None
    last: int | None = None  # the score at the very end of the board (its last row)
    # each shard's tallies of writes (domain/changes.py), read before the histogram's counts
    changes: Changes | None = None
    # (score, member) of the top, ascending: what a rank is counted against
    _ascending: list[tuple[int, str]] = field(init=False, repr=False, compare=False)
    _positions: dict[str, int] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rows = [(s, m) for m, s in self.top]
        if self.descending:
            rows.reverse()
        object.__setattr__(self, "_ascending", rows)
        object.__setattr__(self, "_positions", None)

    def position(self, member: str) -> int | None:
        """The member's 0-based place in the top, or None when it is not in it."""
        if self._positions is None:  # built on the first look-up: most snapshots get many
            object.__setattr__(self, "_positions", {m: i for i, (m, _) in enumerate(self.top)})
        assert self._positions is not None
        return self._positions.get(member)

    @property
    def whole(self) -> bool:
        """The top holds the whole board: every rank on it is exact."""
        return self.total <= len(self.top)

    def ahead(self, member: str, score: int) -> int | None:
        """How many of the top are strictly ahead of (member, score) in board order, when
        that places it inside the top (so, its exact 0-based rank as of the snapshot); None
        when it falls below the top."""
        probe = (score, member)
        if self.descending:
            n = len(self._ascending) - bisect_right(self._ascending, probe)
        else:
            n = bisect_left(self._ascending, probe)
        if n < len(self.top) or self.whole:
            return n
        return None

    def top_at_least(self, score: int) -> int:
        """How many rows of the top hold ``score`` or more (a bisection, not a scan)."""
        return len(self._ascending) - bisect_left(self._ascending, (score, ""))

    def encode(self) -> bytes:
        body = {
            "v": VERSION,
            "asOf": self.as_of,
            "total": self.total,
            "desc": self.descending,
            "members": [m for m, _ in self.top],
            "scores": [s for _, s in self.top],
            "last": self.last,
            "histogram": None
            if self.histogram is None
            else base64.b64encode(self.histogram.encode()).decode(),
        }
        if self.changes is not None:  # left out when none: a reader of before reads it too
            body["changes"] = self.changes.encode()
        return json.dumps(body, separators=(",", ":")).encode()

    @staticmethod
    def members_of(data: bytes) -> list[str]:
        """The ids a snapshot names (its top), read without decoding the rest: what a sweep
        for erased players looks at."""
        members = json.loads(data).get("members")
        return [m for m in members if isinstance(m, str)] if isinstance(members, list) else []

    @classmethod
    def decode(cls, data: bytes) -> Snapshot:
        body = json.loads(data)
        if body.get("v") != VERSION:
            raise ValueError(f"snapshot version {body.get('v')!r}, expected {VERSION}")
        hist = body["histogram"]
        return cls(
            as_of=float(body["asOf"]),
            total=int(body["total"]),
            top=tuple(zip(body["members"], body["scores"], strict=True)),
            descending=bool(body["desc"]),
            histogram=None if hist is None else Histogram.decode(base64.b64decode(hist)),
            last=body.get("last"),
            changes=None if body.get("changes") is None else Changes.decode(body["changes"]),
        )
