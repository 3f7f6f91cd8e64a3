"""A board window of the in-process index rebuilt beside the live one (the ``Rebuilding``
port, as ``redis/rebuild.py`` does it on Redis): a second ``Board`` per window, filled a
page at a time between reads, written by every write meanwhile (``MemoryIndex.write``,
``remove`` and ``ban`` apply to it too), then put in the live one's place in one step.

Each method runs without awaiting, so each is atomic, as a script is on Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from podium.index.memory.board import Board, write
from podium.ports import BoardKey, Meta


@dataclass
class Held:
    """A rebuild's new generation of one window: its token, the board it fills, and until
    when it holds the window (renewed by ``keep_build``, as the Redis pointer's TTL)."""

    token: str
    board: Board
    until: float


class MemoryRebuild:
    """The ``Rebuilding`` half of ``MemoryIndex`` (which sets these attributes, and gives
    the new generation's reads, ``built``)."""

    _boards: dict[BoardKey, Board]
    _next: dict[BoardKey, Held]
    _retired: dict[tuple[BoardKey, str], Board]
    _clock: Callable[[], float]
    copy: Any

    def _held(self, key: BoardKey) -> Held | None:
        held = self._next.get(key)
        if held is not None and held.until <= self._clock():
            del self._next[key]  # its rebuild stopped renewing it: as the pointer's TTL
            held = None
        return held

    def _building(self, key: BoardKey) -> Board | None:
        """The new generation of the window a rebuild fills, if one runs."""
        held = self._held(key)
        return None if held is None else held.board

    def _mine(self, key: BoardKey, token: str) -> Held | None:
        held = self._held(key)
        return held if held is not None and held.token == token else None

    async def begin_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        if self._held(key) is not None:
            return False
        self._next[key] = Held(token, Board(), self._clock() + ttl_s)
        return True

    async def keep_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        held = self._mine(key, token)
        if held is None:
            return False
        held.until = self._clock() + ttl_s
        return True

    async def fill_build(
        self,
        key: BoardKey,
        token: str,
        entries: Sequence[tuple[str, int]],
        *,
        descending: bool,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> int:
        held = self._mine(key, token)
        if held is None:
            return 0  # not this rebuild's (any more): its switch will refuse
        board = held.board
        if versions is None:  # by the board's order, as ZADD GT (LT) does on Redis
            live = self._boards.get(key)
            banned = set() if live is None else live.banned
            write(board, entries, descending, None, metadata, banned)
            return len(entries)
        for i, (member, score) in enumerate(entries):  # as given: the replay mends after
            board.set(member, score)
            board.versions[member] = versions[i]
            if metadata is not None:
                board.set_meta(member, *metadata[i])
        return len(entries)

    async def switch_build(
        self, key: BoardKey, token: str, *, expire_at: int | None, grace_s: float
    ) -> bool:
        held = self._mine(key, token)
        if held is None:
            return False
        del self._next[key]
        fresh, old = held.board, self._boards.get(key)
        if old is not None:
            fresh.banned = old.banned
            for member in old.banned:  # a ban that landed between a page's look and its write
                fresh.remove(member)
                fresh.versions.pop(member, None)
                fresh.meta.pop(member, None)
            self._retired[(key, token)] = old
        fresh.replaced(old)
        fresh.expire_at = expire_at
        self._boards[key] = fresh
        return True

    async def drop_build(self, key: BoardKey, token: str) -> None:
        self._retired.pop((key, token), None)

    async def abort_build(self, key: BoardKey, token: str) -> None:
        if self._mine(key, token) is not None:
            del self._next[key]
