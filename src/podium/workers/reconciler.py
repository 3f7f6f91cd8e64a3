"""The reconciler: walks the store's players and the index's members, holds the rank index
to what the store says, and repairs what differs (invariant 1 of docs/architecture.md: the
store is the record, the index a copy).

What it samples: two walks of every live board window, a tournament's live runs among them
(each a window of its board ``~<id>``; not frozen, its index key not yet
expired). One is a keyset walk, by player id, over the store's tallies of the window; the
other a keyset walk, in board order, over the index's members of it (``RankIndex.page_after``,
the last row of a page the cursor of the next), which finds what the first cannot see: a
member the store has no tally of (a write for a player whose results were deleted, a stray
member after a restore, an index written by a bug). Each step checks one page of ``BATCH``
of one walk, the walks taken in turn; at the end of a walk it starts again the next round.
So every player and every member is visited in turn, within ((players + members) / BATCH)
steps of ``PERIOD_S``. One page a step, whichever walk, keeps the reconciler's load flat and
small beside the updaters': a page of the index costs ``BATCH`` rows whatever its depth
(``BATCH`` of each shard on a split board), where a page by rank would read every shard down
to it, and its store read is one query by key (one per database of a split store).

Each page is read from the store first, then the players' scores from the index (one
``ranks`` call per board window: one call per shard on a split board) and their entry
metadata (one more). A player whose score differs from ``BoardSpec.score`` of their tally,
who is missing, who is banned and still on the board, or whose entry metadata is not the
tally's, is only a *suspect*: the change that explains it may be in flight (committed,
not yet applied by an updater). A suspect is looked at again once every outbox row older
than the store read that saw it has been applied (``Outbox.outbox_backlog``), by reading
the index first and the store after: if the store still holds the same tally version, no
change of that player is on its way, and the index should hold exactly its score; only
then is it a mismatch, and repaired. A result recorded meanwhile changes the version, and
the suspect is dropped (the walk comes round to the player again), so a change in flight is
never "repaired" backwards.

A member of the index's walk is checked against ``Windows.tallied`` (which of a page's
members have a tally in the window), read after the index's page: a member an updater wrote
was committed before, so the store read sees its tally, and one without is a suspect
("extra"). It is confirmed the same way: once the backlog passed that read, the index read
first and the store after; if it is still on the board and the store still has no tally of
it there, no change of it is on its way (a result recorded since gives it a tally, and the
suspect is dropped for the store's walk to hold it to). A member whose score moves past the
cursor during a walk is skipped or seen twice by it; the next round sees it. Not seen at
all: a window the store has no tally of (its key only in the index), since the live windows
are the store's (``Windows.windows``) and the index lists no keys.

How it repairs, always with the store's value read after the index:

- banned and on the board (with a tally or without one): ``RankIndex.ban`` of that window,
  which removes the player and refuses later writes (the ban is re-asserted, never lifted);
- on the board without a tally (``extra``): the per-player reset below, which ends with the
  store's value, none here, so the member ends absent;
- the right score with other entry metadata than the store's tally (``metadata``): the
  per-player reset below, which writes the store's metadata with its value;
- missing or too low (too high, on ascending boards): the updater's own idempotent write
  (GT/LT, or the tally's version on boards whose totals can fall);
- when that write lands nothing (GT cannot lower a score that is too high; a versioned
  board refuses a wrong score that carries the right version): a per-player reset, a ban
  and an unban of that one window (which clears the player's score and version there),
  then the store read again and its value written, unless the player is banned by then, in
  which case the ban is put back. A write of any change that lands during the reset was
  committed before that read, so the value written includes it; later ones are newer
  (GT/versions keep them). A real ban racing the reset is seen by that read, since the
  service bans in the store before the index.

An erased player (the store refuses them by the keyed hash of their id, ``Players.banned``
answers them beside the banned) is taken off a board by ``RankIndex.forget``, never by a
ban: a ban set would keep their id. And since the erasure keeps no id once done, a copy that
came back later (a Redis replica promoted without the erasure's deletes: a profile copy, a
cohort's member and metadata, a ban set) is found by the hash of each id the index holds:
the sweep (``service.erasure.sweep_erased``), at the start of a round, at most every
``SWEEP_S``. It reads the store's hashes once (none ever erased: no walk at all) and walks the
index's keys a page at a time.

Several reconcilers may run at once without a lease: every repair writes the store's
current value through idempotent writes, so two doing it leave the same board; two resets
of one player at once each end with the store's value or a ban. Each walks on its own, so
running many costs reads, not correctness.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from podium import metrics
from podium.config.settings import Settings
from podium.domain.boards import BoardSpec, Order
from podium.domain.codec import EncodingError
from podium.domain.cohorts import base_window, cohort_window, window_of
from podium.domain.models import Standing
from podium.domain.windows import (
    Window,
    WindowError,
    index_expiry,
    indexed_window,
)
from podium.ports import BoardKey, Clock, Outbox, Players, RankIndex, Results, Windows
from podium.ports.erasure import IndexSweep
from podium.ports.tournaments import TournamentStore
from podium.service.erasure import ErasedHashes, sweep_erased
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.reconciler")

PERIOD_S = 5.0  # a page of one board window this often
BATCH = 500  # players per page
# The outbox's times come from the API processes' clocks: a margin for their skew, so that
# a row committed just before a store read is not taken for one committed after it.
SKEW_S = 1.0
EXAMPLES = 5  # players named in a repair's warning
# The sweep for erased players at most this often: a walk of every member of the index, a
# page at a time (3.5 to 11 s a million ids on the loaded test machine, 1 s of it Redis's,
# BENCHMARKS.md), at the start of the reconciler's first round, then of a round at least
# this long after the last one began.
SWEEP_S = 3600.0


class ReconcilerStore(Results, Outbox, Players, Windows, TournamentStore, ErasedHashes, Protocol):
    """What the reconciler reads of the store."""

    async def erased(self, player_ids: Sequence[str]) -> set[str]: ...


@dataclass
class _Suspect:
    key: BoardKey
    player_id: str
    # the tally version the store held when the difference was seen; None: it held no
    # tally (a member of the index's window that the store does not have, "extra")
    version: int | None
    seen_at: float  # just after that store read


@dataclass
class _Walk:
    """The walk of the store's tallies of one window, by player id."""

    key: BoardKey
    spec: BoardSpec
    window: Window
    pages: AsyncIterator[list[Standing]]


