"""The board updater: applies changes from the log to the rank index, at least once.

Changes carry absolute totals, and the index writes them with ``GT``/``LT``, so a change
applied twice, late or out of order leaves the board as it should be (DESIGN invariant 3).
The ban list is checked in the store before every batch, and the index refuses banned
players atomically inside the write itself, which closes the race with a ban in flight.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable

from podium import metrics
from podium.config import Settings
from podium.domain.boards import Order
from podium.domain.codec import EncodingError
from podium.domain.models import Change, Message, ProfileChange
from podium.domain.windows import WindowError, index_expiry, parse_window
from podium.ports import BoardKey, ChangeLog, Clock, ProfileCopy, RankIndex, ScoreStore

log = logging.getLogger("podium.updater")


class Updater:
    def __init__(
        self,
        settings: Settings,
        store: ScoreStore,
        index: RankIndex,
        copy: ProfileCopy,
        changes: ChangeLog,
        clock: Clock,
    ) -> None:
        self._boards = {b.name: b for b in settings.boards}
        self._versioned = {b.name for b in settings.boards if settings.versioned(b)}
        self._store = store
        self._index = index
        self._copy = copy
        self._log = changes
        self._clock = clock
        self._batch = settings.workers.batch
        self._held: list[Message] = []

    async def step(self) -> int:
        # A batch that failed to apply (the index was down) is retried first, while this
        # updater still holds its lease, instead of waiting for the lease to run out.
        changes = self._held or await self._log.fetch(self._batch)
        if not changes:
            return 0
        self._held = changes
        profiles = [c for c in changes if isinstance(c, ProfileChange)]
        if profiles:
            await self._apply_profiles(profiles)
        totals = [c for c in changes if isinstance(c, Change)]
        banned = await self._store.banned([c.player_id for c in totals]) if totals else set()
        groups: dict[BoardKey, list[Change]] = defaultdict(list)
        for c in totals:
            if c.player_id in banned:
                metrics.CHANGES_SKIPPED_BANNED.inc()
            else:
                groups[BoardKey(c.board, c.window)].append(c)
        for key, group in groups.items():
            await self._apply(key, group)
        # Ack only after every write landed: a crash before this line means a replay,
        # which the GT/LT writes make harmless.
        await self._log.ack(changes)
        self._held = []
        now = self._clock.now()
        for c in totals:
            metrics.COMMIT_TO_BOARD_SECONDS.observe(max(0.0, now - c.committed_at))
        metrics.CHANGES_APPLIED.inc(len(totals))
        metrics.PROFILES_APPLIED.inc(len(profiles))
        return len(changes)

    async def _apply_profiles(self, changes: list[ProfileChange]) -> None:
        """Copy changed profiles into the index. Each is read from the store now, with its
        version, so it is at least as new as the change: the index keeps it unless it holds
        a newer one, and an older copy on its way never replaces it."""
        found = await self._store.versioned_profiles(list({c.player_id for c in changes}))
        await self._copy.write_profiles(list(found.values()))

    async def _apply(self, key: BoardKey, group: list[Change]) -> None:
        spec = self._boards.get(key.board)
        if spec is None:
            log.warning(
                "dropping %d changes for board %s, which is no longer configured",
                len(group),
                key.board,
            )
            return
        try:
            window = parse_window(spec.rule, key.window)
            writes = [c for c in group if not c.removed]
            entries = [(c.player_id, spec.score(c.tally, window)) for c in writes]
        except (WindowError, EncodingError) as e:
            # The store refuses totals that do not encode, so this means the board's
            # configuration changed under old changes; they cannot be applied as they are.
            log.error("dropping %d changes for %s/%s: %s", len(group), key.board, key.window, e)
            return
        versions = [c.tally.version for c in writes] if spec.name in self._versioned else None
        if entries:
            await self._index.write(
                key,
                entries,
                descending=spec.order is Order.DESC,
                expire_at=index_expiry(window),
                versions=versions,
            )
        # A player who moved to another group leaves this one; the version they leave
        # behind refuses any older change of theirs that is still on its way here.
        gone = [c for c in group if c.removed]
        if gone:
            await self._index.remove(
                key,
                [c.player_id for c in gone],
                [c.tally.version for c in gone],
                expire_at=index_expiry(window),
            )


class BacklogMonitor:
    """Exports the outbox backlog (rows waiting, age of the oldest) as gauges."""

    def __init__(self, store: ScoreStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def step(self) -> int:
        pending, age = await self._store.outbox_backlog(self._clock.now())
        metrics.OUTBOX_PENDING.set(pending)
        metrics.OUTBOX_AGE_SECONDS.set(age)
        return 0


class ProfileCopier:
    """Fills the index's copy of profiles from the store whenever the copy is not complete:
    on a new index, after the index lost it (a Redis restarted empty) or when it may lack
    changes (a Redis restored from a snapshot, a replica that took over). Every updater
    checks; one at a time fills it, under a lease. Until it is done, reads take names from
    the store."""

    def __init__(self, fill: Callable[[], Awaitable[int | None]], copy: ProfileCopy) -> None:
        self._fill = fill
        self._copy = copy

    async def step(self) -> int:
        if await self._copy.profiles_complete():
            return 0
        n = await self._fill()
        if n is not None:
            log.info("copied %d profiles from the store into the index", n)
        return 0  # nothing more to do at once: the runner sleeps until the next check
