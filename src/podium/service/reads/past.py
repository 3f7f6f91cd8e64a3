"""Past windows: a board's windows listed newest first, a frozen one's standings file
streamed, and a player's final rank and points in each frozen window they played.

What a frozen window keeps (``lifecycle.py``): its first ``exact_top`` places in the store
(``final_standings``), and every player in its archive file (``archive/standings.py``), whose
sha256 the store holds. A player below the kept top is found in that file: their line there is as
exact as the store's, and the answer says where it came from. An API process whose archive
directory lacks the file (the freezer wrote it on another machine) writes it again from the
store's frozen tallies, and uses it only if it has the very checksum the freeze recorded.

Knows the ports, never an adapter.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from podium.domain.boards import BoardSpec
from podium.domain.models import FinalEntry, FrozenWindow
from podium.domain.tournaments import tournament_of
from podium.domain.windows import (
    GROUP_RE,
    Window,
    WindowError,
    WindowKind,
    grouped,
    indexed_window,
    parse_window,
    split_group,
    to_rfc3339,
)
from podium.errors import Conflict, InternalError, InvalidInput, NotFound
from podium.ports import BoardKey, Clock, RankIndex, Results, Windows
from podium.ports.archive import Archive
from podium.service.boards import Boards
from podium.service.lifecycle import Lifecycle
from podium.util.caching import Cache

State = Literal["open", "closed", "frozen"]
Format = Literal["csv", "jsonl"]
Source = Literal["standings", "archive"]

LOOKBACK = 3  # closed windows before the current one looked at, past those taking late results
# Archive files checked against the freeze's sha256, held this long: the file is read whole
# to check it, once per process and window within this time, not once per request.
CHECKED_S = 3600.0
CHECKED_HELD = 1000
# Lines found in archive files (a player below the kept top): frozen standings never change.
FOUND_S = 3600.0
FOUND_HELD = 10_000


@dataclass(frozen=True, slots=True)
class PastWindow:
    id: str  # with its group on a grouped board: 2026-W44@FR
    group: str | None
    start: int
    end: int | None
    state: State
    players: int | None  # None: a closed window whose index key has expired, not frozen
    frozen_at: float | None = None
    sha256: str | None = None  # of the archive file, once frozen and written


@dataclass(frozen=True, slots=True)
class WindowList:
    board: str
    windows: list[PastWindow]
    next: str | None  # the cursor of the next page, None on the last


@dataclass(frozen=True, slots=True)
class Download:
    board: str
    window: str
    sha256: str  # of the archive file
    media_type: str
    gzip: bool  # the body is the archive file itself (CSV, gzip-encoded)
    body: AsyncIterator[bytes]


@dataclass(frozen=True, slots=True)
class Played:
    """A player's place in one frozen window: exact either way, from the store's final
    standings (the kept top) or from the archive file (everyone)."""

    window: str
    group: str | None
    start: int
    end: int | None
    rank: int
    position: int
    points: int
    source: Source


@dataclass(frozen=True, slots=True)
class History:
    player_id: str
    board: str
    windows: list[Played]
    next: str | None


class Past:
    def __init__(
        self,
        windows: Windows,
        results: Results,
        index: RankIndex,
        clock: Clock,
        lifecycle: Lifecycle,
        archive: Archive,
        boards: Boards,
    ) -> None:
        self.store = windows
        self.results = results
        self.index = index
        self.clock = clock
        self.lifecycle = lifecycle
        self.archive = archive
        self.boards = boards
        self._checked: Cache[tuple[str, str], FrozenWindow] = Cache(
            CHECKED_HELD, CHECKED_S, clock.now
        )
        self._found: Cache[tuple[str, str, str], FinalEntry | None] = Cache(
            FOUND_HELD, FOUND_S, clock.now
        )

    # -- the list -----------------------------------------------------------------------

    async def windows(
        self, board: str, group: str | None, cursor: str | None, limit: int
    ) -> WindowList:
        """The board's windows, newest first: the open one, the closed ones not frozen yet,
        and every frozen one; on a grouped board, one group's."""
        spec = self.boards.board(board)
        _check_group(spec, group, required=True)
        after = _decode(cursor, board, group)
        now = self.clock.now()
        out: dict[str, PastWindow] = {}
        for info in (await self.lifecycle.frozen(board)).values():
            w = _parsed(spec, info.window)
            if w is not None and split_group(w.id)[1] == group:
                out[w.id] = PastWindow(
                    w.id,
                    group,
                    w.start,
                    w.end,
                    "frozen",
                    info.players,
                    info.frozen_at,
                    info.checksum,
                )
        for w, state in await self._live(spec, group, now, set(out)):
            out[w.id] = PastWindow(
                w.id, group, w.start, w.end, state, await self._players(spec, w, now)
            )
        ordered = sorted(out.values(), key=lambda p: (p.start, p.id), reverse=True)
        if after is not None:
            ordered = [p for p in ordered if (p.start, p.id) < after]
        page = ordered[:limit]
        more = len(ordered) > limit
        return WindowList(
            board, page, _encode(board, group, page[-1].start, page[-1].id) if more else None
        )

    async def _live(
        self, spec: BoardSpec, group: str | None, now: float, frozen: set[str]
    ) -> list[tuple[Window, State]]:
        """The open window (unless an admin froze it early), and the closed ones before it
        that have players and are not ``frozen``: those still taking late results, and
        ``LOOKBACK`` more (one the freezer has yet to reach)."""
        # The latest window to begin: the open one, or on a schedule between two windows the
        # one that closed last, which is listed as the closed ones before it are.
        latest = spec.rule.latest(int(now))
        if latest is None:
            return []
        out: list[tuple[Window, State]] = []
        w: Window | None = latest
        if latest.contains(int(now)):
            if (mine := _in_group(latest, group)).id not in frozen:
                out.append((mine, "open"))
            w = spec.rule.before(latest)
        older = 0
        while w is not None and older < LOOKBACK:
            assert w.end is not None
            if w.end + spec.freeze_after_s <= now:
                older += 1  # due: frozen already, or about to be
            mine = _in_group(w, group)
            if mine.id not in frozen and await self._has_players(spec.name, mine.id):
                out.append((mine, "closed"))
            w = spec.rule.before(w)
        return out

    async def _has_players(self, board: str, window_id: str) -> bool:
        async for batch in self.store.standings(board, window_id, batch=1):
            return bool(batch)
        return False

    async def _players(self, spec: BoardSpec, w: Window, now: float) -> int | None:
        """A live window's players, as the index counts them (while its key lives)."""
        if indexed_window(spec.rule, w.id, now) is None:
            return None
        return await self.index.count(BoardKey(spec.name, w.id))

    # -- the standings file --------------------------------------------------------------

    async def standings(self, board: str, window_id: str, fmt: Format, gzip: bool) -> Download:
        """A frozen window's standings, streamed from its archive file: CSV (the file itself
        when ``gzip``: its bytes are those the sha256 is of) or JSON lines."""
        spec = self.boards.board(board)
        w = self.boards.window(spec, window_id)
        info = await self._frozen(spec, w)
        if fmt == "jsonl":
            body = self.archive.jsonl(info.archive)
            return Download(board, w.id, info.sha256, "application/x-ndjson", False, body)
        body = self.archive.raw(info.archive) if gzip else self.archive.text(info.archive)
        return Download(board, w.id, info.sha256, "text/csv; charset=utf-8", gzip, body)

    async def _frozen(self, spec: BoardSpec, w: Window) -> _Checked:
        info = (await self.lifecycle.frozen(spec.name)).get(w.id)
        if info is None:
            raise await self._not_frozen(spec, w)
        info = await self._checked.get_or_load((spec.name, w.id), lambda: self._check(spec, w))
        assert info.archive is not None and info.checksum is not None
        return _Checked(info.archive, info.checksum)

    async def _not_frozen(self, spec: BoardSpec, w: Window) -> Exception:
        now = self.clock.now()
        name = _named(spec.name)
        if spec.rule.kind is WindowKind.ALL:
            return Conflict(f"board {spec.name} is all-time: its one window is never frozen")
        assert w.end is not None
        if w.start <= now < w.end:
            return Conflict(
                f"window {w.id} of {name} is open: it is frozen {spec.freeze_after_s} s "
                f"after it closes at {to_rfc3339(w.end)}"
            )
        if w.start <= now and await self._has_players(spec.name, w.id):
            due = w.end + spec.freeze_after_s
            when = f"at {to_rfc3339(due)}" if due > now else "by the freezer's next pass"
            return Conflict(
                f"window {w.id} of {name} is closed and not frozen yet: it is frozen {when}"
            )
        return NotFound(f"{name} has no window {w.id}: nobody played in it")

    async def _check(self, spec: BoardSpec, w: Window) -> FrozenWindow:
        """The frozen window, with its archive file here and holding the bytes its sha256
        says: written now if no one has yet, or written again if this process's archive
        directory does not have it."""
        info = (await self.lifecycle.frozen(spec.name))[w.id]
        if info.archive is None or info.checksum is None:
            return await self.lifecycle.write_archive(spec, w, info)
        if await self.archive.checksum(info.archive) == info.checksum:
            return info
        entries = await self.lifecycle.archived_entries(spec, w)
        name, checksum = await self.archive.write(spec.name, w.id, entries, info.frozen_at)
        if (name, checksum) != (info.archive, info.checksum):
            raise InternalError(
                f"the standings of {spec.name} {w.id} written again from the store have sha256 "
                f"{checksum}, not the {info.checksum} of the freeze: did the board's order or "
                "tie rule change since?"
            )
        return info

    # -- a player's history --------------------------------------------------------------

    async def history(
        self, player_id: str, board: str, group: str | None, cursor: str | None, limit: int
    ) -> History:
        """Their final rank and points in each frozen window of the board they played,
        newest first; on a grouped board, in whichever group they were counted (or in
        ``group`` only)."""
        spec = self.boards.board(board)
        _check_group(spec, group, required=False)
        after = _decode(cursor, board, group)
        frozen = await self.lifecycle.frozen(board)
        played: list[Window] = []
        for s in await self.results.player_standings(player_id):
            if s.board != board or s.window not in frozen:
                continue
            w = _parsed(spec, s.window)
            if w is not None and (group is None or split_group(w.id)[1] == group):
                played.append(w)
        played.sort(key=lambda w: (w.start, w.id), reverse=True)
        if after is not None:
            played = [w for w in played if (w.start, w.id) < after]
        out: list[Played] = []
        for w in played[:limit]:
            found = await self._place(spec, w, player_id)
            if found is not None:
                e, source = found
                g = split_group(w.id)[1]
                out.append(Played(w.id, g, w.start, w.end, e.rank, e.position, e.points, source))
        more = len(played) > limit
        last = played[limit - 1] if more else None
        nxt = _encode(board, group, last.start, last.id) if last is not None else None
        return History(player_id, board, out, nxt)

    async def _place(
        self, spec: BoardSpec, w: Window, player_id: str
    ) -> tuple[FinalEntry, Source] | None:
        kept = await self.store.final_entry(spec.name, w.id, player_id)
        if kept is not None:
            return kept, "standings"
        info = await self._frozen(spec, w)
        e = await self._found.get_or_load(
            (spec.name, w.id, player_id), lambda: self.archive.find(info.archive, player_id)
        )
        return None if e is None else (e, "archive")


