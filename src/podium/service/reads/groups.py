"""The groups of a board split by country: which groups a window of the board has, with how
many players each, so that a person can pick one (the board page does).

Which groups exist only the store can say (``Windows.windows``: every window id of the board
with a tally, ``2026-W44@FR`` among them), and that read goes over every tally of the board,
as the freezer's does. So the list is read once per board every ``WINDOWS_HELD_S`` for every
caller. How many players a group holds comes from where its board is read: the index for a
live window (bans excluded, as its pages are), the final standings of a frozen one. A group
with nobody on its board (everyone moved away, or a closed window's index keys expired) is
left out: there is nothing to show for it. Counts read from the live board are labelled as
the reads' answers are while the board is behind the store (``freshness.py``).

Knows the ports, never an adapter.
"""

from __future__ import annotations

from dataclasses import dataclass

from podium.domain.boards import BoardSpec
from podium.domain.windows import GROUP_SEP, Window, WindowError, split_group
from podium.errors import InvalidInput, NotFound
from podium.ports import BoardKey, Clock, RankIndex, Windows
from podium.service.boards import Boards, no_open_window
from podium.service.lifecycle import Lifecycle
from podium.service.reads.freshness import Freshness, label_of, labelled
from podium.util.aio import gather_all
from podium.util.caching import Cache

WINDOWS_HELD_S = 30.0  # the store's list of a board's windows: groups appear rarely
COUNTS_HELD_S = 2.0  # a window's groups with their counts, for everyone who asks
WINDOWS_HELD = 256  # boards (a bound, not a guess: there are as many as configured)
COUNTS_HELD = 1024  # (board, window) pairs asked for recently


@dataclass(frozen=True, slots=True)
class GroupCount:
    group: str
    players: int


@dataclass(frozen=True, slots=True)
class BoardGroups:
    board: str
    window: str  # the window's id without a group: 2026-W44
    as_of: float
    groups: list[GroupCount]  # most players first, then by group


class Groups:
    def __init__(
        self,
        store: Windows,
        index: RankIndex,
        boards: Boards,
        lifecycle: Lifecycle,
        clock: Clock,
        freshness: Freshness | None = None,
    ) -> None:
        self.store = store
        self.index = index
        self.boards = boards
        self.lifecycle = lifecycle
        self.clock = clock
        self.freshness = freshness  # how far the board is behind; None: never labelled
        self._windows: Cache[str, list[str]] = Cache(WINDOWS_HELD, WINDOWS_HELD_S, clock.now)
        self._counts: Cache[tuple[str, str], BoardGroups] = Cache(
            COUNTS_HELD, COUNTS_HELD_S, clock.now
        )

    async def of(self, board: str, window_id: str | None) -> BoardGroups:
        """The groups of one window of a grouped board (the current window by default)."""
        spec = self.boards.board(board)
        if spec.group_by is None:
            raise InvalidInput(f"board {board} is not split into groups")
        w = self._window(spec, window_id)
        return await self._counts.get_or_load((board, w.id), lambda: self._load(spec, w))

    def _window(self, spec: BoardSpec, window_id: str | None) -> Window:
        if window_id is None:
            w = spec.rule.window_at(int(self.clock.now()))
            if w is None:
                raise NotFound(no_open_window(spec, self.clock.now()))
            return w
        base, group = split_group(window_id)
        if group is not None:
            raise InvalidInput(
                f"window {window_id!r} names a group: ask for the groups of {base!r}"
            )
        try:
            return spec.rule.parse(base)
        except WindowError as e:
            raise InvalidInput(str(e)) from None

    async def _load(self, spec: BoardSpec, w: Window) -> BoardGroups:
        ids = await self._windows.get_or_load(spec.name, lambda: self.store.windows(spec.name))
        prefix = f"{w.id}{GROUP_SEP}"
        groups = sorted(i[len(prefix) :] for i in ids if i.startswith(prefix))
        frozen = await self.lifecycle.frozen(spec.name)
        # Before the counts, when any is read from the live board: the board holds that.
        live = any(f"{prefix}{g}" not in frozen for g in groups)
        label = await label_of(self.freshness) if live else None

        async def players(group: str) -> int:
            window_id = f"{prefix}{group}"
            if window_id in frozen:
                return frozen[window_id].players
            return await self.index.count(BoardKey(spec.name, window_id))

        counts = await gather_all(players(g) for g in groups)
        held = [GroupCount(g, n) for g, n in zip(groups, counts, strict=True) if n > 0]
        held.sort(key=lambda c: (-c.players, c.group))
        return BoardGroups(spec.name, w.id, labelled(self.clock.now(), label), held)

    def forget(self) -> None:
        """Read everything again at the next call (tests that just wrote)."""
        self._windows.clear()
        self._counts.clear()
