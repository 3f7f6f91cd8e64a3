"""Which shard layout of a split Redis index is live, and the one indirection every process
reads it through, so that ``podium rebuild --all --shards M`` (``service/upkeep/reshard.py``, §8 of
docs/architecture.md) changes the shard count under a running fleet.

- **The record** (``RedisLayout``, keys ``Keys.layout`` and ``Keys.layout_next``, one slot):
  absent, the live layout is the configured ``index.shards`` under the plain tags
  (``{s03}``), so an existing deployment is unchanged; present, it holds the live count,
  whose shards' tags carry it (``{s03.32}``, ``keys.shard_tag``). While a reshard runs,
  ``layout:next`` names the count it builds, under a time to live the reshard renews.
- **The holder** (``Layout``): the parts of the live layout (its ``SplitIndex``, the copy
  of profiles that index keeps, its generation markers) and, while a reshard runs, those of
  the next. ``follow`` reads the record (at start, and every ``index.watch_s`` after) and
  swaps the parts when it changed, logging a line and counting
  ``podium_index_layout_switches_total``; a process whose ``index.shards`` differs from the
  record follows the record and says to update the file.
- **The views** (``LiveIndex``, ``LiveCopy``, ``LiveGenerations``, ``LiveShards``): what
  the service, the reads and the roles keep instead of the parts themselves. Each reads
  delegate to the live layout's part at the moment of the call (a read begun on one layout
  ends on it: a ``SplitIndex`` method holds its own shards); each write (a score, a removal,
  a ban, a profile) goes to the live layout and, while a reshard builds the next, to the
  next as well: the two layouts' shards are other slots, so no one script writes both, and
  the process writes each itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from podium import metrics
from podium.domain.models import Profile
from podium.index.redis.errors import translated
from podium.index.redis.keys import Keys, layout_pattern
from podium.index.split.index import SplitIndex
from podium.ports import BoardKey, Meta, ProfileCopy, ShardIndex
from podium.ports.generations import Generations

log = logging.getLogger("podium.layout")

UNLINK_BATCH = 500  # keys a call when an old layout's keys are dropped


@dataclass(frozen=True)
class Parts:
    """One layout of the split index: its shard count, whether its tags carry the count
    (a layout a reshard built) or are the plain ones (the configured layout)."""

    count: int
    tagged: bool
    split: SplitIndex
    copy: ProfileCopy
    generations: Generations

    @property
    def name(self) -> str:
        return f"{self.count} shards" + (" (tagged)" if self.tagged else "")


class RedisLayout:
    """The layout record in the index (``Keys.layout``): the live count, and while a reshard
    runs, the count it builds (``Keys.layout_next``, held under a time to live)."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self._r = client
        self._live, self._next = keys.layout(), keys.layout_next()

    async def read(self) -> tuple[int | None, int | None]:
        """The live count (None: no record, the configured one) and the next (None: none)."""
        with translated:
            live, nxt = await self._r.mget([self._live, self._next])
        return _count(live), _count(nxt)

    async def begin(self, count: int, ttl_s: float) -> bool:
        """Name ``count`` as the layout being built; False if another reshard runs."""
        with translated:
            return bool(await self._r.set(self._next, str(count), nx=True, px=_ms(ttl_s)))

    async def keep(self, count: int, ttl_s: float) -> bool:
        """Renew the hold on the next layout; False if it ran out or is another's."""
        with translated:
            if await self._r.get(self._next) != str(count):
                return False
            return bool(await self._r.pexpire(self._next, _ms(ttl_s)))

    async def switch(self, count: int) -> None:
        """The switch: ``count`` is the live layout, for every window at once."""
        with translated:
            async with self._r.pipeline(transaction=True) as p:  # one slot: one MULTI
                p.set(self._live, str(count))
                p.delete(self._next)
                await p.execute()

    async def end(self, count: int) -> None:
        """A reshard given up: the next layout no longer named (if it still is ``count``)."""
        with translated:
            if await self._r.get(self._next) == str(count):
                await self._r.delete(self._next)

    async def drop(self, count: int, tagged: bool, prefix: str) -> int:
        """Every key of a layout (each shard's boards, bans, profiles, markers) unlinked;
        how many. On Redis Cluster the scan asks every primary."""
        pattern = layout_pattern(prefix, count, tagged)
        n, batch = 0, []
        with translated:
            async for key in self._r.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= UNLINK_BATCH:
                    n += await self._unlink(batch)
                    batch = []
            if batch:
                n += await self._unlink(batch)
        return n

    async def _unlink(self, keys: list[str]) -> int:
        # A key a command, pipelined: on Redis Cluster they are in several slots (and its
        # pipeline's multi-key UNLINK is a coroutine of its own, never queued).
        async with self._r.pipeline(transaction=False) as p:
            for k in keys:
                p.execute_command("UNLINK", k)
            return sum(int(n) for n in await p.execute())


