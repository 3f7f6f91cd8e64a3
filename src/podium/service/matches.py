"""Recording a match's results (``POST /v1/matches/{matchId}/results``): which board windows
they count for, every check before the first write, the claim of the match, and one write
per player. The rules of one player's record (replay, hourly cap, fold) are ``domain/recording.py``.

Knows the ports, never an adapter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from podium import metrics
from podium.config.settings import Settings
from podium.domain.boards import BoardSpec
from podium.domain.metadata import MetadataError, canonical
from podium.domain.models import (
    ApiKey,
    MatchQuery,
    Mode,
    PlayerResult,
    RecordOutcome,
    ResultRecord,
    Target,
)
from podium.domain.recording import HOUR, check_cap, check_replay
from podium.domain.retention import oldest_accepted
from podium.domain.suspicion import RECENT, flag_for
from podium.domain.tournaments import Entered, tournament_totals
from podium.domain.validation import id_problem, results_problem
from podium.domain.windows import WindowKind, to_rfc3339
from podium.errors import (
    Conflict,
    Erased,
    Forbidden,
    InvalidInput,
    PodiumError,
    WindowClosed,
)
from podium.ports import Clock, MatchFacts, MatchRead, Results
from podium.ports.erasure import PlayerData
from podium.service.leagues import Leagues
from podium.service.lifecycle import Lifecycle
from podium.service.tournaments import Tournaments
from podium.util.aio import gather_all

log = logging.getLogger("podium.matches")


class MatchStore(Results, PlayerData, Protocol):
    """The results, and whom the store keeps as erased."""


class Matches:
    def __init__(
        self,
        settings: Settings,
        store: MatchStore,
        lifecycle: Lifecycle,
        clock: Clock,
        tournaments: Tournaments | None = None,
        leagues: Leagues | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.lifecycle = lifecycle  # which windows were frozen early
        self.clock = clock
        self.tournaments = tournaments  # live tournaments: more targets, chosen by player
        self.leagues = leagues  # league boards' cohorts: one more target each, by player

    def targets(self, mode: str, ended_at: int, now: float) -> list[tuple[Target, BoardSpec]]:
        """The board windows a result counts for: the window holding ``ended_at`` on every
        board fed by ``mode``, unless that window closed more than ``freeze_after_s`` ago."""
        out = []
        for spec in self.settings.boards:
            if not spec.counts(mode):
                continue
            w = spec.rule.window_at(ended_at)
            if w is None or (w.end is not None and now >= w.end + spec.freeze_after_s):
                continue
            out.append((Target(spec.name, w.id, w.start), spec))
        return out

    async def record(
        self,
        key: ApiKey,
        match_id: str,
        mode_name: str,
        ended_at: int,
        duration_s: int,
        results: Sequence[PlayerResult],
    ) -> dict[str, dict[str, int]]:
        """Record the match's results for ``key``; each player's totals after it, by board."""
        done = await self.record_all(key, match_id, mode_name, ended_at, duration_s, results)
        return {p: boards for p, (boards, _) in done.items()}

    async def record_all(
        self,
        key: ApiKey,
        match_id: str,
        mode_name: str,
        ended_at: int,
        duration_s: int,
        results: Sequence[PlayerResult],
    ) -> dict[str, tuple[dict[str, int], dict[str, Entered]]]:
        """``record``, with each player's tournament totals beside their board totals."""
        now = self.clock.now()
        mode = self.settings.mode(mode_name)
        if mode is None:
            raise InvalidInput(f"unknown mode {mode_name!r}")
        if not key.may_submit(mode_name):
            raise Forbidden(f"this credential may not submit mode {mode_name!r}")
        metadata = self._check_match(match_id, mode, ended_at, duration_s, results, now)
        # Windows frozen early (or just now) are left out here; the store checks again
        # inside each transaction, which is what makes it exact.
        targets = [
            (t, s)
            for t, s in self.targets(mode.name, ended_at, now)
            if not await self.lifecycle.is_frozen(t.board, t.window)
        ]
        if not targets and any(b.counts(mode.name) for b in self.settings.boards):
            scheduled = any(
                b.counts(mode.name) and b.rule.kind is WindowKind.SCHEDULE
                for b in self.settings.boards
            )
            gap = " or between two windows of a schedule" if scheduled else ""
            raise WindowClosed(f"endedAt is before every open window of mode {mode.name!r}{gap}")
        keep = self.settings.store.keep_results_days
        oldest = oldest_accepted(now, keep)
        if oldest is not None and ended_at < oldest:
            # Its day may have left the store already: a retry of a result archived there
            # would find no stored copy and count twice. After the windows' check, which
            # says more where no window takes it; before the claim, so nothing is claimed.
            raise InvalidInput(
                f"endedAt {to_rfc3339(ended_at)} is older than the {keep} days the store keeps "
                f"results (store.keep_results_days): the earliest accepted is "
                f"{to_rfc3339(oldest)}"
            )

        ids = [r.player_id for r in results]
        # Each player's tournaments besides: where joining is required, only theirs.
        extra: dict[str, list[tuple[Target, BoardSpec]]] = {p: [] for p in ids}
        if self.tournaments is not None:
            extra = await self.tournaments.targets(mode.name, ended_at, now, ids)
        if self.leagues is not None and self.leagues.boards:
            # Each player's cohort (or, on a first result, the pending target of their tier,
            # placed by the store inside the record's transaction).
            for p, more in (await self.leagues.targets(targets, ids)).items():
                extra[p] = extra[p] + more
        read_targets = targets + list({t: (t, s) for p in ids for t, s in extra[p]}.values())
        cap = mode.max_results_per_player_per_hour
        # The match is claimed for this key (unless another has it), with its facts, in the
        # same round trip as the read of everything the checks below need, and each player's
        # write after: flags are advisory (a look before prizes), so they are worked out from
        # this read; a retry keeps the flag of the first record.
        query = MatchQuery(
            match_id,
            key.id,
            now,
            ids,
            mode.name,
            RECENT,
            None if cap is None else now - HOUR,
            read_targets,
            ended_at=ended_at,
            duration_s=duration_s,
        )
        read = await self._open(query, ids)
        if read.owner != key.id and await self._expired(match_id, read, now):
            read = await self.store.open_match(query)
        if read.owner != key.id:
            raise Forbidden(f"match {match_id} was recorded by another game server")
        # A rejection claims nothing. The claim is made before the checks, in the read's
        # round trip, because claiming after them would cost the happy path a round trip of
        # its own (or leave two servers both writing a new id); so a request refused after
        # its claim releases the claim it made, unless a result is stored by then (the
        # store deletes only this call's claim of a match with no results: retry-safe). A
        # second server racing on the same new id meanwhile is refused 403 and, on retry,
        # finds the id free; the same key's concurrent record re-claims in its own write.
        try:
            by_player = {p: targets + extra[p] for p in ids}
            outcomes, records = await self._write(
                key, match_id, mode, ended_at, duration_s, results, metadata, by_player, read, now
            )
        except Exception:
            if read.claimed:
                await self._release(match_id, key.id, now)
            raise
        metrics.RESULTS_ACCEPTED.inc(sum(1 for o in outcomes if not o.replayed))
        metrics.RECORD_REREADS.inc(sum(1 for o in outcomes if o.reread))
        metrics.RESULTS_FLAGGED.inc(
            sum(1 for o, r in zip(outcomes, records, strict=True) if r.flag and not o.replayed)
        )
        specs = {t.board: s for p in ids for t, s in extra[p]}
        return {
            r.player_id: tournament_totals(o.totals, specs)
            for r, o in zip(records, outcomes, strict=True)
        }

    async def _write(
        self,
        key: ApiKey,
        match_id: str,
        mode: Mode,
        ended_at: int,
        duration_s: int,
        results: Sequence[PlayerResult],
        metadata: Sequence[str | None],
        targets: dict[str, list[tuple[Target, BoardSpec]]],
        read: MatchRead,
        now: float,
    ) -> tuple[list[RecordOutcome], list[ResultRecord]]:
        """Every check of the match, for every player, then the writes: a refusal comes
        before the first write, so it writes nothing."""
        facts = MatchFacts(mode.name, ended_at, duration_s)
        if read.facts is not None and read.facts != facts:
            # A match is a unit: its results may arrive in parts, all saying the same.
            was = read.facts
            ended = to_rfc3339(was.ended_at)
            raise Conflict(
                f"match {match_id} was recorded with mode {was.mode!r}, endedAt {ended} "
                f"and durationSeconds {was.duration_s}; a part of it must say the same"
            )
        cap = mode.max_results_per_player_per_hour
        records = [
            ResultRecord(
                r.player_id,
                match_id,
                key.id,
                mode.name,
                ended_at,
                duration_s,
                r.points,
                flag_for(r.points, read.recent_points.get(r.player_id, []), mode),
                meta,
            )
            for r, meta in zip(results, metadata, strict=True)
        ]
        existing = read.existing
        for rec in records:
            if rec.player_id in existing:
                check_replay(existing[rec.player_id], rec)
        # The cap counts new results only: a player whose result is stored is retrying. The
        # first player by id over it is named.
        for rec in sorted(records, key=lambda r: r.player_id):
            if rec.player_id not in existing:
                count, oldest = read.counts.get(rec.player_id, (0, None))
                check_cap(count, cap, oldest, now, rec)
        # The fold of every new result into what the read saw (a total a board cannot
        # encode, a window frozen meanwhile): pure, no round trip. Each record checks again
        # under its locks, which is what makes it exact when the player changed meanwhile.
        for rec in records:
            handle = read.handle(rec.player_id)
            if handle is not None:
                handle.check(rec, targets[rec.player_id], now, cap)
        # One transaction per player (the store is split by player); they run concurrently,
        # each written from the read above when nothing in it has changed meanwhile. All of
        # them finish before a failure is raised, so a release comes after every write.
        outcomes = await gather_all(
            self.store.record(r, targets[r.player_id], now, cap, read.handle(r.player_id))
            for r in records
        )
        return outcomes, records

    async def _open(self, query: MatchQuery, ids: list[str]) -> MatchRead:
        """The claim and its read, with the check for erased players beside it: an erased
        player (by the hash kept of their id) is refused whole, so that a retried old match
        never brings them back (docs/architecture.md §9). The check runs on the read pool
        while the claim runs, not before it: on a slow link its round trip was a third of a
        match's store time. A match refused by it releases the claim this call made, as any
        refusal after the claim does, so it leaves nothing behind."""
        erased, read = await asyncio.gather(
            self.store.erased(ids), self.store.open_match(query), return_exceptions=True
        )
        if isinstance(read, BaseException):
            raise read
        if isinstance(erased, BaseException) or erased:
            if read.claimed:
                await self._release(query.match_id, query.key_id, query.now)
            if isinstance(erased, BaseException):
                raise erased
            at = [i for i, p in enumerate(ids) if p in erased]
            raise Erased(f"results.{at[0]}: this player was erased; their results are refused")
        return read

    async def _expired(self, match_id: str, read: MatchRead, now: float) -> bool:
        """Whether another key's claim of the match was released because it is past its
        lease with no result: its request died between the claim and its writes (a crash
        between two commits), and no retry of that key came to finish it. A claim with a
        result is the match's for good; a record of the old key racing this release either
        commits first (and the claim stays) or finds the claim gone and another key's, and
        is refused (the store's record checks the owner in its transaction)."""
        at = read.claimed_at
        if at is None or read.existing or now - at < self.settings.server.claim_lease_s:
            return False
        released = await self.store.release_match(match_id, read.owner, at)
        if released:
            log.info("match %s: a claim of %s with no result, past its lease, released",
                     match_id, read.owner)  # fmt: skip
        return released

    async def _release(self, match_id: str, key_id: str, claimed_at: float) -> None:
        try:
            await self.store.release_match(match_id, key_id, claimed_at)
        except PodiumError:
            # The refusal is the answer; a claim left behind keeps the match this key's.
            log.warning("could not release the claim of match %s", match_id, exc_info=True)

    def _check_match(
        self,
        match_id: str,
        m: Mode,
        ended_at: int,
        duration_s: int,
        results: Sequence[PlayerResult],
        now: float,
    ) -> list[str | None]:
        """Every check of the match itself; each result's metadata in canonical form."""
        why = id_problem("matchId", match_id) or results_problem(
            len(results), self.settings.server.max_results_per_match
        )
        if why:
            raise InvalidInput(why)
        seen: set[str] = set()
        for r in results:
            if why := id_problem("playerId", r.player_id):
                raise InvalidInput(why)
            if r.player_id in seen:
                raise InvalidInput(f"player {r.player_id} is listed twice")
            seen.add(r.player_id)
            if not m.min_points <= r.points <= m.max_points:
                raise InvalidInput(
                    f"player {r.player_id}: {r.points} points is outside "
                    f"{m.min_points}..{m.max_points} "
                    f"for mode {m.name}"
                )
        if not m.min_duration_s <= duration_s <= m.max_duration_s:
            raise InvalidInput(
                f"durationSeconds {duration_s} is outside {m.min_duration_s}..{m.max_duration_s} "
                f"for mode {m.name}"
            )
        if ended_at > now + self.settings.server.max_clock_skew_s:
            raise InvalidInput("endedAt is in the future")
        return [_metadata(i, r) for i, r in enumerate(results)]


def _metadata(i: int, r: PlayerResult) -> str | None:
    """A result's metadata in canonical form, refused (422) naming the field."""
    if r.metadata is None:
        return None
    try:
        return canonical(r.metadata)
    except MetadataError as e:
        raise InvalidInput(f"results.{i}.metadata (player {r.player_id}) {e}") from None
