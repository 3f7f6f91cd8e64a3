"""Tournaments, the use cases: created, listed and ended by the admin, joined for players by
a game server, counted as one more board target of a match, and read as a board.

A tournament's standings are a board window's (``domain/tournaments.py``): the record path
folds a result into its tally in the same transaction as the boards' (``matches.py`` asks
``targets`` here), the updater writes it to the index (``spec``), the reads page and rank it
(``page``, ``rank``, ``friends``, through ``reads.py``, its spec in ``boards.py``), and its end
freezes it into final standings through the lifecycle, exactly once (``end`` now; the
freezer's ``due`` pass at its time).

Knows the ports, never an adapter.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from podium.config.settings import Settings
from podium.domain.boards import BoardSpec
from podium.domain.models import ApiKey, Target
from podium.domain.tournaments import (
    FREEZE_AFTER_S,
    State,
    Tournament,
    TournamentError,
    TournamentSpec,
    check,
    run_id,
    span,
    tournament_of,
)
from podium.domain.validation import ID, id_problem
from podium.domain.windows import Window, WindowError, indexed_window
from podium.errors import Conflict, Erased, Forbidden, InvalidInput, NotFound
from podium.ports import Clock, Players, Results
from podium.ports.erasure import PlayerData
from podium.ports.tournaments import Joined, TournamentStore
from podium.service.boards import Boards
from podium.service.lifecycle import Lifecycle
from podium.service.reads.past import Download, Format, Past, WindowList
from podium.service.reads.reads import Reads
from podium.service.views import Page, PlayerRank
from podium.util.caching import Cache

if TYPE_CHECKING:  # only the type: the rebuilds are handed to rebuild_live by its caller
    from podium.service.upkeep.rebuilds import Rebuilds

log = logging.getLogger("podium.tournaments")

LIST_HELD_S = 1.0  # how long a process trusts its list of tournaments on the record path
SPECS_HELD = 10_000  # tournament boards whose spec one process holds
MISSING_HELD_S = 5.0  # a board name with no tournament is asked again after this
LOOKBACK = 3  # begun runs of a tournament the freezer looks at after its first pass
RECENT_S = 3600.0  # and any run that came due this recently (short runs, a long late time)
SWEEP_S = 3600.0  # how often the freezer looks at every played run of each tournament again
LIST_PAGE = 100  # tournaments a page of the CLI's whole list reads


class Specs:
    """Tournament boards' specs by board name (``~<id>``), for the updater: a definition
    never changes once created (an early end is a freeze, which the store checks itself),
    so a spec is held while there is room; a name with no tournament is asked again."""

    def __init__(self, store: TournamentStore, clock: Clock) -> None:
        self.store = store
        self._held: Cache[str, TournamentSpec | None] = Cache(SPECS_HELD, MISSING_HELD_S, clock.now)

    async def __call__(self, board: str) -> BoardSpec | None:
        """None for a configured board's name, or a tournament that does not exist."""
        tid = tournament_of(board)
        if tid is None:
            return None

        async def load() -> TournamentSpec | None:
            t = await self.store.tournament(tid)
            return None if t is None else t.spec()

        return await self._held.get_or_load(board, load)


