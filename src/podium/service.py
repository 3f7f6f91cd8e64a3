"""The use cases: record a match, read boards, manage players. Backend-agnostic.

This module knows the ports, never an adapter. It owns the rules that span backends: which
board windows a result counts for, the checks on write, the one-second page cache, and the
order in which a ban touches the store and the index.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from podium import metrics
from podium.config import Settings
from podium.domain.boards import BoardSpec, Order, Ties
from podium.domain.codec import MAX_BITS
from podium.domain.models import ApiKey, PlayerResult, Profile, ResultRecord, Target
from podium.domain.windows import Window, WindowError, index_expiry
from podium.errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    RateLimited,
    Unauthorized,
    WindowClosed,
)
from podium.ports import BoardKey, Clock, RankIndex, ScoreStore
from podium.recording import HOUR, check_replay

SCORE_LIMIT = 1 << MAX_BITS  # above every score the codec can produce
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Entry:
    rank: int
    player_id: str
    points: int
    name: str | None = None
    avatar: str | None = None
    global_rank: int | None = None


@dataclass(frozen=True, slots=True)
class Page:
    board: str
    window: str
    as_of: float
    entries: list[Entry]


@dataclass(frozen=True, slots=True)
class Bucket:
    low: int  # points, inclusive
    high: int  # points, inclusive
    count: int


@dataclass(frozen=True, slots=True)
class Distribution:
    board: str
    window: str
    as_of: float
    players: int
    buckets: list[Bucket]


@dataclass(frozen=True, slots=True)
class PlayerRank:
    board: str
    window: str
    rank: int
    exact: bool
    points: int
    neighbors: list[Entry]
    top_percent: float | None = None


def hash_key(secret: str) -> str:
    # Keys are 256-bit random tokens, so a plain digest is enough: there is nothing to
    # brute-force that a slow hash would protect.
    return hashlib.sha256(secret.encode()).hexdigest()


class Podium:
    def __init__(
        self, settings: Settings, store: ScoreStore, index: RankIndex, clock: Clock
    ) -> None:
        self.settings = settings
        self.store = store
        self.index = index
        self.clock = clock
        self.boards = {b.name: b for b in settings.boards}
        self._keys: dict[str, tuple[float, ApiKey]] = {}
        self._pages: dict[tuple[str, str, int, int], tuple[float, Page]] = {}

    # -- credentials ------------------------------------------------------------------

    async def create_key(self, name: str, modes: Sequence[str], admin: bool) -> tuple[ApiKey, str]:
        for m in modes:
            if self.settings.mode(m) is None:
                raise InvalidInput(f"unknown mode {m!r}")
        if not admin and not modes:
            raise InvalidInput("a game-server key needs at least one mode")
        key_id = secrets.token_hex(6)
        secret = f"pdm_{key_id}_{secrets.token_urlsafe(32)}"
        key = ApiKey(key_id, name, hash_key(secret), tuple(modes), admin, self.clock.now())
        await self.store.add_key(key)
        return key, secret

    async def authenticate(self, token: str | None) -> ApiKey:
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
        targets = self.targets(mode.name, ended_at, now)
        if not targets and any(b.counts(mode.name) for b in self.settings.boards):
            raise WindowClosed(f"endedAt is before every open window of mode {mode.name!r}")

        owner = await self.store.claim_match(match_id, key.id, now)
        if owner != key.id:
            raise Forbidden(f"match {match_id} was recorded by another game server")
        records = [
            ResultRecord(r.player_id, match_id, key.id, mode.name, ended_at, duration_s, r.points)
            for r in results
        ]
        # Check every player before writing any, so that a conflict or a cap refuses the
        # whole match instead of leaving it half recorded.
        existing = await self.store.existing_results(match_id, [r.player_id for r in results])
        for rec in records:
            if rec.player_id in existing:
                check_replay(existing[rec.player_id], rec)
        cap = mode.max_results_per_player_per_hour
        fresh = [r for r in records if r.player_id not in existing]
        if cap is not None and fresh:
            counts = await self.store.results_since(
                [r.player_id for r in fresh], mode.name, now - HOUR
            )
            over = {p: c for p, c in counts.items() if c[0] >= cap}
            if over:
                p, (count, oldest) = min(over.items())
                raise RateLimited(
                    f"player {p} has {count} results in mode {mode.name} in the last hour "
                    f"(cap {cap})",
                    retry_after=int(oldest + HOUR - now) + 1,
                )
        # One transaction per player (the store is split by player); they run concurrently.
        outcomes = await asyncio.gather(*(self.store.record(r, targets, now, cap) for r in records))
        metrics.RESULTS_ACCEPTED.inc(sum(1 for o in outcomes if not o.replayed))
        return {r.player_id: o.totals for r, o in zip(records, outcomes, strict=True)}

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
        if not ID_RE.match(match_id):
            raise InvalidInput(f"matchId {match_id!r} must match {ID_RE.pattern}")
        if not results:
            raise InvalidInput("results must list at least one player")
        limit = self.settings.server.max_results_per_match
        if len(results) > limit:
            raise InvalidInput(f"a match has at most {limit} players, got {len(results)}")
        seen: set[str] = set()
        for r in results:
            if not ID_RE.match(r.player_id):
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

    def board(self, name: str) -> BoardSpec:
        spec = self.boards.get(name)
        if spec is None:
            raise NotFound(f"no board named {name!r}")
        return spec

    def window(self, spec: BoardSpec, window_id: str | None) -> Window:
        if window_id is None:
            w = spec.rule.window_at(int(self.clock.now()))
            if w is None:
                raise NotFound(f"board {spec.name} has no open window yet")
            return w
        try:
            return spec.rule.parse(window_id)
        except WindowError as e:
            raise InvalidInput(str(e)) from None

    async def page(self, board: str, window_id: str | None, offset: int, limit: int) -> Page:
        spec = self.board(board)
        w = self.window(spec, window_id)
        if offset >= spec.exact_top:
            raise InvalidInput(
                f"offset {offset} is past the exact top ({spec.exact_top}) of board {board}; "
                "look a player up by id instead"
            )
        cache_key = (board, w.id, offset, limit)
        now = self.clock.now()
        hit = self._pages.get(cache_key)
        if hit is not None and hit[0] > now:
            return hit[1]
        stop = min(offset + limit, spec.exact_top) - 1
        key = BoardKey(board, w.id)
        rows = await self.index.page(key, offset, stop, descending=spec.order == "desc")
        names = await self.store.profiles([p for p, _ in rows])
        ranks = await self._ranks(spec, key, rows, offset)
        codec = spec.codec
        entries = [
            _entry(r, p, codec.points(s), names.get(p))
            for r, (p, s) in zip(ranks, rows, strict=True)
        ]
        page = Page(board, w.id, now, entries)
        if len(self._pages) > 10_000:  # bounded: one entry per (board, window, page) asked for
            self._pages.clear()
        self._pages[cache_key] = (now + self.settings.server.page_cache_s, page)
        return page

    async def player_rank(
        self, board: str, player_id: str, neighbors: int, window_id: str | None
    ) -> PlayerRank:
        spec = self.board(board)
        w = self.window(spec, window_id)
        key = BoardKey(board, w.id)
        desc = spec.order == "desc"
        found = await self.index.rank(key, player_id, descending=desc)
        if found is None:
            raise NotFound(f"player {player_id} is not on board {board} ({w.id})")
        rank, score = found
        rows = await self.index.page(
            key, max(0, rank - neighbors), rank + neighbors, descending=desc
        )
        first = max(0, rank - neighbors)
        names = await self.store.profiles([p for p, _ in rows])
        ranks = await self._ranks(spec, key, rows, first)
        codec = spec.codec
        around = [
            _entry(r, p, codec.points(s), names.get(p))
            for r, (p, s) in zip(ranks, rows, strict=True)
        ]
        mine = next(r for r, (p, _) in zip(ranks, rows, strict=True) if p == player_id)
        # One index holds the whole board today, so every rank is exact; estimates arrive
        # with sharded boards and will say exact=False.
        return PlayerRank(board, w.id, mine, True, codec.points(score), around)

    async def friends_page(self, board: str, player_id: str, window_id: str | None) -> Page:
        spec = self.board(board)
        w = self.window(spec, window_id)
        friends = await self.store.friends(player_id)
        ids = [player_id, *[f for f in friends if f != player_id]]
        found = await self.index.ranks(BoardKey(board, w.id), ids, descending=spec.order == "desc")
        present = sorted(
            (r, p, s) for p, hit in zip(ids, found, strict=True) if hit for r, s in [hit]
        )
        names = await self.store.profiles([p for _, p, _ in present])
        rows = [(p, s) for _, p, s in present]
        if spec.ties is Ties.SHARED:
            shared = await self._shared_ranks(BoardKey(board, w.id), spec, [s for _, s in rows])
            global_ranks = [shared[s] for _, s in rows]
        else:
            global_ranks = [r + 1 for r, _, _ in present]
        among = _ranks_in_order(spec, rows, 1)
        codec = spec.codec
        entries = [
            _entry(i, p, codec.points(s), names.get(p), global_rank=g)
            for i, g, (p, s) in zip(among, global_ranks, rows, strict=True)
        ]
        return Page(board, w.id, self.clock.now(), entries)

    async def _ranks(
        self, spec: BoardSpec, key: BoardKey, rows: list[tuple[str, int]], first: int
    ) -> list[int]:
        """Display ranks of consecutive rows starting at 0-based position ``first``: the
        position itself, or with shared ties one plus the number strictly ahead."""
        if spec.ties is Ties.FIRST or not rows:
            return list(range(first + 1, first + 1 + len(rows)))
        head = (await self._shared_ranks(key, spec, [rows[0][1]]))[rows[0][1]]
        return _ranks_in_order(spec, rows, first + 1, head)

    async def _shared_ranks(
        self, key: BoardKey, spec: BoardSpec, scores: list[int]
    ) -> dict[int, int]:
        """Shared rank of each score: one plus how many members are strictly ahead of it,
        from one histogram read of the index."""
        distinct = sorted(set(scores))
        out: dict[int, int] = {}
        ahead = 0
        if spec.order is Order.DESC:
            bounds = [s + 1 for s in distinct] + [SCORE_LIMIT]
            counts = await self.index.count_between(key, bounds)
            for s, n in zip(reversed(distinct), reversed(counts), strict=True):
                ahead += n
                out[s] = ahead + 1
        else:
            counts = await self.index.count_between(key, [-SCORE_LIMIT, *distinct])
            for s, n in zip(distinct, counts, strict=True):
                ahead += n
                out[s] = ahead + 1
        return out

    async def distribution(self, board: str, window_id: str | None, buckets: int) -> Distribution:
        """How many players hold how many points: equal-width point buckets from the lowest
        to the highest total on the board, counted from the index at one instant."""
        spec = self.board(board)
        w = self.window(spec, window_id)
        key = BoardKey(board, w.id)
        desc = spec.order == "desc"
        n = await self.index.count(key)
        if n == 0:
            return Distribution(board, w.id, self.clock.now(), 0, [])
        ends = await self.index.page(key, 0, 0, descending=desc)
        ends += await self.index.page(key, n - 1, n - 1, descending=desc)
        codec = spec.codec
        lo, hi = sorted(codec.points(s) for _, s in ends)
        width = max(1, -(-(hi - lo + 1) // buckets))  # ceiling division
        edges = [*range(lo, hi + 1, width), hi + 1]
        counts = await self.index.count_between(key, [codec.floor(p) for p in edges])
        out = [Bucket(a, b - 1, c) for a, b, c in zip(edges, edges[1:], counts, strict=False)]
        return Distribution(board, w.id, self.clock.now(), n, out)

    # -- players ----------------------------------------------------------------------

    async def set_profile(self, profile: Profile) -> None:
        self._check_player(profile.player_id)
        await self.store.set_profile(profile)

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None:
        self._check_player(player_id)
        if len(friends) > 1000:
            raise InvalidInput(f"at most 1000 friends, got {len(friends)}")
        for f in friends:
            self._check_player(f)
        await self.store.set_friends(player_id, sorted(set(friends) - {player_id}))

    def _check_player(self, player_id: str) -> None:
        if not ID_RE.match(player_id):
            raise InvalidInput(f"playerId {player_id!r} must match {ID_RE.pattern}")

    async def _ban_keys(self, player_id: str) -> list[BoardKey]:
        """Every board window the player has a tally on, plus every board's current window."""
        keys = {BoardKey(s.board, s.window) for s in await self.store.player_standings(player_id)}
        now = int(self.clock.now())
        for spec in self.settings.boards:
            w = spec.rule.window_at(now)
            if w is not None:
                keys.add(BoardKey(spec.name, w.id))
        return sorted(keys, key=lambda k: (k.board, k.window))

    async def ban(self, player_id: str, reason: str) -> None:
        """Store first (the updaters check it before every write), then the index, where
        the ban set refuses any change still in flight."""
        self._check_player(player_id)
        await self.store.ban(player_id, reason, self.clock.now())
        await self.index.ban(await self._ban_keys(player_id), player_id)
        self._pages.clear()

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
        self._pages.clear()
        return len(entries)

    async def rebuild_live(self) -> int:
        """Rebuild every window whose index key would still exist (start-up of the
        in-process index)."""
        now = self.clock.now()
        total = 0
        for spec in self.settings.boards:
            for window_id in await self.store.windows(spec.name):
                try:
                    w = spec.rule.parse(window_id)
                except WindowError:
                    continue  # a window of an older configuration of this board
                exp = index_expiry(w)
                if exp is None or exp > now:
                    total += await self.rebuild(spec.name, window_id)
        return total


def _ranks_in_order(
    spec: BoardSpec, rows: list[tuple[str, int]], position: int, head: int | None = None
) -> list[int]:
    """Ranks of rows already in board order, the first at 1-based ``position``: the
    position itself, or, with shared ties, the rank of the first row holding the same score
    (``head`` for the first row, which may tie with rows above it)."""
    out: list[int] = []
    for i, (_, score) in enumerate(rows):
        if spec.ties is Ties.SHARED and i and score == rows[i - 1][1]:
            out.append(out[-1])
        elif i == 0 and head is not None:
            out.append(head)
        else:
            out.append(position + i)
    return out


def _entry(
    rank: int, player_id: str, points: int, profile: Profile | None, global_rank: int | None = None
) -> Entry:
    return Entry(
        rank,
        player_id,
        points,
        profile.name if profile else None,
        profile.avatar if profile else None,
        global_rank,
    )