@dataclass
class _IndexWalk:
    """The walk of the index's members of one window, in board order, by keyset: the last
    row of the page before is the cursor (``RankIndex.page_after``)."""

    key: BoardKey
    spec: BoardSpec
    window: Window
    after: tuple[str, int] | None = None


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        store: ReconcilerStore,
        index: RankIndex,
        clock: Clock,
        *,
        batch: int = BATCH,
        snapshots: IndexSweep | None = None,
    ) -> None:
        """``snapshots``: the aggregator's, swept with the index (None: the index alone)."""
        self._settings = settings
        self._boards = {b.name: b for b in settings.boards}
        self._store = store
        self._index = index
        self._clock = clock
        self._batch = batch
        self._walks: list[_Walk | _IndexWalk] = []
        self._suspects: dict[tuple[BoardKey, str], _Suspect] = {}
        self._swept_at: float | None = None  # when the last sweep for erased players began
        self._swept: list[IndexSweep] = [index] if snapshots is None else [index, snapshots]

    async def step(self) -> int:
        """Confirm and repair the suspects that are due, then check one more page; returns
        how many players were checked."""
        await self._confirm_due()
        return await self._walk_one()

    # -- the walk ----------------------------------------------------------------------

    async def _specs(self) -> list[BoardSpec]:
        """The configured boards, then every tournament's board (``~<id>``: its runs are
        windows of it, written to the index as a board's are), each known by name for the
        confirmation of its suspects."""
        # Not the settled ones: every run of theirs is frozen, read from its final standings.
        made = [t.spec() for t in await self._store.unsettled_tournaments()]
        self._boards = {b.name: b for b in self._settings.boards} | {b.name: b for b in made}
        return [*self._settings.boards, *made]

    async def _live(self) -> list[_Walk | _IndexWalk]:
        now = self._clock.now()
        out: list[_Walk | _IndexWalk] = []
        for spec in await self._specs():
            frozen = await self._store.frozen(spec.name)
            for wid in await self._store.windows(spec.name):
                if wid in frozen or base_window(wid) in frozen:
                    continue  # served from its final standings (a cohort's: its window's)
                w = _indexed(spec, wid, now)
                if w is not None:
                    key = BoardKey(spec.name, wid)
                    pages = self._store.standings(spec.name, wid, self._batch)
                    out += (_Walk(key, spec, w, pages), _IndexWalk(key, spec, w))
        return out

    async def sweep(self) -> int:
        """The index swept for erased players (``service.erasure.sweep_erased``) now; a
        sweep that fails (the index or the store down) is tried again at the next round."""
        began = self._clock.now()
        gone = await sweep_erased(self._store, self._swept)
        self._swept_at = began
        return gone

    async def _walk_one(self) -> int:
        if not self._walks:
            if self._swept_at is None or self._clock.now() - self._swept_at >= SWEEP_S:
                await self.sweep()
            self._walks = await self._live()
            if not self._walks:
                return 0
        walk = self._walks.pop(0)
        if isinstance(walk, _IndexWalk):
            checked = await self._check_members(walk)
            if checked == 0:
                return 0  # this window's members are done; the next round starts again
        else:
            try:
                page = await anext(walk.pages)
            except StopAsyncIteration:
                return 0  # this window's walk is done; the next round starts it again
            seen_at = self._clock.now()
            checked = await self._check(walk.spec, walk.window, walk.key, page, seen_at)
        self._walks.append(walk)
        metrics.RECONCILER_CHECKED.inc(checked)
        return checked

    async def _check(
        self, spec: BoardSpec, w: Window, key: BoardKey, page: Sequence[Standing], seen_at: float
    ) -> int:
        players = [s.player_id for s in page]
        banned = await self._store.banned(players)
        placed = await self._index.ranks(key, players, descending=spec.order is Order.DESC)
        meta = await self._index.entry_metadata(key, players)
        for s, p in zip(page, placed, strict=True):
            held = None if p is None else p.score
            kind = _kind(spec, w, s, s.player_id in banned, held)
            if kind is None and held is not None and s.player_id not in banned:
                kind = _meta_kind(s, meta.get(s.player_id))
            if kind is not None:
                k = (key, s.player_id)
                if k not in self._suspects:
                    self._suspects[k] = _Suspect(key, s.player_id, s.tally.version, seen_at)
        return len(page)

    async def _check_members(self, walk: _IndexWalk) -> int:
        """One page of the index's members of a window, and which of them the store has a
        tally of there: those it has not are suspects ("extra"). The index first, the store
        after: a member the updater wrote was committed before it was written, so the store
        read sees its tally; only a member the store never had, or no longer has, is left.

        Bounded like the store's walk: one keyset page of ``batch`` members (``batch``
        rows of each shard on a split board, however deep the page) and one store read of
        those players by key, per step."""
        desc = walk.spec.order is Order.DESC
        page = await self._index.page_after(walk.key, walk.after, self._batch, descending=desc)
        if not page:
            return 0
        walk.after = page[-1]
        members = [m for m, _ in page]
        held = await self._store.tallied(walk.key.board, walk.key.window, members)
        seen_at = self._clock.now()
        for m in members:
            if m not in held:
                self._suspects.setdefault((walk.key, m), _Suspect(walk.key, m, None, seen_at))
        return len(page)

    # -- confirming and repairing ------------------------------------------------------

    async def _confirm_due(self) -> None:
        if not self._suspects:
            return
        now = self._clock.now()
        pending, age = await self._store.outbox_backlog(now)
        applied_before = float("inf") if pending == 0 else now - age - SKEW_S
        due = [s for s in self._suspects.values() if s.seen_at < applied_before]
        repaired: list[str] = []
        for s in due:
            del self._suspects[(s.key, s.player_id)]
            kind = await self._confirm(s)
            if kind is not None:
                # The board window and why, never the player: podium logs no player's id
                # (an erased player's would outlive the erasure in the operator's logs).
                repaired.append(f"{s.key.board}/{s.key.window} ({kind})")
        if repaired:
            log.warning(
                "repaired %d index entries that differed from the store, e.g. %s",
                len(repaired),
                ", ".join(repaired[:EXAMPLES]),
            )

    async def _confirm(self, s: _Suspect) -> str | None:
        spec = self._boards.get(s.key.board)
        if spec is None:
            return None
        try:
            w = window_of(spec.rule, s.key.window)  # a league's cohort's too
        except WindowError:
            return None
        if s.version is None:
            return await self._confirm_extra(s, spec, w)
        desc = spec.order is Order.DESC
        # The index first, the store after: the store's answer is then at least as new as
        # anything the index held.
        (placed,) = await self._index.ranks(s.key, [s.player_id], descending=desc)
        meta = (await self._index.entry_metadata(s.key, [s.player_id])).get(s.player_id)
        standing, banned = await self._read(s.key, s.player_id)
        if standing is None or standing.tally.version != s.version:
            return None  # the player changed since: the walk will come round to them again
        held = None if placed is None else placed.score
        kind = _kind(spec, w, standing, banned, held)
        if kind is None and held is not None and not banned:
            kind = _meta_kind(standing, meta)
        if kind is None:
            return None  # it was in flight after all
        metrics.RECONCILER_MISMATCHES.labels(kind).inc()
        if kind == "banned":
            await self._refuse(s.key, s.player_id)
            return kind
        if kind == "metadata":
            # The score is right and the entry's metadata is not: a write of the same
            # version would keep what is held (write.lua), so the per-player reset.
            await self._reset(spec, w, s.key, s.player_id)
            return kind
        if await self._write(spec, w, s.key, standing) == 0:
            await self._reset(spec, w, s.key, s.player_id)
        return kind

    async def _confirm_extra(self, s: _Suspect, spec: BoardSpec, w: Window) -> str | None:
        """A member the store had no tally of: still on the index, and the store (read
        after the index) still without one, once every change committed before the walk
        saw it was applied? Then nothing on its way explains it: take it off the board."""
        desc = spec.order is Order.DESC
        (placed,) = await self._index.ranks(s.key, [s.player_id], descending=desc)
        if placed is None:
            return None  # gone meanwhile (a change that removed it, applied)
        if await self._store.tallied(s.key.board, s.key.window, [s.player_id]):
            return None  # a result recorded since: the store's walk comes round to it
        metrics.RECONCILER_MISMATCHES.labels("extra").inc()
        if await self._store.banned([s.player_id]):
            # banned in the store, and on the board anyway: the ban re-asserted (removing
            # the member), never the reset, which would lift it for a moment; an erased
            # player forgotten instead
            await self._refuse(s.key, s.player_id)
        else:
            # The per-player reset ends with the store's value read after it: none here, so
            # the member ends absent, unless a result landed meanwhile (then its value) or
            # a ban (then the ban again).
            await self._reset(spec, w, s.key, s.player_id)
        return "extra"

    async def _read(self, key: BoardKey, player_id: str) -> tuple[Standing | None, bool]:
        standings = await self._store.player_standings(player_id)
        standing = next((x for x in standings if BoardKey(x.board, x.window) == key), None)
        return standing, bool(await self._store.banned([player_id]))

    async def _write(self, spec: BoardSpec, w: Window, key: BoardKey, s: Standing) -> int:
        try:
            score = spec.score(s.tally, w)
        except EncodingError as e:  # the board's configuration changed under the tally
            log.error("%s/%s: a player's total cannot be encoded: %s", key.board, key.window, e)
            return 1  # nothing a reset could fix
        versioned = self._settings.versioned(spec)
        return await self._index.write(
            key,
            [(s.player_id, score)],
            descending=spec.order is Order.DESC,
            expire_at=index_expiry(w),
            versions=[s.tally.version] if versioned else None,
            metadata=[(s.tally.version, s.tally.metadata)],
        )

    async def _reset(self, spec: BoardSpec, w: Window, key: BoardKey, player_id: str) -> None:
        """Clear the player's score and version on this one window, then write the store's
        value read after that (or ban again, if the player is banned by then)."""
        await self._index.ban([key], player_id)
        await self._index.unban([key], player_id)
        standing, banned = await self._read(key, player_id)
        if banned:
            await self._refuse(key, player_id)
        elif standing is not None:
            await self._write(spec, w, key, standing)

    async def _refuse(self, key: BoardKey, player_id: str) -> None:
        """A player the store refuses, off the board: a banned one by a ban of this window
        (later writes of theirs refused), an erased one forgotten (``RankIndex.forget``),
        since a ban set would keep their id and the store refuses them by its hash."""
        if await self._store.erased([player_id]):
            await self._index.forget([key], player_id)
        else:
            await self._index.ban([key], player_id)


