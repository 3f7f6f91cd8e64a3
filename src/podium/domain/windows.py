"""Windows: which period a result counts for, and the ids used in URLs and keys.

Ids (docs/architecture.md §3.1): a season ``S1``, ``S2``, ... counted from
``season_start``; a month ``2026-11``; an ISO week ``2026-W44``; a UTC day ``2026-10-28``;
all-time ``all``; a scheduled window (a cron schedule's start, ``duration`` long) its start
in ISO 8601's basic form, ``20261204T1800``. Every function here works in whole UTC seconds
since the epoch so that every backend agrees.

Calendar windows follow one another without a gap; scheduled ones may leave time between
them, when no window is open: ``window_at`` is None there, ``latest`` is the one that
closed, and ``before`` steps from a window to the one before it either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum

from podium.domain import schedule
from podium.domain.validation import COUNTRY_RE

DAY = 86_400
WEEK = 7 * DAY


class WindowKind(StrEnum):
    SEASON = "season"
    MONTH = "month"
    WEEK = "week"
    DAY = "day"
    ALL = "all"
    SCHEDULE = "schedule"


class WindowError(ValueError):
    """A window id that does not name a window of this kind."""


@dataclass(frozen=True, slots=True)
class Window:
    """One concrete window: ``[start, end)`` in epoch seconds; ``end`` is None for all-time."""

    id: str
    start: int
    end: int | None

    def contains(self, t: int) -> bool:
        return self.start <= t and (self.end is None or t < self.end)


ALL_TIME = Window("all", 0, None)

SCHEDULED_ID = "%Y%m%dT%H%M"  # a scheduled window's id: its start, ISO 8601's basic form

INDEX_TTL_AFTER_CLOSE = 7 * DAY  # a closed window's index key lives this long, then expires


def index_expiry(window: Window) -> int | None:
    """When a window's rank index key may expire (never for all-time)."""
    return None if window.end is None else window.end + INDEX_TTL_AFTER_CLOSE


def indexed_window(rule: WindowRule, window_id: str, now: float) -> Window | None:
    """The window a stored id names, while its rank index key still exists; None for the
    id of a window of an older configuration of the board, or one whose key has expired."""
    try:
        w = parse_window(rule, window_id)
    except WindowError:
        return None
    exp = index_expiry(w)
    return w if exp is None or exp > now else None


