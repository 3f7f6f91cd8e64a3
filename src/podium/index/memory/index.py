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
each one is atomic, as a Lua script is on Redis. It keeps its copy of profiles (the
``ProfileCopy`` port, ``memory_profiles.py``) as ``copy``, which ``around`` reads too.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from podium.index.memory.profiles import MemoryProfileCopy
from podium.index.memory.rebuild import Held, MemoryRebuild
from podium.ports import Around, BoardKey, MarkedScore, Meta, Near, Placed, ShardIndex, Slice
from podium.ports.status import IndexNode


@dataclass
class _Board:
    entries: SortedList = field(default_factory=SortedList)
    scores: dict[str, int] = field(default_factory=dict)
    banned: set[str] = field(default_factory=set)
    versions: dict[str, int] = field(default_factory=dict)
    expire_at: int | None = None
    # member -> (version, entry metadata or None): as write.lua's ``:meta`` hash, the
    # version kept so that an older change's metadata never replaces a newer one's on an
    # equal score
    meta: dict[str, tuple[int, str | None]] = field(default_factory=dict)

    def set_meta(self, member: str, version: int, text: str | None) -> None:
        """The member's score was just written with this entry's: its metadata is the
        newest (write.lua's ``set_meta``)."""
        if text is not None:
            self.meta[member] = (version, text)
        else:
            self.meta.pop(member, None)

    def keep_meta(self, member: str, version: int, text: str | None) -> None:
        """The member already held this entry's score: its metadata unless a newer one's
        is held (write.lua's ``keep_meta``)."""
        held = self.meta.get(member)
        if held is None:
            if text is not None:
                self.meta[member] = (version, text)
        elif version > held[0]:
            self.meta[member] = (version, text)  # None too: a tombstone with its version

    def set(self, member: str, score: int) -> None:
        old = self.scores.get(member)
        if old is not None:
            self.entries.remove((old, member))
        self.scores[member] = score
        self.entries.add((score, member))

    def load(
        self,
        entries: Sequence[tuple[str, int]],
        versions: Sequence[int] | None,
        metadata: Sequence[Meta] | None,
    ) -> None:
        """Fill an empty board with these entries (``banned`` already set), as ``set``,
        ``versions[member] = ...`` and ``set_meta`` for each in turn would: a member given
        twice keeps its last. The sorted list is built once from all of them, one sort in
        C, where adding a million one at a time was half of an embedded start
        (BENCHMARKS.md, issue 23)."""
        if self.banned:
            keep = [i for i, (m, _) in enumerate(entries) if m not in self.banned]
            entries = [entries[i] for i in keep]
            versions = None if versions is None else [versions[i] for i in keep]
            metadata = None if metadata is None else [metadata[i] for i in keep]
        self.scores = dict(entries)
        self.entries = SortedList(zip(self.scores.values(), self.scores.keys(), strict=True))
        if versions is not None:
            self.versions = {m: v for (m, _), v in zip(entries, versions, strict=True)}
        if metadata is not None:
            for (m, _), (version, text) in zip(entries, metadata, strict=True):
                self.set_meta(m, version, text)

    def remove(self, member: str) -> None:
        old = self.scores.pop(member, None)
        if old is not None:
            self.entries.remove((old, member))

    def rank(self, member: str, descending: bool) -> int | None:
        score = self.scores.get(member)
        if score is None:
            return None
        i: int = self.entries.index((score, member))
        return len(self.entries) - 1 - i if descending else i

    def ahead(self, member: str, score: int, descending: bool) -> int:
        """How many members are strictly ahead of (member, score) in board order, the
        member's own row left out wherever it is (as place.lua does)."""
        probe = (score, member)
        n: int
        if descending:
            n = len(self.entries) - self.entries.bisect_right(probe)
        else:
            n = self.entries.bisect_left(probe)
        held = self.scores.get(member)
        if held is not None and (held > score if descending else held < score):
            n -= 1
        return n

    def rows(self, start: int, stop: int, descending: bool) -> list[tuple[str, int]]:
        """(member, score) at ranks ``start..stop`` inclusive, in board order."""
        n = len(self.entries)
        stop = min(stop, n - 1)
        if start > stop:
            return []
        if descending:
            chunk = list(reversed(self.entries[n - 1 - stop : n - start]))
        else:
            chunk = self.entries[start : stop + 1]
        return [(m, s) for s, m in chunk]