@dataclass(frozen=True, slots=True)
class _Checked:
    archive: str
    sha256: str


def _check_group(spec: BoardSpec, group: str | None, *, required: bool) -> None:
    if spec.group_by is None:
        if group is not None:
            raise InvalidInput(f"board {spec.name} is not split into groups")
        return
    if group is None:
        if required:
            raise InvalidInput(
                f"board {spec.name} is split by {spec.group_by}: name a group (?group=FR)"
            )
        return
    if not GROUP_RE.fullmatch(group):
        raise InvalidInput(f"group {group!r} must be a two-letter country code")


def _named(board: str) -> str:
    """A board as a message names it: a tournament's (``~<id>``) by its tournament."""
    tid = tournament_of(board)
    return f"board {board}" if tid is None else f"tournament {tid}"


def _in_group(w: Window, group: str | None) -> Window:
    return w if group is None else grouped(w, group)


def _parsed(spec: BoardSpec, window_id: str) -> Window | None:
    try:
        return parse_window(spec.rule, window_id)
    except WindowError:
        return None  # a window of an older configuration of this board


# A cursor: where the last page ended (the start and id of its last window), for this board
# and group only, so that a page never repeats or skips a window whatever opens meanwhile.


def _encode(board: str, group: str | None, start: int, window_id: str) -> str:
    raw = json.dumps([board, group, start, window_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str | None, board: str, group: str | None) -> tuple[int, str] | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        b, g, start, window_id = json.loads(raw)
        if not (isinstance(start, int) and isinstance(window_id, str)):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error):
        raise InvalidInput("cursor: not a cursor this API gave (pass `next` as it is)") from None
    if (b, g) != (board, group):
        raise InvalidInput(
            f"cursor: it pages board {b}{f' group {g}' if g else ''}, not {board}"
            f"{f' group {group}' if group else ''}"
        )
    return start, window_id
