"""Leagues, the use cases: a match's cohort targets by player, a cohort read (a player's, or
by id), where a player stands on each league board, and the freeze of a window's cohorts
with their tier moves.

A cohort is a window of its league board (``domain/cohorts.py``): the record path folds a
result into it in the same transaction as the board's (``matches.py`` asks ``targets``
here; the store places a player on their first result), the updater writes it to the index
as any window, and its freeze is the store's, exactly once (``freeze_due``).

Knows the ports, never an adapter.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from podium.config.settings import Settings
from podium.domain import cohorts
from podium.domain.boards import BoardSpec, Order
from podium.domain.models import Target
from podium.domain.validation import id_problem
from podium.domain.windows import Window, WindowError, index_expiry
from podium.errors import InvalidInput, NotFound
from podium.ports import BoardKey, Clock, RankIndex
from podium.ports.cohorts import Cohort, CohortStore, Standing
from podium.service.lifecycle import Lifecycle
from podium.service.profiles import ProfileCache
from podium.service.ranks.marked import MarkedRanks
from podium.service.reads.freshness import Freshness, label_of, labelled
from podium.service.views import Entry, entry, ranks_in_order
from podium.util.caching import Cache

if TYPE_CHECKING:  # only the type: the rebuilds are handed to rebuild_live by its caller
    from podium.service.upkeep.rebuilds import Rebuilds

log = logging.getLogger("podium.leagues")

PLACED_HELD = 100_000  # placements one process remembers (a placement never changes)
PLACED_HELD_S = 3600.0
LOOKBACK = 3  # closed windows per league board whose cohorts each freezer pass looks at


@dataclass(frozen=True, slots=True)
class CohortView:
    """A cohort as the API answers it: every member with rank and points (frozen: its
    final standings), where promotion and demotion start, and when its window ends."""

    board: str
    id: str
    window: str
    tier: str
    size: int  # cohort_size: how many it takes
    ends_at: int | None
    frozen: bool
    zones: cohorts.Zones
    members: list[Entry]
    as_of: float


class Leagues:
    def __init__(
        self,
        settings: Settings,
        store: CohortStore,
        index: RankIndex,
        lifecycle: Lifecycle,
        profiles: ProfileCache,
        clock: Clock,
        marked: MarkedRanks | None = None,
        freshness: Freshness | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.index = index
        # On a Redis index (bootstrap passes the reads' own): a live cohort's read is
        # checked against the generation markers as every board read is, so an emptied
        # index answers 503 (the board is being rebuilt), never an empty cohort.
        self.marked = marked
        # How far the board is behind the store: a live cohort read from it is labelled as
        # the reads' answers are (``reads/freshness.py``). None: never labelled.
        self.freshness = freshness
        self.lifecycle = lifecycle
        self.profiles = profiles
        self.clock = clock
        self.boards = {b.name: b for b in settings.boards if b.league is not None}
        self._placed: Cache[tuple[str, str, str], str] = Cache(
            PLACED_HELD, PLACED_HELD_S, clock.now
        )

    # -- the record path ------------------------------------------------------------------

    async def targets(
        self, targets: Sequence[tuple[Target, BoardSpec]], player_ids: Sequence[str]
    ) -> dict[str, list[tuple[Target, BoardSpec]]]:
        """By player, the cohort target of each league board window among ``targets``: the
        cohort they were placed in, or, on their first result there, the pending target of
        their tier, which the store places inside the record's transaction."""
        out: dict[str, list[tuple[Target, BoardSpec]]] = {p: [] for p in player_ids}
        for t, spec in targets:
            if spec.league is None:
                continue
            tiers: dict[str, str] = {}
            known = {p: self._placed.get((t.board, t.window, p)) for p in player_ids}
            missing = [p for p, c in known.items() if c is None]
            if missing:
                found = await self.store.placements(t.board, t.window, missing)
                for p, cohort in found.items():
                    self._placed.put((t.board, t.window, p), cohort)
                    known[p] = cohort
                new = [p for p in missing if p not in found]
                if new:
                    tiers = await self.store.tiers(t.board, new)
            for p in player_ids:
                placed = known[p]
                window = placed or cohorts.pending(t.window, spec.league.tier(tiers.get(p)))
                out[p].append((Target(t.board, window, t.start), spec))
        return out

    # -- reads ------------------------------------------------------------------------------

    def board(self, name: str) -> BoardSpec:
        spec = self.boards.get(name)
        if spec is None:
            if self.settings.board(name) is None:
                raise NotFound(f"no board named {name!r}")
            raise NotFound(f"board {name} is not played in cohorts (no cohort_size)")
        return spec

    async def of_player(self, board: str, player_id: str, window_id: str | None) -> CohortView:
        """The cohort the player is in on the board's current window (or ``window_id``)."""
        spec = self.board(board)
        if why := id_problem("playerId", player_id):
            raise InvalidInput(why)
        w = self._window(spec, window_id)
        found = await self.store.placements(board, w.id, [player_id])
        if player_id not in found:
            raise NotFound(
                f"player {player_id} is in no cohort of {board} {w.id}: a player's first "
                "result in a window places them"
            )
        return await self.cohort(board, found[player_id])

    async def cohort(self, board: str, cohort_id: str) -> CohortView:
        spec = self.board(board)
        if why := id_problem("cohortId", cohort_id):
            raise InvalidInput(why)
        c = await self.store.cohort(board, cohort_id)
        w = cohorts.cohort_window(spec.rule, cohort_id)
        if c is None or w is None:
            raise NotFound(f"board {board} has no cohort {cohort_id!r}")
        assert spec.league is not None
        as_of = self.clock.now()
        frozen = c.id in await self.store.frozen_cohorts(board, [c.id])
        if frozen:
            final = await self.lifecycle.store.final_page(board, c.id, 1, spec.league.cohort_size)
            rows = [(e.player_id, e.points, e.rank) for e in final]
        else:
            size, descending = spec.league.cohort_size, spec.order is Order.DESC
            label = await label_of(self.freshness)  # before the read: the board holds that

            def read() -> Awaitable[list[tuple[str, int]]]:
                return self.index.page(BoardKey(board, c.id), 0, size - 1, descending=descending)

            live = await (read() if self.marked is None else self.marked.checked(read))
            as_of = labelled(as_of, label)
            ranks = ranks_in_order(spec, live, 1)
            rows = [(m, spec.codec.points(s), r) for (m, s), r in zip(live, ranks, strict=True)]
        names = await self.profiles.get([p for p, _, _ in rows])
        members = [entry(r, p, pts, names.get(p)) for p, pts, r in rows]
        return CohortView(
            board,
            c.id,
            c.window,
            c.tier,
            spec.league.cohort_size,
            w.end,
            frozen,
            cohorts.zones(spec.league, c.tier, len(members)),
            members,
            as_of,
        )

    async def window_cohorts(
        self, board: str, window_id: str | None, after: str, limit: int
    ) -> tuple[BoardSpec, Window, list[Cohort], bool]:
        """The cohorts of a league board's current window (or ``window_id``), by id, a page
        from the first after ``after``: the spec (its league), the window, the page, and
        whether more follow. The admin's view: the store reads the window's cohorts whole."""
        spec = self.board(board)
        w = self._window(spec, window_id)
        every = [c for c in await self.store.cohorts(board, w.id) if c.id > after]
        return spec, w, every[:limit], len(every) > limit

    def _window(self, spec: BoardSpec, window_id: str | None) -> Window:
        if window_id is None:
            w = spec.rule.window_at(int(self.clock.now()))
            if w is None:
                raise NotFound(f"board {spec.name} has no open window")
            return w
        try:
            return spec.rule.parse(window_id)
        except WindowError as e:
            raise InvalidInput(str(e)) from None

    async def tiers(self, player_id: str) -> list[Standing]:
        """Where the player stands on every league board: the tier their latest frozen
        cohort gave them, or the lowest (with no cohort) before any."""
        if why := id_problem("playerId", player_id):
            raise InvalidInput(why)
        found = {s.board: s for s in await self.store.player_tiers(player_id)}
        out = []
        for name, spec in self.boards.items():
            assert spec.league is not None
            s = found.get(name)
            if s is None:
                out.append(Standing(name, spec.league.lowest, None, None))
            else:
                out.append(Standing(name, spec.league.tier(s.tier), s.cohort, s.moved))
        return out

    async def rebuild_live(self, rebuilds: Rebuilds) -> int:
        """Every cohort whose index key would still exist, refilled from the store (the
        start of the in-process index, and the mender's rebuild of a lost one)."""
        total = 0
        for spec, c in await self.live_cohorts():
            total += await rebuilds.rebuild(spec.name, c.id)
        return total

    async def live_cohorts(self) -> list[tuple[BoardSpec, Window]]:
        """Every cohort whose index key would still exist, as a window of its board (the
        cohort's id over its board window's times, ``domain.cohorts.window_of``): the
        cohorts of each league board's last ``LOOKBACK`` windows and the open one, as the
        store lists them (``podium rebuild --all`` rebuilds them with the boards)."""
        now = self.clock.now()
        out: list[tuple[BoardSpec, Window]] = []
        for spec in self.boards.values():
            w = spec.rule.latest(int(now))
            for _ in range(LOOKBACK + 1):
                if w is None:
                    break
                exp = index_expiry(w)
                if exp is None or exp > now:
                    for c in await self.store.cohorts(spec.name, w.id):
                        out.append((spec, Window(c.id, w.start, w.end)))
                w = spec.rule.before(w)
        return out

    async def cohort_window(self, board: str, cohort_id: str) -> tuple[BoardSpec, Window]:
        """A cohort named by id as a window of its board (``podium rebuild --board B
        --window <cohortId>``): a 404 for a board not played in cohorts, or a cohort the
        store does not hold (rebuilt, it would be an empty key)."""
        spec = self.board(board)
        if why := id_problem("cohortId", cohort_id):
            raise InvalidInput(why)
        w = cohorts.cohort_window(spec.rule, cohort_id)
        if w is None or await self.store.cohort(board, cohort_id) is None:
            raise NotFound(f"board {board} has no cohort {cohort_id!r}")
        return spec, w

    # -- the freeze -------------------------------------------------------------------------

    async def freeze_due(self) -> int:
        """The freezer's pass over league boards: every cohort of each window that is
        closed and past its late time, or frozen already (by hand, and cut short before its
        cohorts froze), not frozen yet, freezes now with its tier moves (the store's freeze
        is once, whoever asks). Returns how many."""
        now = self.clock.now()
        froze = 0
        for spec in self.boards.values():
            frozen = await self.lifecycle.frozen(spec.name)
            for window_id in self._due(spec, now, frozen):
                froze += await self.freeze_window(spec, window_id)
        return froze

    async def freeze_window(self, spec: BoardSpec, window_id: str) -> int:
        """Every cohort of one window of a league board that is not frozen yet, frozen now
        with its tier moves and its event: on the freezer's pass, and with the window when
        an admin freezes it (``BoardAdmin.freeze``). Returns how many."""
        now = self.clock.now()
        found = await self.store.cohorts(spec.name, window_id)
        frozen = await self.store.frozen_cohorts(spec.name, [c.id for c in found])
        froze = 0
        for c in found:
            if c.id in frozen:
                continue
            w = cohorts.cohort_window(spec.rule, c.id)
            if w is None:
                continue
            froze += int(await self.store.freeze_cohort(spec, c, w, now))
        return froze

    def _due(self, spec: BoardSpec, now: float, frozen: Collection[str]) -> list[str]:
        """The board's last ``LOOKBACK`` windows that are closed and past their late time,
        and any of them (the open one too) whose board window is ``frozen`` (a walk over
        the rule, as the freezer's: no scan of the store)."""
        out = []
        w = spec.rule.latest(int(now))
        for _ in range(LOOKBACK + 1):
            if w is None:
                break
            if w.id in frozen or (w.end is not None and now >= w.end + spec.freeze_after_s):
                out.append(w.id)
            w = spec.rule.before(w)
        return out