class TournamentFreezer:
    """The freezer's pass over tournaments: each run anyone played in, past its end and its
    late time (or ended by the admin), not frozen yet, freezes now (the store's freeze is
    once, whoever asks). Only tournaments not settled are walked (``unsettled_tournaments``,
    an index of those alone): one is settled once no result can count for it any more
    (``Tournament.settled_by``) and every run anyone played is frozen, so the pass costs the
    same however many ended before. A tournament's first pass in a process looks at every
    run anyone played (runs that ended while no freezer ran); later ones at its last
    ``LOOKBACK`` begun runs and those that came due within ``RECENT_S``, as the boards'
    freezer does, so a long-lived recurring one costs the same on its thousandth run as on
    its first; every ``SWEEP_S`` it looks at every played run again (a run missed while the
    store was down)."""

    def __init__(self, store: TournamentStore, lifecycle: Lifecycle, clock: Clock) -> None:
        self.store = store
        self.lifecycle = lifecycle
        self.clock = clock
        self._swept: set[str] = set()  # tournaments whose every played run was looked at
        self._swept_at = clock.now()

    async def step(self) -> int:
        """One pass; returns how many runs it froze."""
        now = self.clock.now()
        if now - self._swept_at >= SWEEP_S:
            self._swept.clear()
            self._swept_at = now
        froze = 0
        for t in await self.store.unsettled_tournaments():
            if t.starts_at > now:
                continue  # nothing can have counted yet
            spec = t.spec()
            whole = t.id not in self._swept or t.settled_by(now)
            runs = await _played(t, self.lifecycle) if whole else await self._recent(t, now)
            self._swept.add(t.id)
            left = False
            for run in runs:
                if await self.lifecycle.is_frozen(spec.name, run.id) or run.start > now:
                    continue
                assert run.end is not None
                ended = t.ended_early is not None and run.start <= t.ended_early <= now
                if ended or now >= run.end + spec.freeze_after_s:
                    done, _ = await self.lifecycle.freeze(spec, run)
                    froze += int(done)
                else:
                    left = True
            if t.settled_by(now) and not left:
                await self.store.settle_tournament(t.id, now)
                self._swept.discard(t.id)
        return froze

    async def _recent(self, t: Tournament, now: float) -> list[Window]:
        """Its last ``LOOKBACK`` begun runs, and any that came due within ``RECENT_S``,
        that anyone played in."""
        rule, out, n = t.rule(), [], 0
        w = rule.latest(int(now))
        while w is not None and w.end is not None:
            if n >= LOOKBACK and w.end + FREEZE_AFTER_S < now - RECENT_S:
                break
            n += 1
            async for batch in self.lifecycle.store.standings(t.board, w.id, batch=1):
                if batch:
                    out.append(w)
                break
            w = rule.before(w)
        return out


async def freeze_due(store: TournamentStore, lifecycle: Lifecycle, clock: Clock) -> int:
    """One pass of a freezer new to every tournament (``TournamentFreezer``): returns how
    many runs it froze."""
    return await TournamentFreezer(store, lifecycle, clock).step()


async def _played(t: Tournament, lifecycle: Lifecycle) -> list[Window]:
    """The runs of ``t`` that anyone has a tally in, as the store lists them."""
    rule = t.rule()
    out = []
    for window_id in await lifecycle.store.windows(t.board):
        try:
            out.append(rule.parse(window_id))
        except WindowError:
            continue  # not a run of this definition: nothing to freeze
    return out


class TournamentPlayers(Players, PlayerData, Protocol):
    """Players' profiles and bans, and whom the store keeps as erased."""


