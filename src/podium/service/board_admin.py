"""The admin's calls on a board window before prizes: review its top beside the latest
flagged results, and freeze it now (a tournament ended early) rather than when it is due;
on a league board, its cohorts with it (their tier moves and events).

Knows the ports, never an adapter.
"""

from __future__ import annotations

from podium.domain.models import Flagged, FrozenWindow
from podium.ports import Results
from podium.service.boards import Boards, Changed
from podium.service.leagues import Leagues
from podium.service.lifecycle import Lifecycle
from podium.service.reads.reads import Reads
from podium.service.views import Page

REVIEW_FLAGGED = 200  # flagged results listed for review


class BoardAdmin:
    def __init__(
        self,
        store: Results,
        boards: Boards,
        reads: Reads,
        lifecycle: Lifecycle,
        changed: Changed,
        leagues: Leagues | None = None,
    ) -> None:
        self.store = store
        self.boards = boards
        self.reads = reads  # the top to review
        self.changed = changed  # this process's pages, read again after a freeze
        self.lifecycle = lifecycle
        self.leagues = leagues

    async def review(
        self, board: str, window_id: str | None, top: int, group: str | None = None
    ) -> tuple[Page, list[Flagged]]:
        """What to look at before prizes: the top of the board (of one group, on a board
        split into groups), and the latest flagged results in the board's modes."""
        spec = self.boards.board(board)
        page = await self.reads.page(board, window_id, 0, min(top, spec.exact_top), group)
        flagged = await self.store.flagged(spec.modes, REVIEW_FLAGGED)
        return page, flagged

    async def freeze(self, board: str, window_id: str) -> tuple[bool, FrozenWindow]:
        """Freeze a window now, whether or not it is due; False if it was frozen already.
        On a league board its cohorts freeze too, as they would at its end: each once, so a
        second call freezes only what a first one cut short left (the freezer's next pass
        would too)."""
        spec = self.boards.board(board)
        window = self.boards.window(spec, window_id, begun=False)
        froze, info = await self.lifecycle.freeze(spec, window)
        if spec.league is not None and self.leagues is not None:
            await self.leagues.freeze_window(spec, window.id)
        self.changed(None)
        return froze, info
