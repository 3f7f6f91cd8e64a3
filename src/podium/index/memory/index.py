"""The in-process rank index: a product for single-process deployments, not a test fake.

Each board window is a ``SortedList`` of ``(score, member)`` kept in ascending order, exactly
the board order of ``domain.boards.board_key`` (score, then member bytes), which is the order
of a Redis sorted set: Python compares ``str`` by code point, and UTF-8 keeps code point
order, so the tuples sort as ``(score, member.encode())`` would without encoding a member on
every comparison (``tests/unit/domain/test_boards.py`` holds the two alike). Descending boards read
it from the end, as ``ZREVRANGE`` does, so equal scores come out in reverse member order on
both backends. One list holds the whole board, so every rank is exact.

With boards split by player (``index.shards``), each shard is a ``MemoryIndex`` of its own,
which answers the reads a merge of shards needs (``ShardIndex``: ``scores``, ``ahead``,
``near``, ``scores_at``) as the Redis shards do, so the embedded suite exercises the split.

It lives in the event loop's thread; every method runs to completion without awaiting, so
each one is atomic, as a Lua script is on Redis, and so is each composite read of
``index/reads.py`` built from them (``page_after``, ``rank``, ``around``). It keeps its copy
of profiles (the ``ProfileCopy`` port, ``profiles.py``) as ``copy``, which ``around`` reads
too. A board window is a ``Board`` (``board.py``); its rebuild beside the live one is
``rebuild.py``'s.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from podium.domain.changes import GENERATION, RENEWAL, WRITES
from podium.domain.models import Profile
from podium.domain.recount import Move
from podium.index.memory.board import Board, held_meta, remove, write
from podium.index.memory.profiles import MemoryProfileCopy
from podium.index.memory.rebuild import Held, MemoryRebuild
from podium.index.reads import ComposedReads
from podium.ports import (
    BoardKey,
    MarkedScore,
    Meta,
    Near,
    Placed,
    Recounted,
    ShardIndex,
    Slice,
)
from podium.ports.erasure import ErasedAmong
from podium.ports.status import IndexNode

_Board = Board  # the name tests/unit/test_memory_bulk.py imports
PAGE = 1000  # ids a sweep asks about at a time


class MemoryIndex(ComposedReads, MemoryRebuild):
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._boards: dict[BoardKey, Board] = {}
        self._clock = clock
        self.copy = MemoryProfileCopy()
        # the generations rebuilds fill (index/memory/rebuild.py)
        self._next: dict[BoardKey, Held] = {}
        self._retired: dict[tuple[BoardKey, str], Board] = {}

    def _get(self, key: BoardKey, create: bool = False) -> Board | None:
        board = self._boards.get(key)
        if board is not None and board.expire_at is not None and board.expire_at <= self._clock():
            del self._boards[key]
            board = None
        if board is None and create:
            board = self._boards[key] = Board()
        return board

    def built(self, token: str) -> MemoryIndex:
        """The reads of a rebuild's new generation (``Rebuilding.built``, ``rebuild.py``)."""
        parent = self

        class Built(MemoryIndex):
            """Every board read goes through ``_get``: the new generation's board."""

            def _get(self, key: BoardKey, create: bool = False) -> Board | None:
                held = parent._mine(key, token)
                return None if held is None else held.board

        view = Built(self._clock)
        view.copy = self.copy
        return view

    async def ping(self) -> None:
        return None

    async def nodes(self) -> list[IndexNode]:
        # No Redis: no node, role or replication to report (podium status says n/a).
        return [IndexNode(None, "in process", up=True)]

    async def close(self) -> None:
        self._boards.clear()
        self._next.clear()
        self._retired.clear()
        self.copy.clear()

    async def write(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        descending: bool,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> int:
        if not entries:
            return 0  # as on Redis: no script runs, so not even the expiry moves
        board = self._get(key, create=True)
        assert board is not None
        written = write(board, entries, descending, versions, metadata)
        if (building := self._building(key)) is not None:  # a rebuild's new generation too
            write(building, entries, descending, versions, metadata, board.banned)
        if expire_at is not None:  # as on Redis: no expiry given leaves the one there
            board.expire_at = expire_at
        return written

    async def remove(
        self,
        key: BoardKey,
        members: Sequence[str],
        versions: Sequence[int],
        *,
        expire_at: int | None,
    ) -> int:
        if not members:
            return 0
        board = self._get(key, create=True)
        assert board is not None
        removed = remove(board, members, versions)
        if (building := self._building(key)) is not None:
            remove(building, members, versions, board.banned)
        if expire_at is not None:
            board.expire_at = expire_at
        return removed

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        board = self._get(key)
        return [] if board is None else board.rows(start, stop, descending)

    async def page_from(
        self, key: BoardKey, at: tuple[str, int], n: int, *, descending: bool, before: bool
    ) -> Slice:
        if n < 0:
            raise ValueError(f"page_from: n must not be negative, not {n}")
        board = self._get(key)
        if board is None:
            return Slice(0, False, [])
        member, score = at
        probe = (score, member)
        if descending:
            ahead = len(board.entries) - board.entries.bisect_right(probe)
        else:
            ahead = board.entries.bisect_left(probe)
        on = board.scores.get(member) == score
        if before:
            rows = board.rows(max(0, ahead - n), ahead - 1, descending)
        else:
            rows = board.rows(ahead + on, ahead + on + n - 1, descending)
        return Slice(ahead, on, rows)

    async def entry_metadata(self, key: BoardKey, members: Sequence[str]) -> dict[str, str]:
        board = self._get(key)
        return {} if board is None else held_meta(board, members)

    async def _beside(
        self, key: BoardKey, members: list[str]
    ) -> tuple[dict[str, Profile] | None, dict[str, str]]:
        """The rows' names and metadata for ``around`` (``index/reads.py``), at once."""
        board = self._get(key)
        return self.copy.held(members), {} if board is None else held_meta(board, members)

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[Placed | None]:
        board = self._get(key)
        if board is None:
            return [None] * len(player_ids)
        # Board.rank, inlined: this is the friends board's read, up to a thousand players.
        scores, entries, last = board.scores, board.entries, len(board.entries) - 1
        out: list[Placed | None] = []
        for p in player_ids:
            score = scores.get(p)
            if score is None:
                out.append(None)
                continue
            i: int = entries.index((score, p))
            out.append(Placed(last - i if descending else i, score, True))
        return out

    async def count(self, key: BoardKey) -> int:
        board = self._get(key)
        return 0 if board is None else len(board.entries)

    async def count_between(self, key: BoardKey, bounds: Sequence[int]) -> list[int]:
        return _between(self._get(key), bounds)

    # -- the reads a merge of shards needs (ShardIndex) ------------------------------------

    async def recount(
        self,
        key: BoardKey,
        since: int | None,
        runs: Sequence[Sequence[int]],
        *,
        generation: int | None = None,
    ) -> Recounted:
        board = self._get(key)
        n = 0 if board is None else board.changes.get(WRITES, 0)
        g = 0 if board is None else board.changes.get(GENERATION, 0)
        moves: list[Move] | None = None
        if since is not None and (generation is None or generation == g):
            k, held = n - since, () if board is None else board.moves
            if k == 0:
                moves = []
            elif 0 < k <= len(held):
                last = list(held)[-k:]
                moves = None if None in last else [m for m in last if m is not None]
        return Recounted(n, moves, [_between(board, run) for run in runs], g)

    async def renew_counts(self, windows: Sequence[tuple[BoardKey, int | None]]) -> None:
        for key, expire_at in windows:
            board = self._get(key, create=True)
            assert board is not None
            board.renewed(1 + secrets.randbelow(RENEWAL))
            if expire_at is not None:  # as on Redis: no expiry given leaves the one there
                board.expire_at = expire_at

    async def scores(self, key: BoardKey, members: Sequence[str]) -> list[int | None]:
        board = self._get(key)
        if board is None:
            return [None] * len(members)
        return [board.scores.get(m) for m in members]

    async def marked_score(self, key: BoardKey, member: str) -> MarkedScore:
        board = self._get(key)
        return MarkedScore(None if board is None else board.scores.get(member), None, False)

    async def changes(self, key: BoardKey) -> dict[str, int]:
        board = self._get(key)
        return {} if board is None else dict(board.changes)

    async def ahead(
        self, key: BoardKey, probes: Sequence[tuple[str, int]], *, descending: bool
    ) -> list[int]:
        board = self._get(key)
        if board is None:
            return [0] * len(probes)
        return [board.ahead(m, s, descending) for m, s in probes]

    async def near(
        self, key: BoardKey, member: str, score: int, n: int, *, descending: bool
    ) -> Near:
        if n < 0:
            raise ValueError(f"near: n must not be negative, not {n}")
        board = self._get(key)
        if board is None:
            return Near(0, [], [])
        ahead = board.ahead(member, score, descending)
        if n == 0:
            return Near(ahead, [], [])
        held = board.scores.get(member)
        # the probe's place among the board's own rows, the member's row included if ahead
        at = ahead + (held is not None and (held > score if descending else held < score))
        first = max(0, at - n - 1)
        above: list[tuple[str, int]] = []
        below: list[tuple[str, int]] = []
        for i, row in enumerate(board.rows(first, at + n, descending), start=first):
            if row[0] != member:
                (above if i < at else below).append(row)
        return Near(ahead, above[-n:], below[:n])

    async def scores_at(
        self, key: BoardKey, ranks: Sequence[int], *, descending: bool
    ) -> list[int | None]:
        if ranks and min(ranks) < 0:
            raise ValueError(f"scores_at: ranks are 0-based, not {min(ranks)}")
        board = self._get(key)
        if board is None:
            return [None] * len(ranks)
        entries, size = board.entries, len(board.entries)
        return [None if r >= size else entries[size - 1 - r if descending else r][0] for r in ranks]

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        for key in keys:
            board = self._get(key, create=True)
            assert board is not None
            board.banned.add(player_id)
            self._drop(key, board, player_id)

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        for key in keys:
            board = self._get(key)
            if board is not None:
                board.banned.discard(player_id)

    async def forget(self, keys: Sequence[BoardKey], player_id: str) -> None:
        for key in keys:
            board = self._get(key)
            if board is None:
                continue
            board.banned.discard(player_id)
            self._drop(key, board, player_id)

    def _drop(self, key: BoardKey, board: Board, player_id: str) -> None:
        """The player's member, version and metadata gone from the board window and from
        the generation being built of it, its tallies counting the exit."""
        for held in (board, self._building(key)):
            if held is not None:
                held.tally(held.scores.get(player_id), None)
                held.remove(player_id)
                held.versions.pop(player_id, None)
                held.meta.pop(player_id, None)

    def _every_board(self) -> list[tuple[Board, bool]]:
        """Every board window of every generation: the live, the retired, those being built;
        each with whether it is the live one, whose removals are tallied as moves (a
        retired one shares the live one's tallies since the switch, ``Board.replaced``, and
        one being built has its own until then: neither takes a move of its own)."""
        boards = [(b, True) for b in self._boards.values()]
        boards += [(b, False) for b in self._retired.values()]
        return boards + [(h.board, False) for h in self._next.values()]

    async def erase_player(self, player_id: str) -> int:
        """Out of every board window of every generation, its versions, metadata and ban
        sets, and the copy of profiles; out of a live one as a move, as write.lua's removal
        (forget.lua on Redis), which the aggregator's counts follow."""
        gone = 0
        for board, live in self._every_board():
            gone += _take_out(board, player_id, live)
        forgot: int = self.copy.forget(player_id)
        return gone + forgot

    async def sweep_erased(self, erased: ErasedAmong) -> int:
        """Every board's members, versions, metadata and ban set, and the copy of profiles,
        a page at a time (the event loop is given back between pages: a page's removal is
        one step, as every method here is); what ``erased`` picks out of a page goes."""
        gone = 0
        for board, live in self._every_board():
            held = {*board.scores, *board.versions, *board.meta, *board.banned}
            for page in _paged(held):
                for p in erased(page):
                    gone += _take_out(board, p, live)
                await asyncio.sleep(0)
        for page in _paged(self.copy.ids()):
            for p in erased(page):
                gone += self.copy.forget(p)
            await asyncio.sleep(0)
        return gone

    async def replace(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> None:
        fresh = Board(expire_at=expire_at)
        old = self._get(key)
        if old is not None:
            fresh.banned = set(old.banned)
        fresh.replaced(old)
        fresh.load(entries, versions, metadata)
        self._boards[key] = fresh


def _between(board: Board | None, bounds: Sequence[int]) -> list[int]:
    """``count_between`` on one board (none: every bucket empty)."""
    if board is None:
        return [0] * max(0, len(bounds) - 1)
    # (score, "") sorts before every member with that score: a half-open bound.
    edges = [board.entries.bisect_left((b, "")) for b in bounds]
    return [hi - lo for lo, hi in itertools.pairwise(edges)]


def _take_out(board: Board, player_id: str, live: bool) -> int:
    """The player out of one board, its versions, metadata and ban set; 1 if on the board.
    On the ``live`` generation the removal is tallied, a move."""
    on = player_id in board.scores
    if on:
        if live:
            board.tally(board.scores[player_id], None)
        board.remove(player_id)
    board.versions.pop(player_id, None)
    board.meta.pop(player_id, None)
    board.banned.discard(player_id)
    return int(on)


def _paged(ids: Iterable[str]) -> Iterator[list[str]]:
    it = iter(list(ids))  # a copy: the board may change between two pages
    while page := list(itertools.islice(it, PAGE)):
        yield page


if TYPE_CHECKING:  # mypy holds the adapter to the port it implements
    _port: type[ShardIndex] = MemoryIndex