class Tournaments:
    def __init__(
        self,
        settings: Settings,
        store: TournamentStore,
        results: Results,
        players: TournamentPlayers,
        clock: Clock,
        lifecycle: Lifecycle,
        boards: Boards,
        reads: Reads,
        past: Past,
    ) -> None:
        self.settings = settings
        self.store = store
        self.results = results
        self.players = players
        self.clock = clock
        self.lifecycle = lifecycle
        self.boards = boards  # a tournament's runs are boards made at run time
        self.reads = reads
        self.past = past
        # Loaded again ahead of its end (util/caching.py): every match reads it first.
        self._list: Cache[str, list[Tournament]] = Cache(
            max(1, len(settings.modes)), LIST_HELD_S, clock.now, refresh_ahead_s=LIST_HELD_S / 2
        )
        self.specs = Specs(store, clock)

    # -- the admin's calls --------------------------------------------------------------

    async def create(self, t: Tournament) -> tuple[Tournament, bool]:
        """The tournament, and whether this call created it: the same definition again is
        the same create; another under its id is a 409."""
        modes = {m.name: max(abs(m.min_points), abs(m.max_points)) for m in self.settings.modes}
        try:
            check(t, set(modes), modes, self.settings.server.tournament_min_period_s)
        except TournamentError as e:
            raise InvalidInput(str(e)) from None
        stored, created = await self.store.create_tournament(
            replace(t, created_at=self.clock.now(), ended_early=None, entrants=0)
        )
        if not created and not stored.same_definition(t):
            raise Conflict(
                f"tournament {t.id} exists with another definition; choose another id "
                "(a create of the same definition again is answered with the one there is)"
            )
        self._list.clear()
        return stored, created

    def span(self, starts_at: int | None, ends_at: int | None, recurring: bool) -> tuple[int, int]:
        """A request's start and end, with a recurring tournament's defaults (422 naming
        what a one-shot one lacks)."""
        try:
            return span(starts_at, ends_at, recurring, self.clock.now())
        except TournamentError as e:
            raise InvalidInput(str(e)) from None

    async def listing(
        self,
        category: str | None = None,
        state: State | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> TournamentList:
        """A page of the tournaments, by start then id, after ``cursor`` (the ``next`` of
        the page before), of ``category`` and in ``state`` now. The store reads a page by
        an index and a condition a few more meet than are in the state; those are left
        out here, reading on until the page is full, so every page but the last holds
        ``limit``."""
        after = _decode(cursor)
        now = self.clock.now()
        found: list[Tournament] = []
        while len(found) <= limit:
            batch = await self.store.tournaments_page(after, limit + 1, category, state, now)
            found += [t for t in batch if state is None or t.state(now) is state]
            if len(batch) <= limit:
                break  # none after these
            after = (batch[-1].starts_at, batch[-1].id)
        page = found[:limit]
        more = len(found) > limit
        return TournamentList(page, _encode(page[-1]) if more else None)

    async def all(
        self, category: str | None = None, state: State | None = None
    ) -> list[Tournament]:
        """Every tournament, page after page (the command line's list)."""
        out: list[Tournament] = []
        cursor: str | None = ""
        while cursor is not None:
            listed = await self.listing(category, state, cursor or None, LIST_PAGE)
            out += listed.tournaments
            cursor = listed.next
        return out

    async def get(self, tournament_id: str) -> Tournament:
        if why := id_problem("tournament id", tournament_id):
            raise InvalidInput(why)
        t = await self.store.tournament(tournament_id)
        if t is None:
            raise NotFound(f"no tournament {tournament_id!r}")
        return t

    async def end(self, tournament_id: str) -> Tournament:
        """End it now, as if its time were up: no result counts for it from here, and its
        run (once begun) freezes into final standings, exactly once. Ending it again
        changes nothing."""
        await self.get(tournament_id)
        t = await self.store.end_tournament(tournament_id, self.clock.now())
        assert t is not None
        self._list.clear()
        run = t.run_at(self.clock.now())  # the open run, or the last to begin
        if run is not None:
            await self.lifecycle.freeze(t.spec(), run)
        return t

    async def rebuild_live(self, rebuilds: Rebuilds) -> int:
        """Every run whose index key would still exist, refilled from the store (the start
        of the in-process index, as ``Rebuilds.rebuild_live`` does for the boards)."""
        total = 0
        for spec, run in await self.live_runs():
            total += await rebuilds.rebuild(spec.name, run.id)
        return total

    async def live_runs(self) -> list[tuple[BoardSpec, Window]]:
        """Every begun run whose index key would still exist, with its board (``~<id>``),
        made known to the boards (``podium rebuild --all`` rebuilds them with the boards)."""
        now = self.clock.now()
        out: list[tuple[BoardSpec, Window]] = []
        for t in await self.store.unsettled_tournaments():  # a settled one's runs are frozen
            spec = t.spec()
            for run in await _played(t, self.lifecycle):
                if indexed_window(spec.rule, run.id, now) is not None and run.start <= now:
                    self.boards.know(spec)
                    out.append((spec, run))
        return out

    # -- joining --------------------------------------------------------------------------

    async def join(
        self, tournament_id: str, player_id: str, key: ApiKey
    ) -> tuple[Tournament, bool]:
        """Join a player (a game server's call): whether they joined now (False: before).
        A key joins players only to tournaments of its modes, where its results could count
        (invariant 5 of docs/architecture.md): another server's key cannot fill a place."""
        if why := id_problem("playerId", player_id):
            raise InvalidInput(why)
        t = await self.get(tournament_id)
        if not any(key.may_submit(m) for m in t.modes):
            raise Forbidden(
                f"this credential may not join players to tournament {t.id}: it counts "
                f"modes {', '.join(t.modes)}, and the credential's are "
                f"{', '.join(key.modes) or 'none'}"
            )
        if await self.players.erased([player_id]):
            raise Erased("this player was erased: they join nothing")
        now = self.clock.now()
        if t.ended_early is not None and t.ended_early <= now:
            joined = Joined.ENDED  # ended by the admin: no need to ask
        else:
            joined = await self.store.join_tournament(tournament_id, player_id, now)
        match joined:
            case Joined.MISSING:
                raise NotFound(f"no tournament {tournament_id!r}")
            case Joined.FULL:
                raise Conflict(
                    f"tournament {tournament_id} is full: {t.max_entrants} of "
                    f"{t.max_entrants} entrants have joined"
                )
            case Joined.ENDED:
                raise Conflict(f"tournament {tournament_id} has ended: no one joins it now")
        return await self.get(tournament_id), joined is Joined.JOINED

    async def remove_entrant(self, tournament_id: str, player_id: str) -> Tournament:
        """Take a player out of the entrants (the admin's call): their place is free again,
        and where joining is required their results count there no longer; what they scored
        before stays on its board (a ban takes a player off every board)."""
        if why := id_problem("playerId", player_id):
            raise InvalidInput(why)
        await self.get(tournament_id)
        if not await self.store.remove_entrant(tournament_id, player_id):
            raise NotFound(f"player {player_id} has not joined tournament {tournament_id}")
        return await self.get(tournament_id)

    async def entrants(self, tournament_id: str, after: str, limit: int) -> list[tuple[str, float]]:
        """Who joined (the admin's list), by player id, a page from the first after
        ``after``; a 404 for an unknown tournament."""
        await self.get(tournament_id)
        return await self.store.entrants(tournament_id, after, limit)

    # -- the record path --------------------------------------------------------------------

    async def _live(self, mode: str) -> list[Tournament]:
        """The tournaments of ``mode`` still taking results, as the store's index answers
        (ended ones are not read at all), held ``LIST_HELD_S``."""
        return await self._list.get_or_load(
            mode, lambda: self.store.live_tournaments(mode, self.clock.now())
        )

    async def targets(
        self, mode: str, ended_at: int, now: float, player_ids: Sequence[str]
    ) -> dict[str, list[tuple[Target, BoardSpec]]]:
        """By player, the tournament runs a result of theirs counts for: every tournament of
        ``mode`` whose run holds ``ended_at`` and still takes results (not ended early,
        within its late time, not frozen), where the player joined if it asks for that. The
        store checks the freeze again in the record's transaction, and ``maxAttempts``
        there (``recording.fold_targets``)."""
        found: list[tuple[Tournament, Target, TournamentSpec]] = []
        for t in await self._live(mode):
            if mode not in t.modes or t.ended_early is not None:
                continue
            spec = t.spec()
            run = spec.rule.window_at(ended_at)
            if run is None or run.end is None or now >= run.end + spec.freeze_after_s:
                continue
            if await self.lifecycle.is_frozen(spec.name, run.id):
                continue
            found.append((t, Target(spec.name, run.id, run.start), spec))
        out: dict[str, list[tuple[Target, BoardSpec]]] = {p: [] for p in player_ids}
        if not found:
            return out
        joined = await self.store.entrants_among(
            [t.id for t, _, _ in found if t.join_required], player_ids
        )
        for t, target, spec in found:
            for p in player_ids:
                if not t.join_required or (t.id, p) in joined:
                    out[p].append((target, spec))
        return out

    # -- the updater and the reads ------------------------------------------------------------

    async def _board(self, tournament_id: str, run: str | None) -> tuple[Tournament, str, bool]:
        """The tournament, the run asked for (by default the open one, or the last to
        begin; before the first, the next), and whether it has begun. Its spec is made known
        to the reads."""
        t = await self.get(tournament_id)
        spec = t.spec()
        self.boards.know(spec)
        now = self.clock.now()
        if run is None:
            w = t.run_at(now)
            if w is None:
                nxt = spec.rule.next_start(int(now))
                return t, "" if nxt is None else run_id(nxt), False
            return t, w.id, True
        try:
            w = spec.rule.parse(run)
        except WindowError as e:
            raise NotFound(f"tournament {tournament_id} has no run {run!r}: {e}") from None
        if w.start > now:
            raise NotFound(f"run {run} of tournament {tournament_id} has not begun")
        return t, w.id, True

    async def board_run(self, board: str, run: str | None) -> tuple[BoardSpec, Window]:
        """A tournament's board (``~<id>``) and one of its begun runs (by default the open
        one, or the last to begin), its spec made known to the board catalogue: what ``podium
        rebuild --board ~<id> [--window RUN]`` rebuilds. A 404 for a board no tournament
        holds, or a run that has not begun (nothing of it is in the index yet)."""
        tid = tournament_of(board)
        if tid is None:
            raise NotFound(f"board {board} is not a tournament's (~<id>)")
        t, found, begun = await self._board(tid, run)
        if not begun:
            raise NotFound(f"tournament {tid} has not begun: no run of it is in the index yet")
        spec = t.spec()
        return spec, spec.rule.parse(found)

    async def live_board(self, tournament_id: str) -> str:
        """The board a live tournament's stream follows (its spec known to the boards); a
        tournament that is not live is a 404 that says where its board is read."""
        t = await self.get(tournament_id)
        state = t.state(self.clock.now())
        if state is not State.LIVE:
            raise NotFound(
                f"tournament {t.id} is {state.value}, not live: read its board at "
                f"/v1/tournaments/{t.id}/board"
            )
        self.boards.know(t.spec())
        return t.board

    async def page(
        self,
        tournament_id: str,
        run: str | None,
        offset: int,
        limit: int,
        cursor: str | None = None,
    ) -> Page:
        t, run, begun = await self._board(tournament_id, run)
        if not begun:  # upcoming: no one on it yet
            return Page(t.id, run, self.clock.now(), [])
        page = await self.reads.page(t.board, run, offset, limit, None, cursor)
        return replace(page, board=t.id)

    async def rank(
        self,
        tournament_id: str,
        player_id: str,
        neighbors: int,
        run: str | None,
        above: int | None = None,
        below: int | None = None,
    ) -> tuple[PlayerRank, int | None]:
        """The player's rank with neighbors, and their attempts left (None: no limit)."""
        t, run, begun = await self._board(tournament_id, run)
        if not begun:
            raise NotFound(f"player {player_id} is not on tournament {t.id}: it has not begun")
        found = await self.reads.player_rank(t.board, player_id, neighbors, run, None, above, below)
        left = None
        if t.max_attempts is not None:
            used = next(
                (
                    s.tally.version
                    for s in await self.results.player_standings(player_id)
                    if (s.board, s.window) == (t.board, run)
                ),
                0,
            )
            left = max(0, t.max_attempts - used)
        return replace(found, board=t.id), left

    # -- past runs ------------------------------------------------------------------------

    async def runs(self, tournament_id: str, cursor: str | None, limit: int) -> WindowList:
        """Its runs, newest first, as a board's windows are listed (``Past.windows``): the
        open one, closed ones not frozen yet, and every frozen one with its standings
        file's sha256."""
        t = await self.get(tournament_id)
        self.boards.know(t.spec())
        listed = await self.past.windows(t.board, None, cursor, limit)
        return replace(listed, board=t.id)

    async def standings(self, tournament_id: str, run: str, fmt: Format, gzip: bool) -> Download:
        """A frozen run's final standings file, as a board window's (``Past.standings``):
        a run not frozen yet is a 409, one that is not a run of it a 404."""
        t, run, begun = await self._board(tournament_id, run)
        assert begun  # _board answers 404 for a run that has not begun
        found = await self.past.standings(t.board, run, fmt, gzip)
        return replace(found, board=t.id)

    async def friends(self, tournament_id: str, player_id: str, run: str | None) -> Page:
        t, run, begun = await self._board(tournament_id, run)
        if not begun:
            return Page(t.id, run, self.clock.now(), [])
        page = await self.reads.friends_page(t.board, player_id, run)
        return replace(page, board=t.id)


@dataclass(frozen=True, slots=True)
class TournamentList:
    """A page of tournaments, and the cursor of the next (None on the last)."""

    tournaments: list[Tournament]
    next: str | None


# A cursor of the list: the start and id of the last tournament of a page, so that a page
# never repeats or skips one whatever is created meanwhile ("<start>_<id>"). Every string of
# its pattern (``CURSOR``, published with the route) names a place in the list, which anyone
# may read, so it needs no signature and a forged one opens nothing.
CURSOR = rf"^-?[0-9]{{1,12}}_{ID}$"


def _encode(t: Tournament) -> str:
    return f"{t.starts_at}_{t.id}"


def _decode(cursor: str | None) -> tuple[int, str] | None:
    if cursor is None:
        return None
    if re.fullmatch(CURSOR, cursor) is None:
        raise InvalidInput("cursor: not a cursor this API gave (pass `next` as it is)")
    start, tid = cursor.split("_", 1)
    return int(start), tid
