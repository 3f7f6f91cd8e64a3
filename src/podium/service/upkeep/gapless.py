"""The rebuild without a gap (``podium rebuild``; docs/architecture.md, "Rebuilds without a
gap"): board windows refilled from the store into a new generation of their keys while the
live one answers every read, then switched in at once.

1. The log's position is noted first (as a time: a replay of the log is from a time,
   ``ChangeLog.replay``), and a new generation of each window is opened
   (``Rebuilding.begin_build``): from then on every write of the updaters is applied to both
   generations in the same step.
2. The store's tallies are streamed in pages into the new generation (``fill_build``), the
   next page read while the last one is written, a few pages in memory at most.
3. The log from the noted position is applied again (what the updaters applied while the
   store was read, so that an entry the fill wrote older than the updaters' is made new).
4. The new generation is compared with the live one (members, the top, a sample of ranks:
   ``domain/comparison.py``) and the difference reported.
5. Every window is switched at once (``switch_build``, one step per shard), and the old
   generation dropped after a grace period.

Knows the ports, never an adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import secrets
import time
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from podium.config.settings import Settings
from podium.domain.boards import BoardSpec, Order
from podium.domain.comparison import Difference, compare
from podium.domain.windows import Window, index_expiry
from podium.errors import Conflict, Unavailable
from podium.ports import BoardKey, Clock, Meta, RankIndex, Rebuilding, TallyRow
from podium.service.boards import Changed
from podium.service.upkeep.rebuilds import RebuildStore

log = logging.getLogger("podium.rebuilding")

RACE_S = 5.0  # the log from this long before the rebuild began is applied again
HOLD_S = 30.0  # a new generation's hold, renewed every third of it while the rebuild runs
TOP = 1000  # top rows compared
SAMPLE = 1000  # sampled ranks compared
QUEUED = 4  # pages read ahead of each stage of the fill: with WRITERS, what bounds its memory
WRITERS = 16  # pages written to the index at once, each on a connection of its own (below)


class Reservoir:
    """A uniform sample of ``k`` members of a stream of pages (Li's algorithm L: it draws a
    few numbers per member kept, not one per member seen)."""

    def __init__(self, k: int, rng: random.Random | None = None) -> None:
        self.k, self._seen = k, 0
        self.held: list[str] = []
        self._rng = rng or random.Random(time.time_ns())
        self._w = math.exp(math.log(self._rng.random()) / k)
        self._next = k + self._skip()

    def _skip(self) -> int:
        return int(math.log(self._rng.random()) / math.log(1 - self._w))

    def offer(self, page: Sequence[tuple[str, int]]) -> None:
        first = self._seen
        self._seen += len(page)
        if len(self.held) < self.k:
            take = page[: self.k - len(self.held)]
            self.held += [m for m, _ in take]
        while self._next < self._seen:
            self.held[self._rng.randrange(self.k)] = page[self._next - first][0]
            self._w *= math.exp(math.log(self._rng.random()) / self.k)
            self._next += self._skip() + 1


class Progress(Protocol):
    """What a rebuild tells whoever watches it (the command's progress bar)."""

    def begin(self, what: str, total: int | None) -> None: ...
    def advance(self, members: int) -> None: ...
    def say(self, text: str) -> None: ...
    def phase(self, name: str) -> None:
        """The step the run is at ("filling", "replaying", "comparing", "switching", ...)."""
        ...


class Quiet:
    def begin(self, what: str, total: int | None) -> None:
        return None

    def advance(self, members: int) -> None:
        return None

    def say(self, text: str) -> None:
        log.info("%s", text)

    def phase(self, name: str) -> None:
        return None


@dataclass(frozen=True)
class Target:
    spec: BoardSpec
    window: Window

    @property
    def key(self) -> BoardKey:
        return BoardKey(self.spec.name, self.window.id)


@dataclass(frozen=True)
class Outcome:
    key: BoardKey
    members: int
    difference: Difference | None  # None where the comparison was left out


class GaplessRebuild:
    """One run of the procedure over one or more board windows, switched together."""

    def __init__(
        self,
        settings: Settings,
        store: RebuildStore,
        index: Rebuilding,
        live: RankIndex,
        clock: Clock,
        changed: Changed,
        replay: Callable[[float], Awaitable[int]] | None = None,
        told: Callable[[Sequence[Target]], AbstractAsyncContextManager[Progress]] | None = None,
    ) -> None:
        self.settings = settings
        # how a rebuild ``one`` asks for (the mender's) tells every process how far it is
        # (``progress.py``); ``podium rebuild`` wraps its own bar the same way
        self.told = told
        self.store = store
        self.index = index
        self.live = live
        self.clock = clock
        self.changed = changed  # this process's pages, read again after the switch
        self.replay = replay  # the log from a time applied again; None: the caller replays

    async def run(
        self,
        targets: Sequence[Target],
        *,
        grace_s: float = 10.0,
        progress: Progress | None = None,
        compared: bool = True,
    ) -> list[Outcome]:
        progress = progress or Quiet()
        noted = self.clock.now()  # the log's position, as a time (step 1)
        token = secrets.token_hex(6)
        opened: list[Target] = []
        try:
            for t in targets:
                if not await self.index.begin_build(t.key, token, HOLD_S):
                    raise Conflict(f"another rebuild of {t.spec.name} {t.window.id} is under way")
                opened.append(t)
            lost: list[BoardKey] = []
            keeper = asyncio.create_task(self._keep(opened, token, lost))
            try:
                progress.phase("filling")
                filled = [await self._fill(t, token, progress) for t in targets]  # step 2
                replayed = 0
                if self.replay is not None:  # step 3
                    progress.phase("replaying the log")
                    progress.say("applying the log again from before the rebuild began")
                    replayed = await self.replay(self.clock.now() - noted + RACE_S)
                    progress.say(f"applied {replayed:,} changes of the log again")
                progress.phase("comparing" if compared else "checking")
                diffs = [
                    await self._compare(t, token, sample) if compared else None
                    for t, (_, sample) in zip(targets, filled, strict=True)
                ]
                for t, d in zip(targets, diffs, strict=True):
                    if d is not None:  # said before the switch, as the operator decides on it
                        progress.say(
                            f"{t.spec.name} {t.window.id}, the new generation against the live one:"
                        )
                        for line in d.lines():
                            progress.say(f"  {line}")
                if lost:
                    raise Unavailable(f"the rebuild's hold on {lost[0]} ran out; nothing switched")
                progress.phase("switching")
                switched = await asyncio.gather(  # step 5: every window at once
                    *(
                        self.index.switch_build(
                            t.key, token, expire_at=index_expiry(t.window), grace_s=grace_s
                        )
                        for t in targets
                    )
                )
            finally:
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper
        except BaseException:
            for t in opened:
                with contextlib.suppress(Exception):
                    await self.index.abort_build(t.key, token)
            raise
        self.changed(self.clock.now())  # as after a ban
        if not all(switched):
            raise Unavailable("a rebuild's hold ran out before its switch; run it again")
        progress.say(f"switched {len(targets)} board windows; the old keys go in {grace_s:g}s")
        if grace_s > 0:
            progress.phase("keeping the old keys for the grace")
            await asyncio.sleep(grace_s)  # reads begun on the old keys finish
        progress.phase("dropping the old keys")
        for t in targets:
            await self.index.drop_build(t.key, token)
        return [Outcome(t.key, n, d) for t, (n, _), d in zip(targets, filled, diffs, strict=True)]

    async def one(self, spec: BoardSpec, window: Window) -> int:
        """One window as ``Rebuilds.rebuild`` asks for it on a shared index: switched with
        no grace and not compared (the operator's ``podium rebuild`` asks for both through
        ``run``); how many entries."""
        targets = [Target(spec, window)]
        if self.told is None:
            [done] = await self.run(targets, grace_s=0.0, compared=False)
            return done.members
        async with self.told(targets) as progress:
            [done] = await self.run(targets, grace_s=0.0, compared=False, progress=progress)
        return done.members

    async def _keep(self, targets: Sequence[Target], token: str, lost: list[BoardKey]) -> None:
        while True:
            await asyncio.sleep(HOLD_S / 3)
            for t in targets:
                with contextlib.suppress(Unavailable):  # the next renewal may get through
                    if not await self.index.keep_build(t.key, token, HOLD_S):
                        lost.append(t.key)

    async def _fill(self, t: Target, token: str, progress: Progress) -> tuple[int, list[str]]:
        """The store's tallies of the window into the new generation, page by page; how
        many, and a uniform sample of ``SAMPLE`` of their members, to compare ranks.

        Three stages at once, each a page ahead of the next (``QUEUED`` pages held at most,
        so memory stays bounded whatever the board's size): the store's pages read, each
        page's bans asked and its scores packed, and ``WRITERS`` pages written to the index
        at a time, so that the store, this process and the index work side by side."""
        spec, key = t.spec, t.key
        total = await self.store.tally_count(spec.name, t.window.id)
        progress.begin(f"{spec.name} {t.window.id}", total)
        versioned, descending = self.settings.versioned(spec), spec.order is Order.DESC
        encode, start = spec.codec.encode, t.window.start
        raw: asyncio.Queue[list[TallyRow] | None] = asyncio.Queue(QUEUED)
        pages: asyncio.Queue[tuple[list[tuple[str, int]], list[int], list[Meta] | None] | None]
        pages = asyncio.Queue(QUEUED)

        async def fetch() -> None:
            async for batch in self.store.tally_rows(spec.name, t.window.id):
                await raw.put(batch)
            await raw.put(None)

        # Asked once, not with each page (an array of 10,000 ids a page cost more than the
        # page's own read): a ban recorded meanwhile is applied to both generations by the
        # index itself (``RankIndex.ban``), and again at the switch.
        banned = await self.store.every_ban()

        async def sift() -> None:
            while (batch := await raw.get()) is not None:
                if banned:
                    batch = [r for r in batch if r[0] not in banned]
                # Comprehensions, not one loop with appends: this runs for every member.
                entries = [(p, encode(total, at - start)) for p, total, at, _, _ in batch]
                versions = [r[3] for r in batch]
                meta = any(r[4] is not None for r in batch)
                metadata = [(r[3], r[4]) for r in batch] if meta else []
                # Metadata only where some entry has any (as ``Rebuilds.rebuild``).
                await pages.put((entries, versions, metadata if meta else None))
            await pages.put(None)

        async def write(page: tuple[list[tuple[str, int]], list[int], list[Meta] | None]) -> None:
            entries, versions, metadata = page
            await self.index.fill_build(
                key,
                token,
                entries,
                descending=descending,
                versions=versions if versioned else None,
                metadata=metadata,
            )
            progress.advance(len(entries))

        stages = [asyncio.create_task(fetch()), asyncio.create_task(sift())]
        sampler, n = Reservoir(SAMPLE), 0
        writing: set[asyncio.Task[None]] = set()
        try:
            while (page := await pages.get()) is not None:
                sampler.offer(page[0])
                n += len(page[0])
                if len(writing) >= WRITERS:
                    done, writing = await asyncio.wait(writing, return_when=FIRST_COMPLETED)
                    for d in done:
                        d.result()  # its error, if it had one
                writing.add(asyncio.create_task(write(page)))
            if writing:
                await asyncio.gather(*writing)
            await asyncio.gather(*stages)  # their errors, if they had one
        finally:
            for task in (*stages, *writing):
                task.cancel()
            await asyncio.gather(*stages, *writing, return_exceptions=True)
        return n, sampler.held

    async def _compare(self, t: Target, token: str, sample: list[str]) -> Difference:
        """Step 4: counts, the top rows and a sample of ranks of both generations."""
        key, desc, new = t.key, t.spec.order is Order.DESC, self.index.built(token)
        live_n, new_n = await asyncio.gather(self.live.count(key), new.count(key))
        live_top, new_top = await asyncio.gather(
            self.live.page(key, 0, TOP - 1, descending=desc),
            new.page(key, 0, TOP - 1, descending=desc),
        )
        live_at, new_at = await asyncio.gather(
            self.live.ranks(key, sample, descending=desc), new.ranks(key, sample, descending=desc)
        )
        return compare(
            live_n,
            new_n,
            live_top,
            new_top,
            sample,
            [None if p is None else (p.rank, p.score) for p in live_at],
            [None if p is None else (p.rank, p.score) for p in new_at],
        )
