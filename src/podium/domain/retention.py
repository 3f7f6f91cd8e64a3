"""How long the store keeps results, and which of them may leave it: pure rules, no I/O.

Results leave the store by UTC day of their ``endedAt`` (``workers/pruner.py``), a whole day
at a time once all of it is older than the retention. ``endedAt`` rather than the time of
recording, because the same bound refuses results (``Matches``): a day past the retention
takes no new result, so its archive file, once written, is final (a result recorded in the
instant the pruner passed is caught by its next pass, which rewrites the day with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

DAY_S = 86_400

# (ended_at, player_id, match_id): the order results leave the store and sit in a day file,
# so that a day file and the store's remaining rows of that day merge in one pass.
ResultKey = tuple[int, str, str]


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A result row as the store holds it, every column: what a day file keeps of it."""

    player_id: str
    match_id: str
    key_id: str
    mode: str
    ended_at: int
    duration_s: int
    points: int
    recorded_at: float
    flag: str | None = None
    metadata: str | None = None  # canonical JSON (domain/metadata.py), as stored

    @property
    def key(self) -> ResultKey:
        return (self.ended_at, self.player_id, self.match_id)


def oldest_accepted(now: float, keep_days: int) -> int | None:
    """The earliest ``endedAt`` the store still takes (older is refused, and may have been
    pruned); None when results are kept forever (``keep_days = 0``)."""
    if keep_days <= 0:
        return None
    return int(now) - keep_days * DAY_S


def day_start(t: int) -> int:
    return t - t % DAY_S


def day_id(start: int) -> str:
    """The UTC date of a day's first second: ``2026-10-28``."""
    return datetime.fromtimestamp(start, UTC).date().isoformat()


def parse_day(text: str) -> int:
    """The first second of a UTC date written ``YYYY-MM-DD`` (ValueError otherwise)."""
    d = date.fromisoformat(text)
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp())


def prunable(oldest_ended: int | None, before: int | None) -> tuple[int, int] | None:
    """The first day to prune, (start, end), given the oldest ``endedAt`` stored: the day
    holding it, if the whole day ends at or before ``before``; None when there is none."""
    if oldest_ended is None or before is None:
        return None
    start = day_start(oldest_ended)
    end = start + DAY_S
    return (start, end) if end <= before else None


def hand_limit(now: float, keep_days: int) -> int | None:
    """The latest ``--before`` a hand-run prune may take: the start of the first day that is
    not wholly past the retention. A result pruned any later could be sent again (a late
    retry) and be accepted, since its ``endedAt`` would still be within the retention."""
    oldest = oldest_accepted(now, keep_days)
    return None if oldest is None else day_start(oldest)
