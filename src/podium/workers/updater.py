"""The board updater: applies changes from the log to the rank index, at least once.

Changes carry absolute totals, and the index writes them with ``GT``/``LT``, so a change
applied twice, late or out of order leaves the board as it should be (invariant 3 of
docs/architecture.md). The ban list is checked in the store before every batch, and the
index refuses banned players atomically inside the write itself, which closes the race with
a ban in flight.

How a batch is settled with the log:

- applied: acked, after every write landed;
- an outage (``Unavailable``): held, and retried first at the next step, each retry
  starting its lease again (``in_progress``) so that no other updater takes it meanwhile;
  after ``HOLD_LEASES`` leases of failing it is given back instead (``nak``);
- held past its lease (an outage of the log too, a pause: ``in_progress`` could not start it
  again in time): given up unwritten, neither renewed nor given back, since the log may have
  delivered it to another updater meanwhile and will deliver it again anyway; said as
  ``podium_lease_lost{role="updater"}`` and in the log;
- any other failure (a bug): given back at once (``nak``), for any updater to retry;
- board marks (``domain/marks.py``) are no changes: taken out of the batch before any board
  logic, acked with it, and their times noted in the index once the log's ack floor is
  past them (every earlier message of their partition applied, by whichever updater). The
  note is two round trips (the log's floor, the index's write) that the next batch does not
  wait for: it runs beside it, one note at a time;
- changes that can never be applied (a board no longer configured, a window or a total
  the board's configuration no longer takes): dropped with a log line, and acked with the
  rest, since delivering them again would fail the same way for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from podium import metrics
from podium.config.settings import Settings
from podium.domain.boards import BoardSpec, Order
from podium.domain.codec import EncodingError
from podium.domain.cohorts import window_of
from podium.domain.marks import is_mark, newest, partition_of_mark
from podium.domain.models import Change, Message, ProfileChange
from podium.domain.windows import Window, WindowError, index_expiry
from podium.errors import Unavailable
from podium.ports import (
    BoardKey,
    BoardMarks,
    ChangeLog,
    Clock,
    Outbox,
    Players,
    ProfileCopy,
    RankIndex,
)
from podium.service.tournaments import Specs
from podium.util.aio import gather_all
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.updater")

# A batch that keeps failing to apply is kept (and retried) for at most this many leases,
# then given back to the log for any updater to take.
HOLD_LEASES = 6
BACKLOG_CHECK_S = 1.0  # how often an updater exports the outbox backlog
PROFILE_CHECK_S = 5.0  # how often an updater checks that the index still holds its profiles
MARK_CHECK_S = 0.1  # how often an updater asks again whether the marks it holds settled
UNSETTLED_HELD = 256  # marks held waiting to settle at most: a newer one says more
# Board windows of one batch written at once at most: each write is a round trip of its own
# (on a cluster, to the node of its key), and a batch of a few boards' windows is otherwise
# as many round trips one after another (a second and more on a slow link).
WRITES_AT_ONCE = 16


class Updater:
    def __init__(
        self,
        settings: Settings,
        store: Players,
        index: RankIndex,
        copy: ProfileCopy,
        changes: ChangeLog,
        clock: Clock,
        more: Callable[[str], Awaitable[BoardSpec | None]] | None = None,
        marks: BoardMarks | None = None,
        *,
        ahead: bool = True,
    ) -> None:
        """``ahead``: fetch the next batch while this one is applied, after a full one (a
        replay's updater does not: its log delivers again, at the next fetch, what was not
        acked by then, so it fetches only when it holds nothing)."""
        self._boards = {b.name: b for b in settings.boards}
        # Boards made at run time (tournaments, tournaments.Specs), versioned by the same
        # rule as the configured ones (as a rebuild writes them).
        self._more = more
        self._settings = settings
        self._versioned = {b.name for b in settings.boards if settings.versioned(b)}
        self._store = store
        self._index = index
        self._copy = copy
        self._log = changes
        self._clock = clock
        self._marks = marks  # where applied marks are noted; None: marks are acked unnoted
        self._unsettled: list[Change] = []  # marks acked, the log's ack floor not past them
        self._fresh: list[Change] = []  # marks acked since the note in flight began
        self._noting: asyncio.Task[None] | None = None  # the marks' note in flight
        self._checked_at = 0.0
        self._batch = settings.workers.batch
        self._lease_s = settings.workers.lease_s
        self._hold_limit_s = HOLD_LEASES * settings.workers.lease_s
        self._held: list[Message] = []  # a batch fetched and not yet applied
        self._held_since = 0.0
        # When the held batch's lease ends at the latest, as far as this updater can tell:
        # a lease from before the request that fetched it, or that last started it again.
        self._lease_ends = 0.0
        # The next batch, fetched while this one is applied (after a full batch only: more
        # is waiting then), so that the log's round trips overlap the index's.
        self._ahead: asyncio.Task[list[Message]] | None = None
        self._ahead_at = 0.0  # when the batch fetched ahead was asked for
        self._fetch_ahead = ahead

    async def step(self) -> int:
        changes = await self._next()
        if not changes:
            self._note_soon([])
            return 0
        try:
            totals, profiles = await self._apply_batch(changes)
        except Unavailable:
            raise  # an outage: the batch stays held, and the next step retries it
        except Exception:
            # Not an outage: a bug, or a batch this updater cannot apply. Keeping it would
            # keep it from every other updater for as long as this one lives: give it back.
            await self._give_back()
            raise
        if self._clock.now() >= self._lease_ends:
            # The writes outlasted the lease: another updater may hold the batch by now.
            # They landed, and late ones change nothing (GT/LT, versions); the ack still
            # spares the log a delivery it has not made yet.
            self._lease_lost(changes, "its writes took longer than its lease")
        # Ack only after every write landed: a crash before this line means a replay,
        # which the GT/LT writes make harmless.
        await self._log.ack(changes)
        self._held = []
        self._note_soon([c for c in changes if isinstance(c, Change) and is_mark(c.board)])
        now = self._clock.now()
        for c in totals:
            metrics.COMMIT_TO_BOARD_SECONDS.observe(max(0.0, now - c.committed_at))
        metrics.CHANGES_APPLIED.inc(len(totals))
        metrics.PROFILES_APPLIED.inc(len(profiles))
        return len(changes)

    def _note_soon(self, marks: list[Change]) -> None:
        """Start noting ``marks`` (acked just now) with those still unsettled, unless a note
        is in flight: they wait for the next then. Unsettled marks alone are asked after
        every ``MARK_CHECK_S``."""
        self._fresh += marks
        if self._marks is None or not (self._fresh or self._unsettled):
            self._fresh = []
            return
        if self._noting is not None:
            if not self._noting.done():
                return
            self._noted(self._noting)
        if not self._fresh and self._clock.now() - self._checked_at < MARK_CHECK_S:
            return
        self._noting = asyncio.create_task(self._note())

    def _noted(self, task: asyncio.Task[None]) -> None:
        """A finished note's failure said (a bug: outages are caught in it), so that it is
        not lost with the task."""
        self._noting = None
        if not task.cancelled() and (e := task.exception()) is not None:
            log.error("board marks not noted", exc_info=e)

    async def noted(self) -> None:
        """The marks' note in flight, finished (tests; ``close``)."""
        task = self._noting
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
            if self._noting is task:
                self._noted(task)

    async def _note(self) -> None:
        """Board marks this updater applied and acked, noted in the index once the log's
        ack floor is past them (``ChangeLog.settled``): applying a mark after its batch
        says this updater wrote what it fetched before it, but other updaters may still
        hold earlier changes of its partition, fetched before it and not yet written (or
        held by one that stalled, until their lease runs out and they come again). Marks
        not settled yet are asked after again every ``MARK_CHECK_S``; the newest are kept."""
        assert self._marks is not None
        held, self._fresh = self._unsettled + self._fresh, []
        self._checked_at = self._clock.now()
        try:
            ok = await self._log.settled(held)
            done = [m for m, settled in zip(held, ok, strict=True) if settled]
            if done:
                await self._marks.note_marks(
                    newest(
                        {},
                        (
                            ((m.window, partition_of_mark(m.player_id)), m.committed_at)
                            for m in done
                        ),
                    )
                )
        except Unavailable as e:  # the batch is acked: its marks are asked after again
            self._unsettled = held[-UNSETTLED_HELD:]
            log.debug("board marks not noted: %s", e)
            return
        self._unsettled = [m for m, settled in zip(held, ok, strict=True) if not settled]
        self._unsettled = self._unsettled[-UNSETTLED_HELD:]

    async def _next(self) -> list[Message]:
        """The batch to apply: the one this updater holds, if it failed to apply (the index
        was down), retried at once under a fresh lease, so that no other updater gets it
        meanwhile; else a new one from the log. A batch held for ``HOLD_LEASES`` leases is
        given back to the log instead, so that an updater cut off from the index alone
        does not keep its batch from the others for good."""
        if self._held:
            now = self._clock.now()
            if now >= self._lease_ends:
                # Renewing it now would start again a lease the log may have handed to
                # another updater, and writing it would be late: it is not this one's.
                self._lease_lost(self._held, "given up unwritten")
                self._held = []
            elif now - self._held_since < self._hold_limit_s:
                await self._log.in_progress(self._held)
                self._lease_ends = now + self._lease_s
                return self._held
            else:
                log.warning(
                    "giving back %d changes that could not be applied for %.0fs",
                    len(self._held),
                    now - self._held_since,
                )
                await self._give_back()
        ahead, self._ahead = self._ahead, None
        asked = self._ahead_at if ahead is not None else self._clock.now()
        self._held = await (ahead if ahead is not None else self._log.fetch(self._batch))
        self._held_since = self._clock.now()
        self._lease_ends = asked + self._lease_s
        if self._fetch_ahead and self._batch > 0 and len(self._held) >= self._batch:
            # Claimed now and applied after this batch: the log's order per player holds,
            # and a batch that fails to apply is held and retried before this one.
            self._ahead_at = self._clock.now()
            self._ahead = asyncio.create_task(self._log.fetch(self._batch))
        return self._held

    def _lease_lost(self, batch: list[Message], what: str) -> None:
        """Said once per batch: a batch is held one at a time."""
        metrics.LEASE_LOST.labels("updater").inc()
        log.warning(
            "the lease of %d changes ran out %.1fs ago: %s",
            len(batch),
            self._clock.now() - self._lease_ends,
            what,
        )

    async def close(self) -> None:
        """Finish the marks' note in flight, and give back the batch fetched ahead, if any
        (its leases would run out anyway)."""
        await self.noted()
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        ahead.cancel()
        with contextlib.suppress(BaseException):
            got = await ahead
            with contextlib.suppress(Unavailable):
                await self._log.nak(got)

    async def _give_back(self) -> None:
        held, self._held = self._held, []
        # If the log cannot take them back now, their leases run out by themselves.
        with contextlib.suppress(Unavailable):
            await self._log.nak(held)

    async def _apply_batch(
        self, changes: list[Message]
    ) -> tuple[list[Change], list[ProfileChange]]:
        """Write a batch to the index; returns the totals and the profile changes it held."""
        profiles = [c for c in changes if isinstance(c, ProfileChange)]
        if profiles:
            await self._apply_profiles(profiles)
        totals = [c for c in changes if isinstance(c, Change) and not is_mark(c.board)]
        banned = await self._store.banned([c.player_id for c in totals]) if totals else set()
        groups: dict[BoardKey, list[Change]] = defaultdict(list)
        for c in totals:
            if c.player_id in banned:
                metrics.CHANGES_SKIPPED_BANNED.inc()
            else:
                groups[BoardKey(c.board, c.window)].append(c)
        gate = asyncio.Semaphore(WRITES_AT_ONCE)

        async def apply(key: BoardKey, group: list[Change]) -> None:
            async with gate:
                await self._apply(key, group)

        # Each board window is a key of its own, written by GT/LT or by version: no write
        # of one depends on another's, so they need not wait for each other.
        await gather_all(apply(key, group) for key, group in groups.items())
        return totals, profiles

    async def _apply_profiles(self, changes: list[ProfileChange]) -> None:
        """Copy changed profiles into the index. Each is read from the store now, with its
        version, so it is at least as new as the change: the index keeps it unless it holds
        a newer one, and an older copy on its way never replaces it."""
        found = await self._store.versioned_profiles(list({c.player_id for c in changes}))
        await self._copy.write_profiles(list(found.values()))

    async def _apply(self, key: BoardKey, group: list[Change]) -> None:
        spec = self._boards.get(key.board)
        versioned = spec is not None and spec.name in self._versioned
        if spec is None and self._more is not None:
            spec = await self._more(key.board)
            versioned = spec is not None and self._settings.versioned(spec)
        if spec is None:
            log.warning(
                "dropping %d changes for board %s, which is no longer configured",
                len(group),
                key.board,
            )
            return
        try:
            window = window_of(spec.rule, key.window)  # a cohort's too
            writes = [c for c in group if not c.removed]
            entries = [(c.player_id, spec.score(c.tally, window)) for c in writes]
        except (WindowError, EncodingError) as e:
            # The store refuses totals that do not encode, so this means the board's
            # configuration changed under old changes; they cannot be applied as they are.
            log.error("dropping %d changes for %s/%s: %s", len(group), key.board, key.window, e)
            return
        if any(c.replaces for c in group):
            await self._recount(spec, key, window, group, versioned)
            return
        versions = [c.tally.version for c in writes] if versioned else None
        if entries:
            await self._write(
                key,
                entries,
                descending=spec.order is Order.DESC,
                expire_at=index_expiry(window),
                versions=versions,
                # every change's, with or without: one without clears what an older held
                metadata=[(c.tally.version, c.tally.metadata) for c in writes],
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

    async def _write(self, key: BoardKey, entries: list[tuple[str, int]], **kw: Any) -> None:
        """``RankIndex.write``, and the entries it left as they were counted: the index says
        how many it wrote in the same reply, so the count costs no round trip."""
        written = await self._index.write(key, entries, **kw)
        if written < len(entries):
            metrics.BOARD_WRITES_UNCHANGED.inc(len(entries) - written)

    async def _recount(
        self, spec: BoardSpec, key: BoardKey, window: Window, group: list[Change], versioned: bool
    ) -> None:
        """A batch holding a recount (a flagged result rejected, ``domain/rejection.py``): each
        player's newest change alone, since totals are absolute; written by its version for
        a player with a recount in the batch (it may lower a total ``GT`` keeps, and leaves
        its version as a floor no older change lands under, write.lua), by the board's own
        rule for the others. A removal (no other result counts) leaves a tombstone."""
        newest: dict[str, Change] = {}
        forced: set[str] = set()
        for c in group:
            forced.update([c.player_id] if c.replaces else [])
            held = newest.get(c.player_id)
            if held is None or c.tally.version >= held.tally.version:
                newest[c.player_id] = c
        expire_at = index_expiry(window)
        descending = spec.order is Order.DESC
        for by_version in (True, False):
            writes = [
                c
                for p, c in newest.items()
                if not c.removed and (p in forced or versioned) is by_version
            ]
            if writes:
                await self._write(
                    key,
                    [(c.player_id, spec.score(c.tally, window)) for c in writes],
                    descending=descending,
                    expire_at=expire_at,
                    versions=[c.tally.version for c in writes] if by_version else None,
                    metadata=[(c.tally.version, c.tally.metadata) for c in writes],
                )
        gone = [c for c in newest.values() if c.removed]
        if gone:
            await self._index.remove(
                key,
                [c.player_id for c in gone],
                [c.tally.version for c in gone],
                expire_at=expire_at,
            )


class BacklogMonitor:
    """Exports the outbox backlog (rows waiting, age of the oldest) as gauges."""

    def __init__(self, store: Outbox, clock: Clock) -> None:
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


def runners(n: Needs) -> list[Runner]:
    """The updater, with the checks that run beside each one: the outbox backlog
    exported, the index's copy of profiles kept complete, and the index mended after it
    lost writes (``mender.py``), which its role starts beside them (``roles.py``)."""
    w = n.settings.workers
    specs = Specs(n.store, n.clock)
    up = Updater(n.settings, n.store, n.index, n.copy, n.log, n.clock, specs, marks=n.marks)
    backlog = BacklogMonitor(n.store, n.clock)
    copier = ProfileCopier(n.fill_profiles, n.copy)
    return [
        Runner("updater", up.step, idle_sleep_s=w.idle_sleep_s, full=w.batch),
        Runner("backlog", backlog.step, idle_sleep_s=BACKLOG_CHECK_S),
        Runner("profiles", copier.step, idle_sleep_s=PROFILE_CHECK_S),
    ]