@dataclass(frozen=True, slots=True)
class WindowRule:
    """How one board cuts time into windows."""

    kind: WindowKind
    season_start: int | None = None  # epoch seconds, seasons only
    season_weeks: int = 13
    schedule: str | None = None  # a cron expression (UTC), scheduled windows only
    duration: int | None = None  # seconds, scheduled windows only

    @property
    def max_length(self) -> int | None:
        """The longest window of this kind, in seconds (None for all-time)."""
        match self.kind:
            case WindowKind.DAY:
                return DAY
            case WindowKind.WEEK:
                return WEEK
            case WindowKind.MONTH:
                return 31 * DAY
            case WindowKind.SEASON:
                return self.season_weeks * WEEK
            case WindowKind.SCHEDULE:
                return self.duration
            case WindowKind.ALL:
                return None

    def window_at(self, t: int) -> Window | None:
        """The window holding second ``t``; None before the first season, and on a schedule
        between two windows."""
        match self.kind:
            case WindowKind.ALL:
                return ALL_TIME
            case WindowKind.DAY:
                start = t - t % DAY
                return Window(_utc(start).strftime("%Y-%m-%d"), start, start + DAY)
            case WindowKind.WEEK:
                d = _utc(t).date()
                monday = d - timedelta(days=d.weekday())
                start = _epoch(monday)
                year, week, _ = d.isocalendar()
                return Window(f"{year}-W{week:02d}", start, start + WEEK)
            case WindowKind.MONTH:
                d = _utc(t).date()
                first = d.replace(day=1)
                nxt = (first + timedelta(days=32)).replace(day=1)
                return Window(f"{d.year}-{d.month:02d}", _epoch(first), _epoch(nxt))
            case WindowKind.SEASON:
                assert self.season_start is not None
                if t < self.season_start:
                    return None
                length = self.season_weeks * WEEK
                n = (t - self.season_start) // length
                start = self.season_start + n * length
                return Window(f"S{n + 1}", start, start + length)
            case WindowKind.SCHEDULE:
                w = self.latest(t)
                return w if w is not None and w.contains(t) else None

    def latest(self, t: int) -> Window | None:
        """The window that began last at or before ``t``: the open one, or on a schedule
        between two windows the one that closed; None before the first season."""
        if self.kind is not WindowKind.SCHEDULE:
            return self.window_at(t)
        assert self.schedule is not None and self.duration is not None
        start = schedule.last_start(self.schedule, t)
        if start is None:
            return None
        return Window(_utc(start).strftime(SCHEDULED_ID), start, start + self.duration)

    def before(self, window: Window) -> Window | None:
        """The window before ``window``; None for all-time and before the first season."""
        if window.end is None:
            return None
        return self.latest(window.start - 1)

    def next_start(self, t: int) -> int | None:
        """When the first window after the one open at ``t`` starts (the next one to open,
        on a schedule between windows); None for all-time."""
        match self.kind:
            case WindowKind.ALL:
                return None
            case WindowKind.SCHEDULE:
                assert self.schedule is not None
                return schedule.next_start(self.schedule, t)
            case WindowKind.SEASON:
                assert self.season_start is not None
                if t < self.season_start:
                    return self.season_start
        w = self.window_at(t)
        assert w is not None and w.end is not None
        return w.end

    def parse(self, window_id: str) -> Window:
        """The window named by ``window_id``; WindowError if it is not one of this kind."""
        w: Window | None = None
        try:
            match self.kind:
                case WindowKind.ALL:
                    w = ALL_TIME if window_id == "all" else None
                case WindowKind.DAY:
                    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", window_id):
                        w = self.window_at(_epoch(date.fromisoformat(window_id)))
                case WindowKind.WEEK:
                    m = re.fullmatch(r"(\d{4})-W(\d{2})", window_id)
                    if m:
                        monday = date.fromisocalendar(int(m[1]), int(m[2]), 1)
                        w = self.window_at(_epoch(monday))
                case WindowKind.MONTH:
                    m = re.fullmatch(r"(\d{4})-(\d{2})", window_id)
                    if m:
                        w = self.window_at(_epoch(date(int(m[1]), int(m[2]), 1)))
                case WindowKind.SEASON:
                    m = re.fullmatch(r"S([1-9]\d{0,5})", window_id)
                    if m and self.season_start is not None:
                        length = self.season_weeks * WEEK
                        w = self.window_at(self.season_start + (int(m[1]) - 1) * length)
                case WindowKind.SCHEDULE:
                    if re.fullmatch(r"\d{8}T\d{4}", window_id):
                        start = datetime.strptime(window_id, SCHEDULED_ID).replace(tzinfo=UTC)
                        # the window holding its own start begins there only if it is a start
                        w = self.latest(to_epoch(start))
        except ValueError:
            w = None
        if w is None or w.id != window_id:
            raise WindowError(self._not_an_id(window_id))
        return w

    def _not_an_id(self, window_id: str) -> str:
        if self.kind is WindowKind.SCHEDULE and re.fullmatch(r"\d{8}T\d{4}", window_id):
            try:
                datetime.strptime(window_id, SCHEDULED_ID)
            except ValueError:
                pass  # not a time at all (a 13th month)
            else:
                return f"{window_id!r} is not a start of the schedule {self.schedule!r} (UTC)"
        return f"{window_id!r} is not a {self.kind.value} window id"


GROUP_SEP = "@"
GROUP_RE = COUNTRY_RE  # a board is split by country: ISO 3166-1 alpha-2 codes


def grouped(window: Window, group: str) -> Window:
    """The same window, for one group of a board split by a player attribute: its id is
    ``2026-W44@FR`` in keys, the store and archive names."""
    return Window(f"{window.id}{GROUP_SEP}{group}", window.start, window.end)


def split_group(window_id: str) -> tuple[str, str | None]:
    base, sep, group = window_id.partition(GROUP_SEP)
    return base, (group if sep else None)


def parse_window(rule: WindowRule, window_id: str) -> Window:
    """Like ``WindowRule.parse``, also for a group's window (``2026-W44@FR``)."""
    base, group = split_group(window_id)
    window = rule.parse(base)
    if group is None:
        return window
    if not GROUP_RE.fullmatch(group):
        raise WindowError(f"{group!r} is not a group (a two-letter country code)")
    return grouped(window, group)


def _utc(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _epoch(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp())


def to_epoch(dt: datetime) -> int:
    """Whole UTC seconds; naive datetimes are refused rather than guessed."""
    if dt.tzinfo is None:
        raise ValueError("datetime must carry a time zone")
    return int(dt.timestamp())


def to_rfc3339(t: float) -> str:
    # Four digits of year always, as RFC 3339 has it: strftime's %Y writes year 1 as "1".
    d = datetime.fromtimestamp(int(t), UTC)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}Z"
