"""The index refilled from the store (invariant 1: the index is a copy): one board window
(``podium rebuild``), every window whose index key still lives (the start of the in-process
index), and the index's copy of profiles (at start, and by an updater that finds it gone).

Knows the ports, never an adapter.
"""

from __future__ import annotations

import logging
import secrets
from typing import Protocol

from podium.config.settings import Settings
from podium.domain.boards import BoardSpec
from podium.domain.cohorts import cohort_window
from podium.domain.windows import Window, index_expiry, indexed_window
from podium.ports import BoardKey, Clock, Meta, Players, ProfileCopy, RankIndex, Windows
from podium.service.boards import Boards, Changed

log = logging.getLogger("podium.rebuilds")

# A copier of profiles that stops (its process died) holds the copy this long at most; one
# that lives renews it with each page of 5,000 profiles (pages of 1,000 made a start with a
# million profiles a thousand reads and lease renewals).
COPY_LEASE_S = 60.0


class RebuildStore(Players, Windows, Protocol):
    """What a rebuild reads: the tallies of a window (``Windows.tally_rows``), who is
    banned, every profile (``Players``)."""


class Beside(Protocol):
    """A shared index's way to rebuild a board window (``gapless.py``): beside its live
    generation, which answers every read meanwhile, then switched in; how many entries."""

    async def one(self, spec: BoardSpec, window: Window) -> int: ...


class Rebuilds:
    def __init__(
        self,
        settings: Settings,
        store: RebuildStore,
        index: RankIndex,
        copy: ProfileCopy,
        clock: Clock,
        boards: Boards,
        changed: Changed,
        beside: Beside | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.index = index
        self.copy = copy
        self.clock = clock
        self.boards = boards
        self.changed = changed  # this process's pages, read again after a rebuild
        # A shared index (Redis) is rebuilt beside its live generation (gapless.py), as
        # bootstrap picks; the in-process index (None) is refilled in place at start,
        # before any read, where one sort of the whole board is the fastest way in.
        self.beside = beside

    async def rebuild(self, board: str, window_id: str) -> int:
        """Replace one board window in the index with what the store holds."""
        spec = self.boards.board(board)
        # A league's cohort is a window of its board (domain/cohorts.py) no read names.
        w = cohort_window(spec.rule, window_id) or self.boards.window(spec, window_id)
        if self.beside is not None:
            return await self.beside.one(spec, w)
        # Plain rows and lists, the codec's encode bound once: this loop runs for every
        # entry of the board (a million at an embedded start), so each object and lookup
        # per row shows in the start's time (BENCHMARKS.md, issue 23).
        encode, start = spec.codec.encode, w.start
        entries: list[tuple[str, int]] = []
        versions: list[int] = []
        texts: list[str | None] = []
        # Bans asked once, not with each page of rows (an IN of the page's ids was 11.5% of a
        # start of three boards, BENCHMARKS.md "Embedded start"). This fill runs before the
        # process serves (or where the index was lost), so no ban lands between the two.
        banned = await self.store.every_ban()
        async for batch in self.store.tally_rows(board, w.id):
            for player, total, reached_at, version, text in batch:
                if player not in banned:
                    entries.append((player, encode(total, reached_at - start)))
                    versions.append(version)
                    texts.append(text)
        # Metadata only where some entry has any: every adapter keeps an entry's metadata
        # only when it has a text, so None says the same as a (version, None) per entry.
        metadata: list[Meta] | None = None
        if any(t is not None for t in texts):
            metadata = list(zip(versions, texts, strict=True))
        await self.index.replace(
            BoardKey(board, w.id),
            entries,
            expire_at=index_expiry(w),
            versions=versions if self.settings.versioned(spec) else None,
            metadata=metadata,
        )
        self.changed(self.clock.now())  # as after a ban
        return len(entries)

    async def rebuild_live(self) -> int:
        """Rebuild every window whose index key would still exist (start-up of the
        in-process index; the mender's refill of an index that lost its data)."""
        total = 0
        for spec, w in await self.live_windows():
            total += await self.rebuild(spec.name, w.id)
        return total

    async def live_windows(self) -> list[tuple[BoardSpec, Window]]:
        """Every configured board's windows whose index key would still exist."""
        now = self.clock.now()
        out = []
        for spec in self.settings.boards:
            for window_id in await self.store.windows(spec.name):
                if (w := indexed_window(spec.rule, window_id, now)) is not None:
                    out.append((spec, w))
        return out

    async def copy_profiles(self, page: int = 5000) -> int | None:
        """Copy every profile from the store into the index, then mark the copy complete;
        return how many, or None if another copier is at it (or took over). Profiles that
        change meanwhile come through the outbox with newer versions, so the copy can be
        taken while the service runs."""
        token = secrets.token_hex(8)
        if not await self.copy.begin_profiles_copy(token, self.clock.now(), COPY_LEASE_S):
            return None
        after, n = "", 0
        while batch := await self.store.all_profiles(after, page):
            await self.copy.write_profiles(batch)
            after = batch[-1][0].player_id
            n += len(batch)
            if not await self.copy.keep_profiles_copy(token, self.clock.now(), COPY_LEASE_S):
                break
        else:
            if await self.copy.end_profiles_copy(token):
                return n
        log.warning("the copy of profiles was lost or taken over while this process filled it")
        return None
