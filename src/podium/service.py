"""The use cases: record a match, manage players, and the front door to reads and the life
of windows (``reads.py``, ``lifecycle.py``). Backend-agnostic.

This module knows the ports, never an adapter. It owns the rules that span backends: which
board windows a result counts for, the checks on write, and the order in which a ban
touches the store and the index.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import unicodedata
from collections.abc import Sequence
from dataclasses import replace

from podium import metrics
from podium.archive import Archive
from podium.config import Settings
from podium.domain.boards import BoardSpec
from podium.domain.models import (
    ApiKey,
    Flagged,
    FrozenWindow,
    MatchQuery,
    Mode,
    PlayerResult,
    Profile,
    RecordOutcome,
    ResultRecord,
    Scope,
    Target,
)
from podium.domain.suspicion import RECENT, flag_for
from podium.domain.windows import (
    GROUP_RE,
    Window,
    index_expiry,
    indexed_window,
)
from podium.errors import (
    Conflict,
    Forbidden,
    IndexUnavailable,
    InvalidInput,
    NotFound,
    PodiumError,
    Unauthorized,
    WindowClosed,
)
from podium.lifecycle import Lifecycle
from podium.ports import (
    BoardKey,
    Clock,
    MatchFacts,
    MatchRead,
    ProfileCopy,
    RankIndex,
    RankSource,
    ScoreStore,
)
from podium.profiles import ProfileCache
from podium.reads import Reads
from podium.recording import HOUR, check_cap, check_replay
from podium.views import Distribution, Entry, Page, PlayerRank

log = logging.getLogger("podium.service")

# A copier of profiles that stops (its process died) holds the copy this long at most; one
# that lives renews it with each page of 1,000 profiles.
COPY_LEASE_S = 60.0

__all__ = ["Distribution", "Entry", "Page", "PlayerRank", "Podium", "hash_key"]

REVIEW_FLAGGED = 200  # flagged results listed for review
# Checked with fullmatch: "$" would let "p_1\n" through.
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
# Controls, format characters (the bidi overrides and isolates, zero-width spaces, BOM),
# lone surrogates, line and paragraph separators...
_UNPRINTABLE = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# ...but the joiners and tags that emoji sequences and some scripts are written with.
_JOINERS = {0x200C, 0x200D, *range(0xE0020, 0xE0080)}


def text_problem(value: str) -> str | None:
    """Why a name shown to players is refused (None: it is fine): one with only spaces, or
    with a character that is not printable (NUL, U+202E and the other bidi controls)."""
    if not value.strip():
        return "must not be empty or only spaces"
    for ch in value:
        if unicodedata.category(ch) in _UNPRINTABLE and ord(ch) not in _JOINERS:
            return f"must not contain U+{ord(ch):04X} ({unicodedata.name(ch, 'a control')})"
    return None


def hash_key(secret: str) -> str:
    # Keys are 256-bit random tokens, so a plain digest is enough: there is nothing to
    # brute-force that a slow hash would protect.
    return hashlib.sha256(secret.encode()).hexdigest()


class Podium:
    def __init__(
        self,
        settings: Settings,
        store: ScoreStore,
        index: RankIndex,
        copy: ProfileCopy,
        clock: Clock,
        archive: Archive,
        ranking: RankSource,
    ) -> None:
        self.settings = settings
        self.store = store
        self.index = index
        self.copy = copy
        self.clock = clock
        self.profiles = ProfileCache(store, clock)
        self.lifecycle = Lifecycle(settings, store, clock, archive, self.profiles)
        self.reads = Reads(settings, store, ranking, copy, clock, self.lifecycle, self.profiles)
        self._keys: dict[str, tuple[float, ApiKey]] = {}

    # -- reads (reads.py) -------------------------------------------------------------

    def board(self, name: str) -> BoardSpec:
        return self.reads.board(name)

    def window(self, spec: BoardSpec, window_id: str | None, group: str | None = None) -> Window:
        return self.reads.window(spec, window_id, group)

    async def page(
        self, board: str, window_id: str | None, offset: int, limit: int, group: str | None = None
    ) -> Page:
        return await self.reads.page(board, window_id, offset, limit, group)

    async def player_rank(
        self,
        board: str,
        player_id: str,
        neighbors: int,
        window_id: str | None,
        group: str | None = None,
    ) -> PlayerRank:
        return await self.reads.player_rank(board, player_id, neighbors, window_id, group)

    async def friends_page(
        self, board: str, player_id: str, window_id: str | None, group: str | None = None
    ) -> Page:
        return await self.reads.friends_page(board, player_id, window_id, group)

    async def distribution(
        self, board: str, window_id: str | None, buckets: int, group: str | None = None
    ) -> Distribution:
        return await self.reads.distribution(board, window_id, buckets, group)

    async def review(
        self, board: str, window_id: str | None, top: int
    ) -> tuple[Page, list[Flagged]]:
        """What to look at before prizes: the top of the board, and the latest flagged
        results in the board's modes."""
        spec = self.board(board)
        page = await self.reads.page(board, window_id, 0, min(top, spec.exact_top))
        flagged = await self.store.flagged(spec.modes, REVIEW_FLAGGED)
        return page, flagged

    # -- the life of a window (lifecycle.py) ------------------------------------------

    async def freeze(self, board: str, window_id: str) -> tuple[bool, FrozenWindow]:
        """Freeze a window now (a tournament ended early), whether or not it is due."""
        spec = self.board(board)
        froze, info = await self.lifecycle.freeze(spec, self.window(spec, window_id))
        self.reads.clear_cache()
        return froze, info

    # -- credentials ------------------------------------------------------------------

    async def create_key(
        self, name: str, modes: Sequence[str], admin: bool = False, *, scope: Scope | None = None
    ) -> tuple[ApiKey, str]:
        """A new key and its secret (shown once, stored only hashed). ``scope`` defaults to
        admin when ``admin`` is set, else a game server's; only game-server keys have modes."""
        scope = scope or (Scope.ADMIN if admin else Scope.GAME)
        if not name.strip():
            raise InvalidInput("a key needs a name")
        for m in modes:
            if self.settings.mode(m) is None:
                raise InvalidInput(f"unknown mode {m!r}")
        if scope is Scope.GAME and not modes:
            raise InvalidInput("a game-server key needs at least one mode")
        if scope is not Scope.GAME and modes:
            raise InvalidInput(f"an {scope.value} key submits no results: give it no modes")
        key_id = secrets.token_hex(6)
        secret = f"pdm_{key_id}_{secrets.token_urlsafe(32)}"
        key = ApiKey(key_id, name, hash_key(secret), tuple(modes), scope, self.clock.now())
        await self.store.add_key(key)
        return key, secret

    async def list_keys(self) -> list[ApiKey]:
        return await self.store.list_keys()

    async def revoke_key(self, key_id: str) -> ApiKey:
        """Revoke a key: this process refuses it at once, every other process once its
        cached copy expires, within ``server.key_cache_s``."""
        key = await self.store.revoke_key(key_id, self.clock.now())
        if key is None:
            raise NotFound(f"no key {key_id!r}")
        self._keys.pop(key.key_hash, None)
        return key

    async def authenticate(self, token: str | None) -> ApiKey:
        """The key behind a bearer token. A verified key is trusted for ``key_cache_s``
        without a lookup, so a revocation reaches every process within that bound."""
        if not token:
            raise Unauthorized("a credential is required: Authorization: Bearer <key>")
        digest = hash_key(token)
        now = self.clock.now()
        cached = self._keys.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        key = await self.store.key_by_hash(digest)
        if key is None:
            raise Unauthorized("unknown credential")
        if key.revoked:
            self._keys.pop(digest, None)
            raise Unauthorized("this credential was revoked")
        self._keys[digest] = (now + self.settings.server.key_cache_s, key)
        return key

    # -- write ------------------------------------------------------------------------

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

    async def record_match(
        self,
        key: ApiKey,
        match_id: str,
        mode_name: str,
        ended_at: int,
        duration_s: int,
        results: Sequence[PlayerResult],
    ) -> dict[str, dict[str, int]]:
        now = self.clock.now()
        mode = self.settings.mode(mode_name)
        if mode is None:
            raise InvalidInput(f"unknown mode {mode_name!r}")
        if not key.may_submit(mode_name):
            raise Forbidden(f"this credential may not submit mode {mode_name!r}")
        self._check_match(match_id, mode.name, ended_at, duration_s, results, now)
        # Windows frozen early (or just now) are left out here; the store checks again
        # inside each transaction, which is what makes it exact.
        targets = [
            (t, s)
            for t, s in self.targets(mode.name, ended_at, now)
            if not await self.lifecycle.is_frozen(t.board, t.window)
        ]
        if not targets and any(b.counts(mode.name) for b in self.settings.boards):
            raise WindowClosed(f"endedAt is before every open window of mode {mode.name!r}")

        ids = [r.player_id for r in results]
        cap = mode.max_results_per_player_per_hour
        # The match is claimed for this key (unless another has it), with its facts, in the
        # same round trip as the read of everything the checks below need, and each player's
        # write after: flags are advisory (a look before prizes), so they are worked out from
        # this read; a retry keeps the flag of the first record.
        read = await self.store.open_match(
            MatchQuery(
                match_id,
                key.id,
                now,
                ids,
                mode.name,
                RECENT,
                None if cap is None else now - HOUR,
                targets,
                ended_at=ended_at,
                duration_s=duration_s,
            )
        )
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
            outcomes, records = await self._write_match(
                key, match_id, mode, ended_at, duration_s, results, targets, read, now
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
        return {r.player_id: o.totals for r, o in zip(records, outcomes, strict=True)}

    async def _write_match(
        self,
        key: ApiKey,
        match_id: str,
        mode: Mode,
        ended_at: int,
        duration_s: int,
        results: Sequence[PlayerResult],
        targets: Sequence[tuple[Target, BoardSpec]],
        read: MatchRead,
        now: float,
    ) -> tuple[list[RecordOutcome], list[ResultRecord]]:
        """Every check of the match, for every player, then the writes: a refusal comes
        before the first write, so it writes nothing."""
        facts = MatchFacts(mode.name, ended_at, duration_s)
        if read.facts is not None and read.facts != facts:
            # A match is a unit: its results may arrive in parts, all saying the same.
            was = read.facts
            raise Conflict(
                f"match {match_id} was recorded with mode {was.mode!r}, endedAt {was.ended_at} "
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
            )
            for r in results
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
                handle.check(rec, targets, now, cap)
        # One transaction per player (the store is split by player); they run concurrently,
        # each written from the read above when nothing in it has changed meanwhile. All of
        # them finish before a failure is raised, so a release comes after every write.
        done = await asyncio.gather(
            *(self.store.record(r, targets, now, cap, read.handle(r.player_id)) for r in records),
            return_exceptions=True,
        )
        outcomes: list[RecordOutcome] = []
        for o in done:
            if isinstance(o, BaseException):
                raise o
            outcomes.append(o)
        return outcomes, records

    async def _release(self, match_id: str, key_id: str, claimed_at: float) -> None:
        try:
            await self.store.release_match(match_id, key_id, claimed_at)
        except PodiumError:
            # The refusal is the answer; a claim left behind keeps the match this key's.
            log.warning("could not release the claim of match %s", match_id, exc_info=True)

    def _check_match(
        self,
        match_id: str,
        mode: str,
        ended_at: int,
        duration_s: int,
        results: Sequence[PlayerResult],
        now: float,
    ) -> None:
        m = self.settings.mode(mode)
        assert m is not None
        if not ID_RE.fullmatch(match_id):
            raise InvalidInput(f"matchId {match_id!r} must match {ID_RE.pattern}")
        if not results:
            raise InvalidInput("results must list at least one player")
        limit = self.settings.server.max_results_per_match
        if len(results) > limit:
            raise InvalidInput(f"a match has at most {limit} players, got {len(results)}")
        seen: set[str] = set()
        for r in results:
            if not ID_RE.fullmatch(r.player_id):
                raise InvalidInput(f"playerId {r.player_id!r} must match {ID_RE.pattern}")
            if r.player_id in seen:
                raise InvalidInput(f"player {r.player_id} is listed twice")
            seen.add(r.player_id)
            if not m.min_points <= r.points <= m.max_points:
                raise InvalidInput(
                    f"player {r.player_id}: {r.points} points is outside "
                    f"{m.min_points}..{m.max_points} "
                    f"for mode {mode}"
                )
        if not m.min_duration_s <= duration_s <= m.max_duration_s:
            raise InvalidInput(
                f"durationSeconds {duration_s} is outside {m.min_duration_s}..{m.max_duration_s} "
                f"for mode {mode}"
            )
        if ended_at > now + self.settings.server.max_clock_skew_s:
            raise InvalidInput("endedAt is in the future")

    # -- read -------------------------------------------------------------------------

    # -- players ----------------------------------------------------------------------

    async def set_profile(self, profile: Profile, fields: set[str] | None = None) -> None:
        """Save a profile; with ``fields``, only those change and the rest are kept."""
        if profile.country is not None and not GROUP_RE.fullmatch(profile.country):
            raise InvalidInput(f"country {profile.country!r} must be an ISO 3166-1 alpha-2 code")
        for name, value in (("name", profile.name), ("avatar", profile.avatar)):
            why = None if value is None else text_problem(value)
            if why is not None:
                raise InvalidInput(f"{name}: {why}")
        if fields is not None:
            old = (await self.store.profiles([profile.player_id])).get(profile.player_id)
            if old is not None:
                keep = {
                    f: getattr(old, f) for f in ("name", "avatar", "country") if f not in fields
                }
                profile = replace(profile, **keep)
        self._check_player(profile.player_id)
        version = await self.store.set_profile(profile, self.clock.now())
        self.profiles.forget(profile.player_id)
        # The change is in the outbox, and the updater will copy it into the index; copying
        # it here as well shows the new name at once to every reader of the index's copy (all
        # of them, while the copy is complete). If this fails, the outbox still brings it.
        try:
            await self.copy.write_profiles([(profile, version)])
        except IndexUnavailable:
            log.warning("index unavailable: profile of %s left to the updater", profile.player_id)

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None:
        self._check_player(player_id)
        if len(friends) > 1000:
            raise InvalidInput(f"at most 1000 friends, got {len(friends)}")
        for f in friends:
            self._check_player(f)
        await self.store.set_friends(player_id, sorted(set(friends) - {player_id}))

    def _check_player(self, player_id: str) -> None:
        if not ID_RE.fullmatch(player_id):
            raise InvalidInput(f"playerId {player_id!r} must match {ID_RE.pattern}")

    async def _ban_keys(self, player_id: str) -> list[BoardKey]:
        """Every board window the player has a tally on, plus every board's current window
        (on a grouped board only the group windows exist: those come with the tallies)."""
        keys = {BoardKey(s.board, s.window) for s in await self.store.player_standings(player_id)}
        now = int(self.clock.now())
        for spec in self.settings.boards:
            w = spec.rule.window_at(now)
            if w is not None and spec.group_by is None:
                keys.add(BoardKey(spec.name, w.id))
        return sorted(keys, key=lambda k: (k.board, k.window))

    async def ban(self, player_id: str, reason: str) -> None:
        """Store first (the updaters check it before every write), then the index, where
        the ban set refuses any change still in flight."""
        self._check_player(player_id)
        await self.store.ban(player_id, reason, self.clock.now())
        await self.index.ban(await self._ban_keys(player_id), player_id)
        # On a split board, gone from this process's reads at once, not at the aggregator's
        # next cycle: its snapshot from before still has them in its top.
        self.reads.clear_cache(changed_at=self.clock.now())

    async def unban(self, player_id: str) -> None:
        self._check_player(player_id)
        if not await self.store.unban(player_id):
            raise NotFound(f"player {player_id} is not banned")
        await self.index.unban(await self._ban_keys(player_id), player_id)
        # The totals never left the store; send them again and the updaters restore them.
        await self.store.requeue_player(player_id, self.clock.now())

    # -- rebuild ----------------------------------------------------------------------

    async def rebuild(self, board: str, window_id: str) -> int:
        """Replace one board window in the index with what the store holds."""
        spec = self.board(board)
        w = self.window(spec, window_id)
        entries: list[tuple[str, int]] = []
        versions: list[int] = []
        async for batch in self.store.standings(board, w.id):
            banned = await self.store.banned([s.player_id for s in batch])
            for s in batch:
                if s.player_id not in banned:
                    entries.append((s.player_id, spec.score(s.tally, w)))
                    versions.append(s.tally.version)
        await self.index.replace(
            BoardKey(board, w.id),
            entries,
            expire_at=index_expiry(w),
            versions=versions if self.settings.versioned(spec) else None,
        )
        self.reads.clear_cache(changed_at=self.clock.now())  # as after a ban
        return len(entries)

    async def copy_profiles(self, page: int = 1000) -> int | None:
        """Copy every profile from the store into the index, then mark the copy complete;
        return how many, or None if another copier is at it (or took over). Profiles that
        change meanwhile come through the outbox with newer versions, so the copy can be
        taken while the service runs."""
        token = secrets.token_hex(8)
        if not await self.copy.begin_profiles_copy(token, self.clock.now(), COPY_LEASE_S):
            return None
        after, n = "", 0
        while batch := await self.store.all_profiles(after, page):
            await self.copy.write_profiles(batch)
            after = batch[-1][0].player_id
            n += len(batch)
            if not await self.copy.keep_profiles_copy(token, self.clock.now(), COPY_LEASE_S):
                break
        else:
            if await self.copy.end_profiles_copy(token):
                return n
        log.warning("the copy of profiles was lost or taken over while this process filled it")
        return None

    async def rebuild_live(self) -> int:
        """Rebuild every window whose index key would still exist (start-up of the
        in-process index)."""
        now = self.clock.now()
        total = 0
        for spec in self.settings.boards:
            for window_id in await self.store.windows(spec.name):
                if indexed_window(spec.rule, window_id, now) is not None:
                    total += await self.rebuild(spec.name, window_id)
        return total
