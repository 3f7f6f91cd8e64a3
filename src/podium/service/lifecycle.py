"""The life of a window: it closes, accepts late results for ``freeze_after_s``, then
freezes into final standings (in the store, down to ``exact_top``) and an archive file (every
player). Prizes are paid from those, never from the live board.

Freezing is exactly once: the store's ``freeze`` refuses a second time, whoever asks (the
freezer role on schedule, ``workers/freezer.py``; an admin early; a restarted process).
Writing the archive is a separate, repeatable step, so a crash between the two is mended by
the next run. A player banned when the window freezes is in neither (``plan_freeze``), and
stays out of both for good: frozen standings are final, whatever an unban does later.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from podium.config.settings import Settings
from podium.domain.boards import BoardSpec
from podium.domain.models import FinalEntry, FrozenWindow
from podium.domain.plans import plan_freeze
from podium.domain.windows import Window, WindowKind
from podium.errors import InvalidInput, NotFound
from podium.ports import Clock, Windows
from podium.ports.archive import Archive
from podium.service.profiles import ProfileCache
from podium.service.views import Entry, Page, PlayerRank, entry, ranks_in_order
from podium.util.caching import Cache

log = logging.getLogger("podium.freezer")

FROZEN_CACHE_S = 1.0  # how long a process trusts its list of frozen windows
TOURNAMENTS_HELD = 1000  # tournament boards whose frozen windows one process holds besides


class Lifecycle:
    def __init__(
        self,
        settings: Settings,
        store: Windows,
        clock: Clock,
        archive: Archive,
        profiles: ProfileCache,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.archive = archive
        self.profiles = profiles
        # Each board's frozen windows, by board: one entry per configured board, and room for
        # the live tournaments' boards (tournaments.py), so that none is evicted while it is
        # still fresh (a full cache evicts on every record that asks of one more board).
        boards_held = max(1, len(settings.boards)) + TOURNAMENTS_HELD
        # Loaded again ahead of its end (util/caching.py): every match reads it first.
        self._frozen: Cache[str, dict[str, FrozenWindow]] = Cache(
            boards_held, FROZEN_CACHE_S, clock.now, refresh_ahead_s=FROZEN_CACHE_S / 2
        )

    # -- what is frozen ---------------------------------------------------------------

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        return await self._frozen.get_or_load(board, lambda: self.store.frozen(board))

    async def is_frozen(self, board: str, window_id: str) -> bool:
        return window_id in await self.frozen(board)

    # -- freezing ---------------------------------------------------------------------

    async def freeze(self, spec: BoardSpec, window: Window) -> tuple[bool, FrozenWindow]:
        """Freeze now (due or not: an admin may end a tournament early) and write the
        archive; (whether this call froze it, the frozen window)."""
        if spec.rule.kind is WindowKind.ALL:
            raise InvalidInput("an all-time board has no window to freeze")
        now = self.clock.now()
        if window.start > now:
            # Nothing can have counted for it yet: freezing it would only archive an empty
            # board and refuse every result that comes when it opens.
            raise InvalidInput(f"window {window.id} of {spec.name} has not started")
        froze = await self.store.freeze(spec, window, spec.exact_top, now)
        self._frozen.forget(spec.name)
        info = (await self.frozen(spec.name))[window.id]
        if info.archive is None:
            info = await self.write_archive(spec, window, info)
        if froze:
            log.info(
                "froze %s %s: %d players, archive %s",
                spec.name,
                window.id,
                info.players,
                info.archive,
            )
        return froze, info

    async def write_archive(
        self, spec: BoardSpec, window: Window, info: FrozenWindow
    ) -> FrozenWindow:
        """Every player of a frozen window, in board order, into the archive. The tallies of
        a frozen window never change again, so this gives the same file every time."""
        entries = await self.archived_entries(spec, window)
        name, checksum = await self.archive.write(spec.name, window.id, entries, info.frozen_at)
        await self.store.set_archive(spec.name, window.id, name, checksum)
        self._frozen.forget(spec.name)
        return FrozenWindow(info.board, info.window, info.frozen_at, info.players, checksum, name)

    async def archived_entries(self, spec: BoardSpec, window: Window) -> list[FinalEntry]:
        """Every player of a frozen window in board order, as its archive file holds them:
        the freeze's own plan (``plan_freeze``) kept whole, leaving out whom the freeze
        left out (banned then), not whoever is banned now, so that the file written again
        after an unban is the same."""
        rows = []
        async for batch in self.store.standings(spec.name, window.id):
            rows += [(s.player_id, s.tally) for s in batch]
        left_out = await self.store.left_out(spec.name, window.id)
        return plan_freeze(spec, window, rows, left_out, len(rows)).final

    # -- reading final standings ------------------------------------------------------

    async def final_page(self, spec: BoardSpec, window: Window, offset: int, stop: int) -> Page:
        rows = await self.store.final_page(spec.name, window.id, offset + 1, stop + 1)
        return Page(spec.name, window.id, self.clock.now(), await self._entries(rows))

    async def final_rank(
        self, spec: BoardSpec, window: Window, player_id: str, neighbors: int
    ) -> PlayerRank:
        mine = await self.store.final_entry(spec.name, window.id, player_id)
        if mine is None:
            raise NotFound(
                f"player {player_id} is not in the final standings of {spec.name} {window.id} "
                f"(they keep the top {spec.exact_top}; the archive has every player)"
            )
        first = max(1, mine.position - neighbors)
        rows = await self.store.final_page(spec.name, window.id, first, mine.position + neighbors)
        around = await self._entries(rows)
        return PlayerRank(spec.name, window.id, mine.rank, True, mine.points, around)

    async def final_friends(self, spec: BoardSpec, window: Window, ids: Sequence[str]) -> Page:
        found = [await self.store.final_entry(spec.name, window.id, p) for p in ids]
        present = sorted((e for e in found if e is not None), key=lambda e: e.position)
        names = await self.profiles.get([e.player_id for e in present])
        among = ranks_in_order(spec, [(e.player_id, e.points) for e in present], 1)
        entries = [
            entry(
                r,
                e.player_id,
                e.points,
                names.get(e.player_id),
                global_rank=e.rank,
                global_exact=True,  # final standings are exact
            )
            for r, e in zip(among, present, strict=True)
        ]
        return Page(spec.name, window.id, self.clock.now(), entries)

    async def _entries(self, rows: list[FinalEntry]) -> list[Entry]:
        names = await self.profiles.get([r.player_id for r in rows])
        return [entry(r.rank, r.player_id, r.points, names.get(r.player_id)) for r in rows]