class MemoryIndex(MemoryRebuild):
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._boards: dict[BoardKey, _Board] = {}
        self._clock = clock
        self.copy = MemoryProfileCopy()
        self._next: dict[BoardKey, Held] = {}  # the generations rebuilds fill (memory_rebuild.py)
        self._retired: dict[tuple[BoardKey, str], _Board] = {}

    def _get(self, key: BoardKey, create: bool = False) -> _Board | None:
        board = self._boards.get(key)
        if board is not None and board.expire_at is not None and board.expire_at <= self._clock():
            del self._boards[key]
            board = None
        if board is None and create:
            board = self._boards[key] = _Board()
        return board

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
        written = _write(board, entries, descending, versions, metadata)
        if (building := self._building(key)) is not None:  # a rebuild's new generation too
            _write(building, entries, descending, versions, metadata, board.banned)
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
        removed = _remove(board, members, versions)
        if (building := self._building(key)) is not None:
            _remove(building, members, versions, board.banned)
        if expire_at is not None:
            board.expire_at = expire_at
        return removed

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        board = self._get(key)
        return [] if board is None else board.rows(start, stop, descending)

    async def page_after(
        self, key: BoardKey, after: tuple[str, int] | None, n: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        if n < 0:
            raise ValueError(f"page_after: n must not be negative, not {n}")
        board = self._get(key)
        if board is None or n == 0:
            return []
        if after is None:
            return board.rows(0, n - 1, descending)
        member, score = after
        held = board.scores.get(member)
        # the cursor's place among the board's own rows (as near): the member's row counts
        # as ahead only where it stands ahead of the cursor
        at = board.ahead(member, score, descending)
        at += held is not None and (held > score if descending else held < score)
        # one row more than asked, in case the member's own row is among them and left out
        rows = board.rows(at, at + n, descending)
        return [r for r in rows if r[0] != member][:n]

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

    async def rank(self, key: BoardKey, player_id: str, *, descending: bool) -> Placed | None:
        board = self._get(key)
        if board is None:
            return None
        r = board.rank(player_id, descending)
        return None if r is None else Placed(r, board.scores[player_id], True)

    async def around(
        self, key: BoardKey, player_id: str, neighbors: int, *, descending: bool
    ) -> Around | None:
        board = self._get(key)
        if board is None or (r := board.rank(player_id, descending)) is None:
            return None
        rows = board.rows(max(0, r - neighbors), r + neighbors, descending)
        profiles = self.copy.held([m for m, _ in rows])
        meta = _held_meta(board, [m for m, _ in rows])
        return Around(r, board.scores[player_id], rows, profiles, exact=True, metadata=meta)

    async def entry_metadata(self, key: BoardKey, members: Sequence[str]) -> dict[str, str]:
        board = self._get(key)
        return {} if board is None else _held_meta(board, members)

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
        board = self._get(key)
        if board is None:
            return [0] * max(0, len(bounds) - 1)
        # (score, "") sorts before every member with that score: a half-open bound.
        edges = [board.entries.bisect_left((b, "")) for b in bounds]
        return [hi - lo for lo, hi in itertools.pairwise(edges)]

    # -- the reads a merge of shards needs (ShardIndex) ------------------------------------

    async def scores(self, key: BoardKey, members: Sequence[str]) -> list[int | None]:
        board = self._get(key)
        if board is None:
            return [None] * len(members)
        return [board.scores.get(m) for m in members]

    async def marked_score(self, key: BoardKey, member: str) -> MarkedScore:
        board = self._get(key)
        return MarkedScore(None if board is None else board.scores.get(member), None, False)

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
            for held in (board, self._building(key)):
                if held is not None:
                    held.remove(player_id)
                    held.versions.pop(player_id, None)
                    held.meta.pop(player_id, None)

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        for key in keys:
            board = self._get(key)
            if board is not None:
                board.banned.discard(player_id)

    async def replace(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> None:
        fresh = _Board(expire_at=expire_at)
        old = self._get(key)
        if old is not None:
            fresh.banned = set(old.banned)
        fresh.load(entries, versions, metadata)
        self._boards[key] = fresh


def _write(
    board: _Board,
    entries: Sequence[tuple[str, int]],
    descending: bool,
    versions: Sequence[int] | None,
    metadata: Sequence[Meta] | None,
    banned: set[str] | None = None,
) -> int:
    """write.lua on one generation of a board: the ban set is the live one's (``banned``;
    the board's own when it is the live one)."""
    banned = board.banned if banned is None else banned
    written = 0
    for i, (member, score) in enumerate(entries):
        if member in banned:
            continue
        if versions is not None:
            if versions[i] > board.versions.get(member, 0):
                board.set(member, score)
                board.versions[member] = versions[i]
                written += 1
                if metadata is not None:
                    board.set_meta(member, *metadata[i])
            continue
        old = board.scores.get(member)
        if old is None or (score > old if descending else score < old):
            board.set(member, score)
            written += 1
            if metadata is not None:
                board.set_meta(member, *metadata[i])
        elif metadata is not None and old == score:
            board.keep_meta(member, *metadata[i])
    return written


def _remove(
    board: _Board, members: Sequence[str], versions: Sequence[int], banned: set[str] | None = None
) -> int:
    banned = board.banned if banned is None else banned
    removed = 0
    for member, version in zip(members, versions, strict=True):
        if member not in banned and version > board.versions.get(member, 0):
            board.remove(member)
            board.versions[member] = version
            board.meta.pop(member, None)
            removed += 1
    return removed


def _held_meta(board: _Board, members: Sequence[str]) -> dict[str, str]:
    if not board.meta:  # a board no result with metadata reached: nothing to look up
        return {}
    out = {}
    for m in members:
        held = board.meta.get(m)
        if held is not None and held[1] is not None:
            out[m] = held[1]
    return out


if TYPE_CHECKING:  # mypy holds the adapter to the port it implements
    _port: type[ShardIndex] = MemoryIndex