def _count(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class Layout:
    """The live layout of this process's split index, and the next while a reshard runs;
    ``parts(count, tagged)`` makes a layout's parts (bootstrap's, on the one client)."""

    def __init__(
        self,
        record: RedisLayout,
        parts: Callable[[int, bool], Parts],
        configured: int,
        prefix: str,
        watch_s: float,
    ) -> None:
        self.record = record
        self._make = parts
        self._made: dict[tuple[int, bool], Parts] = {}
        self.configured = configured
        self.prefix = prefix
        self.live = self.parts(configured, False)
        self.next: Parts | None = None
        # After a switch, the layout left is written too until every process can have
        # followed (``trail_s``): one still reading it meanwhile reads it current.
        self.left: Parts | None = None
        self._left_until = 0.0
        self._watch_s = watch_s
        self._warned: int | None = None

    # -- the reshard's side (ports/layouts.py) -----------------------------------------------

    @property
    def count(self) -> int:
        return self.live.count

    @property
    def tagged(self) -> bool:
        return self.live.tagged

    def index_of(self, count: int) -> SplitIndex:
        return self.parts(count, True).split

    def copy_of(self, count: int) -> ProfileCopy:
        return self.parts(count, True).copy

    def markers_of(self, count: int) -> Generations:
        return self.parts(count, True).generations

    async def begin(self, count: int, ttl_s: float) -> bool:
        return await self.record.begin(count, ttl_s)

    async def keep(self, count: int, ttl_s: float) -> bool:
        return await self.record.keep(count, ttl_s)

    async def switch(self, count: int) -> None:
        await self.record.switch(count)

    async def end(self, count: int) -> None:
        await self.record.end(count)

    async def drop(self, count: int, tagged: bool) -> int:
        return await self.record.drop(count, tagged, self.prefix)

    async def wait_s(self) -> float:
        """Two looks of every process's watch, and a margin for a slow one."""
        return 2 * self._watch_s + 1.0

    # -- every process's side ---------------------------------------------------------------

    def parts(self, count: int, tagged: bool) -> Parts:
        """A layout's parts, made once and kept (they share the index's client)."""
        if (count, tagged) not in self._made:
            self._made[(count, tagged)] = self._make(count, tagged)
        return self._made[(count, tagged)]

    def wanted(self, live: int | None, nxt: int | None) -> tuple[Parts, Parts | None]:
        """The parts a record names: the configured layout without one, else its count's
        tagged layout; and the next one's, while a reshard builds it."""
        now = self.parts(self.configured, False) if live is None else self.parts(live, True)
        return now, None if nxt is None else self.parts(nxt, True)

    async def follow(self) -> bool:
        """Read the record and follow it; True if the live layout changed."""
        live, nxt = await self.record.read()
        if live is not None and live != self.configured and self._warned != live:
            self._warned = live
            log.warning(
                "index.shards is %d in the settings, but the index's layout record says %d "
                "(a reshard, podium rebuild --all --shards): following the record; set "
                "index.shards = %d in the settings file", self.configured, live, live,
            )  # fmt: skip
        now, upcoming = self.wanted(live, nxt)
        if upcoming is not self.next:
            if upcoming is not None:
                log.info("the index's shards are being rebuilt as %s: writing both", upcoming.name)
            self.next = upcoming
        if now is self.live:
            return False
        was, self.live = self.live, now
        # Every other process follows within watch_s of the switch, so within watch_s of
        # this one's look too; the trail ends before the reshard drops the layout left
        # (two watch_s and a second after its switch, then its grace).
        self.left, self._left_until = was, time.monotonic() + self._watch_s + 1.0
        metrics.INDEX_LAYOUT_SWITCHES.inc()
        metrics.INDEX_SHARDS.set(now.count)
        log.warning("the index's layout switched from %s to %s", was.name, now.name)
        return True

    async def step(self) -> int:
        """The watch (a runner's step, every ``index.watch_s``): the record followed."""
        await self.follow()
        return 0

    def both(self) -> list[Parts]:
        """Where a write goes: the live layout; the next while one is built; the one left
        until every process can have followed the switch."""
        out = [self.live]
        if self.next is not None and self.next is not self.live:
            out.append(self.next)
        if self.left is not None and self.left is not self.live:
            if time.monotonic() < self._left_until:
                out.append(self.left)
            else:
                self.left = None
        return out


class _Late:
    """A view whose calls reach the live layout's part at the moment of each call, even one
    bound once and kept (``service/ranks/marked.py`` keeps ``tokens``): never the part that was live
    when it was looked up."""

    layout: Layout

    def _part(self) -> Any:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._part(), name)
        if not callable(attr):
            return attr

        def late(*args: Any, **kwargs: Any) -> Any:
            return getattr(self._part(), name)(*args, **kwargs)

        return late


