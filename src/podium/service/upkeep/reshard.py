"""A change of the index's shard count while the fleet runs (``podium rebuild --all --shards
M``; docs/architecture.md §8): every live window built under the new layout beside the live
one, compared with it, and switched for every window at once by the layout record
(``ports/layouts.py``).

A player's shard in the new layout is another slot than their shard in the live one, so no
one script can write both, as a rebuild of one layout does (``write.lua`` and its ``:next``
pointer). Every process writes both instead, by itself, from the moment it follows the
record's ``next`` (``index/redis/layout.py``: its views write every layout it names):

1. **Take the menders' rebuild lock** (a live shard that lost its data meanwhile is mended
   by the new layout, filled from the store) and **name the next layout** in the record
   (held under a time to live this process renews), after dropping any key of that layout a
   reshard that died left; then **wait** until every process can have followed it (two
   looks of ``index.watch_s`` and a margin). From then on every change the updaters apply,
   every ban and every profile lands in both layouts.
2. **Bans and profiles**: every ban in the store written to the new layout's ban sets of the
   windows rebuilt, and the store's profiles copied into its copy (``Rebuilds.copy_profiles``).
3. **Every window rebuilt into the new layout** by the rebuild without a gap
   (``service/upkeep/gapless.py``, the fill code itself: streamed pages, pipelined, the progress
   bar), compared with the live layout (counts, the top 1,000, a sample) and the difference
   printed, the log replayed from before it began (into both layouts, through the views),
   then switched inside the new layout, which no one reads yet.
4. **Mark** the new layout's shards (their generation markers), then **switch** the record:
   every process reads the new layout within ``index.watch_s``. One that has not yet
   followed reads the old one, which every process still writes (a process writes the
   layout it left until every other can have followed), so no read finds a player missing
   or behind by more than the write in flight; the log needs no second replay.
5. **Drop the old layout's keys** once every process follows the new one and ``--grace``
   has passed.

Knows the ports, never an adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence

from podium.config.settings import Settings
from podium.errors import Conflict, Unavailable
from podium.ports import Clock, RankIndex
from podium.ports.layouts import Layouts
from podium.service.boards import Boards, Changed
from podium.service.upkeep.gapless import GaplessRebuild, Outcome, Progress, Quiet, Target
from podium.service.upkeep.rebuilds import Rebuilds, RebuildStore

log = logging.getLogger("podium.resharding")

HOLD_S = 30.0  # the record's next layout held this long, renewed every third of it


class Reshard:
    def __init__(
        self,
        settings: Settings,
        store: RebuildStore,
        layouts: Layouts,
        live: RankIndex,
        clock: Clock,
        boards: Boards,
        changed: Changed,
        replay: Callable[[float], Awaitable[int]] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.layouts = layouts
        self.live = live  # the live layout's boards, as every read sees them
        self.clock = clock
        self.boards = boards
        self.changed = changed  # this process's pages, read again on the new layout
        self.replay = replay

    async def run(
        self,
        targets: Sequence[Target],
        count: int,
        *,
        grace_s: float = 10.0,
        progress: Progress | None = None,
    ) -> list[Outcome]:
        progress = progress or Quiet()
        await self.layouts.follow()
        was, tagged = self.layouts.count, self.layouts.tagged
        if count == was:
            raise Conflict(f"the index has {count} shards already")
        if count < 2 or was < 2:
            raise Conflict(
                "a reshard goes from a split index to a split index (2 shards or more): "
                "one shard is read without the aggregator; set index.shards and restart"
            )
        left = await self.layouts.drop(count, True)  # what a reshard that died left
        if left:
            progress.say(f"dropped {left:,} keys a reshard to {count} shards had left")
        # The menders' rebuild lock, held throughout: a shard of the live layout that lost
        # its data meanwhile is not refilled by a mender; the new layout, filled from the
        # store, is what mends it (and a mender that holds the lock makes this wait).
        marks, token = self.layouts.markers_of(count), secrets.token_hex(8)
        if not await marks.lock(token, HOLD_S):
            raise Conflict("the index is being rebuilt (a mender holds its lock); run it again")
        if not await self.layouts.begin(count, HOLD_S):
            with contextlib.suppress(Exception):
                await marks.unlock(token)
            raise Conflict("another reshard of the index is under way")
        lost: list[bool] = []
        keeper = asyncio.create_task(self._keep(count, token, lost))
        try:
            await self.layouts.follow()  # this process writes both from now
            wait = await self.layouts.wait_s()
            progress.phase("waiting for every process to write both layouts")
            progress.say(f"{was} -> {count} shards: {wait:g}s for every process to write both")
            await asyncio.sleep(wait)
            outcomes = await self._build(targets, count, progress)
            if lost:
                raise Unavailable("the reshard's hold on the next layout ran out; nothing switched")
            progress.phase("switching the layout")
            await marks.mark(list(range(count)), token, self.clock.now())
            await self.layouts.switch(count)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.layouts.end(count)
                await self.layouts.drop(count, True)
            raise
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            with contextlib.suppress(Exception):
                await marks.unlock(token)
        await self.layouts.follow()
        self.changed(self.clock.now())
        log.warning("the index's layout record switched from %d to %d shards", was, count)
        progress.say(
            f"switched to {count} shards; the old layout's keys go in {wait + grace_s:g}s "
            f"(every process follows within {wait:g}s, then --grace)"
        )
        progress.phase("keeping the old layout until every process follows")
        await asyncio.sleep(wait + grace_s)
        progress.phase("dropping the old layout")
        dropped = await self.layouts.drop(was, tagged)
        progress.say(f"dropped the {was} shards' {dropped:,} keys")
        return outcomes

    async def _build(
        self, targets: Sequence[Target], count: int, progress: Progress
    ) -> list[Outcome]:
        new = self.layouts.index_of(count)
        banned = sorted(await self.store.every_ban())
        keys = [t.key for t in targets]
        if banned and keys:
            progress.say(f"{len(banned):,} bans into the new layout's windows")
            for player in banned:
                await new.ban(keys, player)
        copier = Rebuilds(
            self.settings,
            self.store,
            new,
            self.layouts.copy_of(count),
            self.clock,
            self.boards,
            self.changed,
        )
        profiles = await copier.copy_profiles()
        if profiles is None:
            raise Unavailable("the new layout's copy of profiles was taken over; run it again")
        progress.say(f"copied {profiles:,} profiles into the new layout")
        rebuild = GaplessRebuild(
            self.settings, self.store, new, self.live, self.clock, self.changed, self.replay
        )
        # Switched inside the new layout at once (no reader there yet): no grace to wait.
        return await rebuild.run(targets, grace_s=0.0, progress=progress)

    async def _keep(self, count: int, token: str, lost: list[bool]) -> None:
        marks = self.layouts.markers_of(count)
        while True:
            await asyncio.sleep(HOLD_S / 3)
            with contextlib.suppress(Unavailable):  # the next renewal may get through
                if not await self.layouts.keep(count, HOLD_S):
                    lost.append(True)
                await marks.lock(token, HOLD_S)
