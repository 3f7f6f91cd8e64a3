"""Honest reads while the index is refilled: the rank source every read goes through,
checked against the index's generation markers (``ports/generations.py``).

A Redis that came back empty answers a board read with a board that lacks players: at
first nobody, then whoever the updaters wrote since. Such an answer must never look like
the board (invariant 6 of docs/architecture.md: never passed off as exact). So each read
of a live window is checked against the markers, the same way in every process, whether it
writes boards or only serves reads (the markers live in the index, not in a process):

- before the read, the markers last seen: one gone (seen within the last second) is a 503
  at once, ``Rebuilding``, without asking the index;
- after the read, the markers read again, by a check begun after the read ended: one gone,
  or a token other than the one seen before the read (the index was emptied and rebuilt
  while the read ran, so it may have read the empty board), is a 503 too. A read that
  brought the markers itself, read in its own atomic step (a player's rank with neighbors
  on one Redis, ``around.lua``), needs no check after it: those markers are it. An
  estimated rank on a split board asks one shard (``marked_score.lua``): its marker, read
  with the score, stands in for that shard's among the markers last seen, and the others'
  stay as seen, if every marker was read at most ``WHOLE_S`` ago. The read did not touch
  the other shards, but its estimate comes from the aggregator's histogram of them all,
  so a marker gone elsewhere must still stop it, within that second.

The markers go with the data: a flush, or a restart without it, took the marker with the
board, so a read that found the same token after it as before it read a board that held
the data. The check after is shared by every read that ended before it began (one round
trip for a crowd of readers, ``After``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from podium.domain.boards import BoardSpec
from podium.errors import Rebuilding
from podium.ports import (
    Around,
    BoardKey,
    Clock,
    Estimated,
    Placed,
    RankSource,
    Resumed,
    Spread,
    Top,
)
from podium.ports.generations import Generations

T = TypeVar("T")
GONE_S = 1.0  # a marker seen gone is trusted this long before a read asks again
WHOLE_S = 1.0  # every marker read this recently: one shard's own can stand in for its own
Tokens = tuple[str | None, ...]
Some = dict[int, str | None]  # the markers of some shards, by position


class After(Generic[T]):
    """A call shared by every caller that asked before it began, never one begun before a
    caller asked: each caller's answer was read after its own read ended (also the tallies
    an estimated rank is widened by, ``snapshot.py``)."""

    def __init__(self, fn: Callable[[], Awaitable[T]]) -> None:
        self._fn = fn
        self._asked = 0
        self._task: asyncio.Future[T] | None = None
        self._covers = 0  # the last caller the running call serves

    async def __call__(self) -> T:
        self._asked += 1
        mine = self._asked
        while True:
            task = self._task
            if task is None or (task.done() and self._covers < mine):
                self._covers = self._asked
                task = self._task = asyncio.ensure_future(self._fn())
            if self._covers >= mine:
                return await asyncio.shield(task)
            await asyncio.wait([task])  # begun before I asked: wait for it, then ask anew


def _generation(got: Around | Estimated | None) -> Tokens | Some | None:
    """The markers an index read in the same step as ``got``'s rows or score, if it did."""
    return None if got is None else got.generation


def _merged(seen: Tokens | None, read: Some) -> Tokens | None:
    """The markers last seen with those a read brought from its own step in their place:
    the check after a read that asked some shards only. None (ask for every marker) where
    none were seen yet, one seen was gone, or they are of another number of shards."""
    if seen is None or None in seen or any(not 0 <= s < len(seen) for s in read):
        return None
    out = list(seen)
    for s, token in read.items():
        out[s] = token
    return tuple(out)


class MarkedRanks:
    """A ``RankSource`` that answers only what a board with its data gave it."""

    def __init__(self, inner: RankSource, generations: Generations, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self._fresh: After[Tokens] = After(generations.tokens)
        self._seen: Tokens | None = None
        self._seen_at = 0.0
        self._whole_at = -WHOLE_S  # when every marker was last read

    async def checked(
        self,
        read: Callable[[], Awaitable[T]],
        same_step: Callable[[T], Tokens | Some | None] = lambda _: None,
    ) -> T:
        """``read``'s answer, if the markers say the index held its data throughout (a
        read of the index that is not a rank source's, such as a league's cohort). Where
        the read itself brought the markers, read at its own instant (``same_step``), they
        are the check after it, and no second round trip is made: a board read in the same
        atomic step as a marker that is there held that generation's data. Where it brought
        the markers of some shards only (``Some``), they are merged into those last seen."""
        before = self._seen
        if before is not None and None in before and self._clock.now() - self._seen_at < GONE_S:
            raise Rebuilding("the index's generation marker is gone: the board is being rebuilt")
        got = await read()
        step = same_step(got)
        now = self._clock.now()
        if isinstance(step, dict):  # some shards' markers: merged, if the rest are recent
            after = _merged(before, step) if now - self._whole_at < WHOLE_S else None
        else:
            after = step
            if step is not None:
                self._whole_at = now
        if after is None:
            after = await self._fresh()
            self._whole_at = now = self._clock.now()
        self._seen, self._seen_at = after, now
        if None in after:
            raise Rebuilding("the index's generation marker is gone: the board is being rebuilt")
        # Markers of another number: a reshard switched the layout while this read ran
        # (index/redis/layout.py), both layouts whole (§8), so not a rebuild.
        if before is not None and len(before) == len(after) and before != after:
            raise Rebuilding("the index was rebuilt while this read ran")
        return got

    def forget(self, changed_at: float | None = None) -> None:
        self._inner.forget(changed_at)

    async def version(self, key: BoardKey, stop: int) -> bytes | None:
        return await self._inner.version(key, stop)

    async def top(self, spec: BoardSpec, key: BoardKey, start: int, stop: int) -> Top:
        return await self.checked(lambda: self._inner.top(spec, key, start, stop))

    async def page_from(
        self, spec: BoardSpec, key: BoardKey, at: tuple[str, int], n: int, before: bool
    ) -> Resumed:
        return await self.checked(lambda: self._inner.page_from(spec, key, at, n, before))

    async def around(
        self, spec: BoardSpec, key: BoardKey, player_id: str, neighbors: int
    ) -> Around | Estimated | None:
        return await self.checked(
            lambda: self._inner.around(spec, key, player_id, neighbors), _generation
        )

    async def places(
        self, spec: BoardSpec, key: BoardKey, player_ids: Sequence[str]
    ) -> list[Placed | None]:
        return await self.checked(lambda: self._inner.places(spec, key, player_ids))

    async def shared_ranks(
        self, spec: BoardSpec, key: BoardKey, scores: Sequence[int]
    ) -> dict[int, int]:
        return await self.checked(lambda: self._inner.shared_ranks(spec, key, scores))

    async def spread(self, spec: BoardSpec, key: BoardKey, buckets: int) -> Spread:
        return await self.checked(lambda: self._inner.spread(spec, key, buckets))
