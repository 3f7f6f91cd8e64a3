"""The freezer role: on schedule, finds the windows that are due (closed, and past the time
late results are accepted) and freezes them through the lifecycle (``lifecycle.py``: final
standings and archive, exactly once, whoever asks), and writes any archive a crash left
unwritten. Several freezers may run: the store's freeze refuses a second time.

Each pass looks at the last ``LOOKBACK`` closed windows of each board; the first pass of a
process looks at every window the store knows, so windows that closed while nothing was
running are frozen too. Grouped boards keep a window per group, which only the store can
list, so their windows are listed on every pass.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from podium.config.settings import Settings
from podium.domain.boards import BoardSpec
from podium.domain.cohorts import is_cohort
from podium.domain.windows import Window, WindowError, WindowKind, parse_window
from podium.ports import Clock, Windows
from podium.ports.clock import SystemClock
from podium.service.lifecycle import Lifecycle
from podium.service.tournaments import TournamentFreezer
from podium.workers.runner import Needs, Runner

PERIOD_S = 5.0  # how often the freezer looks for windows that are due
LOOKBACK = 3  # closed windows per board the freezer looks at on each pass


def due(spec: BoardSpec, window: Window, now: float) -> bool:
    """Closed, and past the time late results are accepted."""
    return window.end is not None and now >= window.end + spec.freeze_after_s


class Freezer:
    def __init__(
        self,
        settings: Settings,
        store: Windows,
        clock: Clock,
        lifecycle: Lifecycle,
        now: Callable[[], Awaitable[float]] | None = None,
    ) -> None:
        """``now``: the time windows are due by (the store's, ``runners``); by default
        ``clock``'s."""
        self.settings = settings
        self.store = store
        self.clock = clock
        self._now = now
        self.lifecycle = lifecycle
        self._swept = False  # whether a first pass went over every window the store knows

    async def step(self) -> int:
        """One pass: freeze every window that is due, and write any archive a crash left
        unwritten. Returns how many windows it froze. Due by the store's clock, not this
        process's: a worker whose clock ran 5 s ahead froze a window 5 s into its grace,
        leaving out late results that the API processes still accepted for it
        (tests/integration/test_partitions.py)."""
        now = self.clock.now() if self._now is None else await self._now()
        froze = 0
        for spec in self.settings.boards:
            if spec.rule.kind is WindowKind.ALL:
                continue
            frozen = await self.lifecycle.frozen(spec.name)
            for window in await self._candidates(spec, now):
                if window.id in frozen:
                    if frozen[window.id].archive is None:
                        await self.lifecycle.write_archive(spec, window, frozen[window.id])
                elif due(spec, window, now):
                    done, _ = await self.lifecycle.freeze(spec, window)
                    froze += int(done)
        self._swept = True
        return froze

    async def _candidates(self, spec: BoardSpec, now: float) -> list[Window]:
        """The last few closed windows; on the first pass, every window the store knows."""
        out: dict[str, Window] = {}
        # From the latest window to begin: on a schedule between two windows, that one has
        # closed already, and is the first to look at.
        w = spec.rule.latest(int(now))
        if w is not None and w.contains(int(now)):
            w = spec.rule.before(w)
        for _ in range(LOOKBACK):
            if w is None:
                break
            if await self._has_players(spec.name, w.id):
                out[w.id] = w
            w = spec.rule.before(w)
        if not self._swept or spec.group_by is not None:
            for window_id in await self.store.windows(spec.name):
                if is_cohort(window_id):
                    continue  # a league's cohort: frozen with its tier moves (leagues.py)
                try:
                    out.setdefault(window_id, parse_window(spec.rule, window_id))
                except WindowError:
                    continue  # a window of an older configuration of this board
        return list(out.values())

    async def _has_players(self, board: str, window_id: str) -> bool:
        """Whether anyone has a tally there: an empty window has nothing to freeze."""
        async for batch in self.store.standings(board, window_id, batch=1):
            return bool(batch)
        return False


def runners(n: Needs) -> list[Runner]:
    # The store's clock where this process runs on the system's; a clock set by whoever
    # runs podium (a simulation, a test) is theirs to keep.
    store_clock = n.store.store_time if isinstance(n.clock, SystemClock) else None
    freezer = Freezer(n.settings, n.store, n.clock, n.lifecycle, store_clock)

    tournaments = TournamentFreezer(n.store, n.lifecycle, n.clock)
    runners = [
        Runner("freezer", freezer.step, idle_sleep_s=PERIOD_S),
        Runner("tournament-freezer", tournaments.step, idle_sleep_s=PERIOD_S),
    ]
    if n.leagues is not None and n.leagues.boards:
        runners.append(Runner("cohort-freezer", n.leagues.freeze_due, idle_sleep_s=PERIOD_S))
    return runners