def _kind(spec: BoardSpec, w: Window, s: Standing, banned: bool, held: int | None) -> str | None:
    """How the index's score ``held`` differs from what the store says, or None."""
    if banned:
        return "banned" if held is not None else None
    try:
        want = spec.score(s.tally, w)
    except EncodingError:
        return None  # the updater drops such changes too; nothing to hold the index to
    if held is None:
        return "missing"
    if held == want:
        return None
    return "too_high" if held > want else "too_low"


def _meta_kind(s: Standing, held: str | None) -> str | None:
    """Whether the index's entry metadata differs from the store's, on a right score."""
    return None if held == s.tally.metadata else "metadata"


def runners(n: Needs) -> list[Runner]:
    rec = Reconciler(n.settings, n.store, n.index, n.clock, snapshots=n.snapshots)
    # No step counts as a full batch: one a period, whatever it did.
    return [Runner("reconciler", rec.step, idle_sleep_s=PERIOD_S, full=1 << 30)]


def _indexed(spec: BoardSpec, window_id: str, now: float) -> Window | None:
    """``indexed_window``, and a league cohort's window (``domain/cohorts.py``) while its key
    still exists: a cohort is one more window of its board on the index."""
    w = cohort_window(spec.rule, window_id)
    if w is None:
        return indexed_window(spec.rule, window_id, now)
    expiry = index_expiry(w)
    return w if expiry is None or expiry > now else None