class LiveIndex(_Late):
    """The split index of the live layout, as one ``RankIndex`` (and ``SplitBoards``,
    ``Rebuilding``): reads delegate to the live layout's ``SplitIndex`` at the moment of the
    call; writes go to every layout ``Layout.both`` names, the live one's answer returned."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def _part(self) -> Any:
        return self.layout.live.split

    @property
    def shards(self) -> LiveShards:
        return LiveShards(self.layout)

    @property
    def shard_count(self) -> int:
        return self.layout.live.split.shard_count

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
        done = await asyncio.gather(
            *(
                p.split.write(
                    key,
                    entries,
                    descending=descending,
                    expire_at=expire_at,
                    versions=versions,
                    metadata=metadata,
                )
                for p in self.layout.both()
            )
        )
        return done[0]

    async def remove(
        self,
        key: BoardKey,
        members: Sequence[str],
        versions: Sequence[int],
        *,
        expire_at: int | None,
    ) -> int:
        layouts = self.layout.both()
        done = await asyncio.gather(
            *(p.split.remove(key, members, versions, expire_at=expire_at) for p in layouts)
        )
        return done[0]

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        await asyncio.gather(*(p.split.ban(keys, player_id) for p in self.layout.both()))

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        await asyncio.gather(*(p.split.unban(keys, player_id) for p in self.layout.both()))

    async def close(self) -> None:
        await self.layout.live.split.close()  # every layout shares the one client


class LiveCopy(_Late):
    """The copy of profiles of the live layout; a profile written goes to the next too."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def _part(self) -> Any:
        return self.layout.live.copy

    async def write_profiles(self, entries: Sequence[tuple[Profile, int]]) -> int:
        done = await asyncio.gather(*(p.copy.write_profiles(entries) for p in self.layout.both()))
        return done[0]


class LiveGenerations(_Late):
    """The generation markers of the live layout (``ports/generations.py``). A read's check
    (``service/ranks/marked.py``) that finds markers of another number than before it read saw the
    layout switch, not a rebuild: both layouts were whole."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def _part(self) -> Any:
        return self.layout.live.generations


class LiveShards(Sequence[ShardIndex]):
    """The live layout's shards, as the aggregator and the replay's filter see them."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def _now(self) -> list[ShardIndex]:
        return self.layout.live.split.shards

    def __len__(self) -> int:
        return len(self._now())

    @overload
    def __getitem__(self, i: int) -> ShardIndex: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[ShardIndex]: ...
    def __getitem__(self, i: int | slice) -> ShardIndex | Sequence[ShardIndex]:
        return self._now()[i]

    def __iter__(self) -> Iterator[ShardIndex]:
        return iter(self._now())
