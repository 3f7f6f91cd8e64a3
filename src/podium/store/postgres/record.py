"""Results on Postgres: claiming a match, the checks' read, and one player's record.

The record path is built for round trips. ``open_match`` claims the match and reads every
player's state in one statement, and hands each player a ``Seen`` handle; ``record`` then
plans the write from it and queues it for the group commit (``group.py``): the records that
queue together are written by one statement (``podium_record_batch``), which takes their
locks and writes each only if nothing its handle holds has changed. When something has,
the record is read again (one statement, no lock) and planned and queued again, a few times
at most (``REPLANS``); after that, when it failed, or without a handle, the locked path
takes the locks, reads again inside the transaction and writes (four round trips, five on
grouped boards). Every path decides through ``recording.plan_record``.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import asyncpg

from podium.domain.boards import BoardSpec, Tally
from podium.domain.cohorts import pending_tier
from podium.domain.models import (
    Flagged,
    MatchQuery,
    RecordOutcome,
    ResultRecord,
    Standing,
    Target,
)
from podium.domain.recording import (
    HOUR,
    UNKNOWN_GROUP,
    RecordPlan,
    RecordState,
    place_in_groups,
    plan_record,
    shut,
)
from podium.domain.windows import GROUP_SEP
from podium.ports.store import MatchFacts, MatchRead, RecordHandle
from podium.store.common import (
    FLAGGED_COLS,
    RESULT_COLS,
    TALLY_COLS,
    Row,
    Seen,
    Stored,
    flagged_of,
    result_of,
    standing_of,
)
from podium.store.postgres import cohorts, locks
from podium.store.postgres.group import BATCH, GroupCommit, Queued
from podium.store.postgres.pool import Database, pairs, transaction
from podium.store.postgres.record_sql import (
    CLAIM,
    CLAIM_LOCK,
    HAS_RESULTS,
    OPEN_MATCH,
    OPEN_MATCH_LAZY,
    PAIRS,
    PRIOR,
    RECLAIM,
    RECORD_READ,
    RECORD_WRITE,
    RECORD_WRITE_PLACING,
    RELEASE,
)

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn


# Times a record the group commit did not write, because what it was planned from changed,
# is read, planned and queued again before the locked path does it (``Results._in_group``).
REPLANS = 2


class Results(Database):
    _group: GroupCommit | None = None  # the records' group commit, made on first use
    # Whether a claim may commit without its WAL flush (``record_sql.OPEN_MATCH_LAZY``):
    # not on a database of a store split by player, whose match's records may be written
    # on other databases, which flush nothing here.
    lazy_claims = True

    def warm_statements(self, reads: bool) -> list[tuple[str, tuple[object, ...]]]:
        warm = super().warm_statements(reads)
        if reads:
            return warm
        # The group commit's statement first (it costs a new connection the most: its
        # prepare looks up the record type, two more round trips), with no records: it
        # writes nothing. Then the claim, of an id of its own that no request can send
        # (a request's id is checked, ``id_problem``), in the transaction rolled back.
        claim = OPEN_MATCH_LAZY if self.lazy_claims else OPEN_MATCH
        never = f"warm up {secrets.token_hex(8)}"
        q = MatchQuery(never, "", 0.0, [], "", ended_at=0, duration_s=0)
        facts = (q.ended_at, q.duration_s)
        return [
            *warm,
            (BATCH, (locks.RECORD_NS, locks.WINDOW_NS, [])),
            (PRIOR, tuple(_prior_args(q))),  # a record planned again reads with it
            (claim, (*_prior_args(q), q.key_id, q.now, *facts)),
        ]

    async def open_match(self, query: MatchQuery) -> MatchRead:
        q = query
        facts = (q.ended_at, q.duration_s)
        if not q.player_ids:  # the read has a row per player, and so nowhere to put the owner

            async def claim(c: Conn) -> Claim:
                row = await c.fetchrow(CLAIM, q.match_id, q.key_id, float(q.now), q.mode, *facts)
                assert row is not None
                return await _claim(c, q.match_id, row)

            got = await self._run(claim, tx=False)
            return MatchRead(
                got.owner, {}, {}, {}, claimed=got.claimed, facts=got.facts, claimed_at=got.at
            )

        sql = OPEN_MATCH_LAZY if self.lazy_claims else OPEN_MATCH

        async def run(c: Conn) -> tuple[Claim, list[asyncpg.Record]]:
            rows = await c.fetch(sql, *_prior_args(q), q.key_id, float(q.now), *facts)
            return await _claim(c, q.match_id, rows[0]), rows

        # One autocommitted statement: the claim commits with it, as it would on its own.
        # On the writes' pool: it is the first step of a match's writes, and comes in bursts
        # with them, which the board reads should not queue behind.
        got, rows = await self._run(run, tx=False)
        return _match_read(rows, q, got.owner, got.claimed, got.facts, got.at)

    async def read_players(self, query: MatchQuery) -> MatchRead:
        """``open_match``'s read of the query's players, claiming nothing (its owner is ""):
        for a store split across databases, whose match claims live on another database."""
        if not query.player_ids:
            return MatchRead("", {}, {}, {})
        rows = await self._run(lambda c: c.fetch(PRIOR, *_prior_args(query)), tx=False)
        return _match_read(rows, query, "", False, None, None)

    async def release_match(self, match_id: str, key_id: str, claimed_at: float) -> bool:
        async def run(c: Conn) -> bool:
            await c.execute(CLAIM_LOCK, match_id)
            status = await c.execute(RELEASE, match_id, key_id, float(claimed_at))
            return bool(status == "DELETE 1")

        return await self._run(run)

    # -- what a store split by player asks of the database a match id maps to --------------

    async def release_match_unless(
        self,
        match_id: str,
        key_id: str,
        claimed_at: float,
        recorded_elsewhere: Callable[[], Awaitable[bool]],
    ) -> bool:
        """``release_match`` under the match's lock (the one ``reclaim_match`` takes),
        unless ``recorded_elsewhere``, asked while the lock is held, finds a result of the
        match on another database."""

        async def run(c: Conn) -> bool:
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", locks.MATCH_NS, locks.player_key(match_id)
            )
            if await recorded_elsewhere():
                return False
            await c.execute(CLAIM_LOCK, match_id)
            status = await c.execute(RELEASE, match_id, key_id, float(claimed_at))
            return bool(status == "DELETE 1")

        return await self._run(run)

    async def reclaim_match(self, result: ResultRecord, now: float) -> str:
        """The claim of ``result``'s match for its key, unless the match has one, under the
        match's lock: written after the record committed on the player's database (and
        before it, where the request did not make the claim itself). The owner after it."""
        r = result
        key = locks.player_key(r.match_id)
        args = (r.match_id, r.key_id, float(now), r.mode, r.ended_at, r.duration_s)

        async def run(c: Conn) -> str:
            while True:
                owner = await c.fetchval(RECLAIM, locks.MATCH_NS, key, *args)
                if owner is None:
                    # The insert waited for a concurrent claim, committed after this
                    # statement's snapshot: a new statement sees it (unless released since).
                    owner = await c.fetchval(
                        "SELECT key_id FROM matches WHERE match_id = $1", r.match_id
                    )
                if owner is not None:
                    return str(owner)

        return await self._run(run, tx=False)

    async def has_results(self, match_id: str) -> bool:
        """Whether this database holds a result of the match."""
        return bool(await self._run(lambda c: c.fetchval(HAS_RESULTS, match_id), tx=False))

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        handle: RecordHandle | None = None,
    ) -> RecordOutcome:
        since = None if hourly_cap is None else float(now - HOUR)
        placing = any(pending_tier(t.window) for t, _ in targets)
        if isinstance(handle, Stored) and not placing:
            # A retry of a result ``open_match`` found stored: its stored totals as the read
            # saw them, no round trip (the locked path took four, holding the player's lock,
            # for a retry that writes nothing; on a slow link a sixth of all records).
            plan = plan_record(result, handle.placed(targets), handle.state(), now, hourly_cap)
            return RecordOutcome(plan.totals, plan.replayed)
        if not isinstance(handle, Seen) or placing:
            # A league's first result in the window is placed inside the locked path's
            # transaction (``cohorts.place``), never in a group.
            return await self._locked(result, targets, now, since, hourly_cap)
        # Planned from what ``open_match`` saw, and written with the records that queue
        # beside it (group.py).
        return await self._in_group(result, targets, handle, now, since, hourly_cap, REPLANS)

    async def _in_group(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        seen: Seen,
        now: float,
        since: float | None,
        hourly_cap: int | None,
        replans: int,
    ) -> RecordOutcome:
        """The record planned from ``seen`` and queued for the group commit. If what it was
        planned from changed, it is read again (``read_players``, one round trip, no lock)
        and planned and queued again, ``replans`` times at most (or answered as a replay,
        when its player has a result of the match now); if it failed, or it changed every
        time, it is done alone by the locked path, whose transaction holds the player's lock
        across its four round trips (and so every group with that player waits as long)."""
        plan, row = _seen_row(result, targets, seen, now, since, hourly_cap)

        async def alone() -> RecordOutcome:
            out = await self._locked(result, targets, now, since, hourly_cap)
            return dataclasses.replace(out, reread=True)

        async def again() -> RecordOutcome:
            q = MatchQuery(
                result.match_id, result.key_id, now, [result.player_id], result.mode,
                since=since, targets=targets,
            )  # fmt: skip
            fresh = (await self.read_players(q)).handle(result.player_id)
            if isinstance(fresh, Stored):  # its result is stored now (a retry's): a replay
                return await self.record(result, targets, now, hourly_cap, fresh)
            if not isinstance(fresh, Seen):
                return await alone()
            out = await self._in_group(result, targets, fresh, now, since, hourly_cap, replans - 1)
            return dataclasses.replace(out, reread=True)

        job = Queued(row, RecordOutcome(plan.totals, False), alone, again if replans > 0 else None)
        return await self._grouped().record(job)

    async def _locked(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        since: float | None,
        hourly_cap: int | None,
    ) -> RecordOutcome:
        # The player lock already orders identical retries; the unique retry covers a writer
        # that inserts results without it.
        return await self._run(
            lambda c: _record_locked(c, result, targets, now, since, hourly_cap),
            tx=False,
            retry_unique=True,
        )

    def _grouped(self) -> GroupCommit:
        if self._group is None:
            self._group = GroupCommit(
                lambda fn: self._run(fn, tx=False), (locks.RECORD_NS, locks.WINDOW_NS)
            )
        return self._group

    async def results_of(self, match_id: str, player_ids: Sequence[str]) -> dict[str, ResultRecord]:
        rows = await self._fetch(
            f"SELECT {RESULT_COLS} FROM results WHERE match_id = $1 AND player_id = ANY($2)",
            match_id,
            list(player_ids),
        )
        return {r["player_id"]: result_of(r) for r in rows}

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        boards, windows = pairs(targets)
        rows = await self._fetch(
            f"SELECT board, window_id, total FROM tallies WHERE player_id = $1 AND {PAIRS}",
            player_id,
            boards,
            windows,
        )
        found = {(r["board"], r["window_id"]): r["total"] for r in rows}
        # In target order, so a repeated board name resolves the same way everywhere.
        return {
            t.board: found[(t.board, t.window)] for t in targets if (t.board, t.window) in found
        }

    async def player_standings(self, player_id: str) -> list[Standing]:
        rows = await self._fetch(
            f"SELECT {TALLY_COLS} FROM tallies WHERE player_id = $1", player_id
        )
        return [standing_of(r) for r in rows]

    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        rows = await self._fetch(
            f"SELECT {FLAGGED_COLS} FROM results "
            "WHERE flag IS NOT NULL AND accepted_at IS NULL AND rejected_at IS NULL "
            "AND ($1::text[] IS NULL OR mode = ANY($1::text[])) "
            "ORDER BY recorded_at DESC LIMIT $2",
            None if modes is None else list(modes),
            limit,
        )
        return [flagged_of(r) for r in rows]


def _prior_args(q: MatchQuery) -> list[object]:
    """The parameters $1-$10 of ``PRIOR`` (and of ``OPEN_MATCH``, before its claim's)."""
    boards, windows = pairs([t for t, _ in q.targets])
    grouped = [spec.group_by is not None for _, spec in q.targets]
    ids = list(q.player_ids)
    return [ids, q.match_id, q.mode, q.recent, q.since, boards, windows, grouped, GROUP_SEP,
            UNKNOWN_GROUP]  # fmt: skip


def _match_read(
    rows: Sequence[Row],
    q: MatchQuery,
    owner: str,
    claimed: bool,
    facts: MatchFacts | None,
    claimed_at: float | None,
) -> MatchRead:
    """The rows of ``PRIOR`` or ``OPEN_MATCH`` (one per player) as the read the checks need."""
    existing = {r["p"]: _result(r, q.match_id) for r in rows if r["key_id"] is not None}
    handles: dict[str, RecordHandle] = {}
    if q.targets:
        for r in rows:
            placed = place_in_groups(q.targets, r["country"])
            frozen, tallies = _target_state(placed, r)
            stored = existing.get(r["p"])
            if stored is not None:
                handles[r["p"]] = Stored(stored, r["country"], tallies)
            else:
                n, oldest = r["n"], r["oldest"]
                handles[r["p"]] = Seen(r["country"], frozenset(frozen), tallies, n, oldest)
    return MatchRead(
        owner,
        existing,
        {r["p"]: list(r["recent"]) for r in rows},
        {r["p"]: (r["n"], r["oldest"]) for r in rows if r["n"] > 0},
        handles,
        claimed,
        facts,
        claimed_at,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of a claim: the owner, whether this statement made it, the facts, and
    when the owner's claim was made."""

    owner: str
    claimed: bool
    facts: MatchFacts | None
    at: float


async def _claim(c: Conn, match_id: str, r: Row) -> Claim:
    """The claim's columns of ``CLAIM`` or ``OPEN_MATCH`` (``claim_sql``, ``owner_sql``)."""
    row: Row | None = r
    if r["owner"] is None:
        # DO NOTHING waited for a concurrent claim of the same id to commit, after this
        # statement's snapshot was taken: only a new statement (READ COMMITTED) sees who won.
        row = await c.fetchrow(
            "SELECT key_id AS owner, mode AS m_mode, ended_at AS m_ended, "
            "duration_s AS m_duration, recorded_at AS m_at FROM matches WHERE match_id = $1",
            match_id,
        )
        assert row is not None
    assert row is not None
    cols = (row["m_mode"], row["m_ended"], row["m_duration"])
    facts = None if None in cols else MatchFacts(*cols)
    return Claim(str(row["owner"]), bool(r["claimed"]), facts, float(row["m_at"]))


def _result(r: Row, match_id: str) -> ResultRecord:
    """The stored result in a row of ``OPEN_MATCH`` or ``RECORD_READ``."""
    return ResultRecord(
        r["p"], match_id, r["key_id"], r["mode"], r["ended_at"], r["duration_s"], r["points"],
        metadata=r["metadata"],
    )  # fmt: skip


def _seen_row(
    result: ResultRecord,
    targets: Sequence[tuple[Target, BoardSpec]],
    seen: Seen,
    now: float,
    since: float | None,
    hourly_cap: int | None,
) -> tuple[RecordPlan, tuple[object, ...]]:
    """A record planned from what ``open_match`` saw, as a ``podium_record`` (migration
    018: the arguments of ``podium_record_seen`` without the lock namespaces). The group
    writes it only if nothing of that changed before its locks were granted."""
    placed = seen.placed(targets)
    plan = plan_record(result, placed, seen.state(), now, hourly_cap)
    live = [t for t, _ in placed if not shut(t, seen.frozen)]
    was = [seen.tallies.get((t.board, t.window)) for t in live]
    boards, windows = pairs(live)
    row = (
        *_result_args(result, now),
        locks.player_key(result.player_id),
        locks.window_locks([t for t, _ in targets]),
        any(spec.group_by for _, spec in targets),
        seen.country,
        since,
        seen.count,
        boards,
        windows,
        [x and x.total for x in was],
        [x and x.reached_at for x in was],
        [x and x.version for x in was],
        [x and x.scored for x in was],
        *_write_args(plan, result),
    )
    return plan, row


async def _record_locked(
    c: Conn,
    result: ResultRecord,
    targets: Sequence[tuple[Target, BoardSpec]],
    now: float,
    since: float | None,
    hourly_cap: int | None,
) -> RecordOutcome:
    """A record that reads everything it decides on inside its transaction, after its
    locks: four round trips (five on grouped boards)."""
    pid = result.player_id
    async with transaction(c, locks.record_locks(pid, [t for t, _ in targets])):
        # Every read is a statement after the locks: READ COMMITTED takes a snapshot per
        # statement, so it sees whatever committed before they were granted.
        country = None
        if any(spec.group_by for _, spec in targets):
            # The player's group, under the same lock a move between groups takes.
            country = await c.fetchval("SELECT country FROM profiles WHERE player_id = $1", pid)
        placed = place_in_groups(targets, country)
        placing = any(pending_tier(t.window) for t, _ in placed)
        if placing:  # a league board's: the cohort a record placed the player in, if any
            placed = await cohorts.known(c, pid, placed)
        boards, windows = pairs([t for t, _ in placed])
        row = await c.fetchrow(
            RECORD_READ, pid, result.match_id, result.mode, since, boards, windows
        )
        assert row is not None
        frozen, current = _target_state(placed, row)
        existing = None
        if row["key_id"] is not None:
            existing = ResultRecord(
                pid, result.match_id, row["key_id"], row["mode"], row["ended_at"],
                row["duration_s"], row["points"], metadata=row["metadata"],
            )  # fmt: skip
        state = RecordState(existing, row["n"], row["oldest"], frozen, current)
        # Plan everything first (it may refuse, and then nothing is written), then write it
        # all in one statement.
        if placing:  # no cohort of a window that froze: its board window is frozen too
            placed = [
                (t, s)
                for t, s in placed
                if not (p := pending_tier(t.window)) or (t.board, p[0]) not in frozen
            ]
        plan = plan_record(result, placed, state, now, hourly_cap)
        if not plan.replayed:
            await _write(c, result, plan, placed, now)
        return RecordOutcome(plan.totals, plan.replayed)


async def _write(
    c: Conn,
    result: ResultRecord,
    plan: RecordPlan,
    placed: Sequence[tuple[Target, BoardSpec]],
    now: float,
) -> None:
    """The plan written in one statement; a pending cohort target (a league board's first
    result in the window) placed in that very statement, the last before the commit."""
    pending = [
        (t, s) for t, s in placed if pending_tier(t.window) and any(t == x for x, _ in plan.changes)
    ]
    for t, spec in pending[:-1]:  # several league boards: all but the last on their own
        cohort = await cohorts.place(c, result.player_id, result.match_id, t, spec, now)
        moved = [(Target(x.board, cohort, x.start) if x == t else x, n) for x, n in plan.changes]
        plan = dataclasses.replace(plan, changes=moved)
    args = [*_result_args(result, now), *_write_args(plan, result)]
    if not pending:
        await c.execute(RECORD_WRITE, *args)
        return
    t, spec = pending[-1]
    where = cohorts.place_args(result.player_id, result.match_id, t, spec, now)
    await c.execute(RECORD_WRITE_PLACING, *args, *where, t.window)


def _result_args(result: ResultRecord, now: float) -> list[object]:
    return [
        result.player_id,
        result.match_id,
        result.key_id,
        result.mode,
        result.ended_at,
        result.duration_s,
        result.points,
        float(now),
        result.flag,
    ]


def _write_args(plan: RecordPlan, result: ResultRecord) -> list[object]:
    """The tally and outbox columns of ``podium_write_record``: each changed tally at its last
    value, then every change in fold order."""
    last = plan.last_values()
    # Every tally a record changes holds the result's metadata (recording.step), so the
    # function takes it once, last, for the result, the tallies and the outbox rows.
    meta = result.metadata
    return [*_columns(last), [n.scored for _, n in last], *_columns(plan.changes), meta]


def _columns(changes: list[tuple[Target, Tally]]) -> list[list[str] | list[int]]:
    """Rows as five parallel arrays: board, window, total, reached_at, version."""
    return [
        [t.board for t, _ in changes],
        [t.window for t, _ in changes],
        [n.total for _, n in changes],
        [n.reached_at for _, n in changes],
        [n.version for _, n in changes],
    ]


def _target_state(
    placed: Sequence[tuple[Target, BoardSpec]], r: Row
) -> tuple[set[tuple[str, str]], dict[tuple[str, str], Tally]]:
    """The per-target columns of ``RECORD_READ`` and ``OPEN_MATCH`` (arrays in the order of
    ``placed``, each element NULL when there is no tally): the frozen windows, and the
    tallies there are."""
    frozen_flags = r["frozen"] or []
    columns = [r[k] or [] for k in ("totals", "reached", "versions", "scored")]
    frozen = {(t.board, t.window) for (t, _), f in zip(placed, frozen_flags, strict=True) if f}
    tallies = {
        (t.board, t.window): Tally(*tally)
        for (t, _), *tally in zip(placed, *columns, strict=True)
        if tally[0] is not None
    }
    return frozen, tallies
