"""The read use cases: pages, a player's rank with neighbors, friends, the distribution.

Live windows are read from the rank index; frozen ones from their final standings (through
``Lifecycle``). Ranks follow the board's tie rule: positions, or shared ranks counted from
one histogram read of the index.
"""

from __future__ import annotations

import asyncio
import itertools

from podium.config import Settings
from podium.domain.boards import Below, BoardSpec, Order, Ties, in_board_order
from podium.domain.codec import MAX_BITS
from podium.domain.models import Profile
from podium.domain.snapshot import Snapshot
from podium.domain.windows import GROUP_RE, Window, WindowError, grouped, split_group
from podium.errors import InvalidInput, NotFound
from podium.lifecycle import Lifecycle
from podium.ports import BoardKey, Clock, ProfileCopy, RankIndex, ScoreStore
from podium.profiles import ProfileCache
from podium.ranking import Estimated, Ranking
from podium.recording import UNKNOWN_GROUP
from podium.views import Bucket, Distribution, Entry, Page, PlayerRank, entry, ranks_in_order

SCORE_LIMIT = 1 << MAX_BITS  # above every score the codec can produce


class Reads:
    def __init__(
        self,
        settings: Settings,
        store: ScoreStore,
        index: RankIndex,
        copy: ProfileCopy,
        clock: Clock,
        lifecycle: Lifecycle,
        profiles: ProfileCache,
        ranking: Ranking | None = None,
    ) -> None:
        self.settings = settings
        # On a board split across index shards: the aggregator's snapshot (ranking.py).
        self.ranking = ranking if ranking is not None and ranking.active else None
        self.store = store
        self.index = index
        self.copy = copy
        self.clock = clock
        self.lifecycle = lifecycle
        self.profiles = profiles
        self.boards = {b.name: b for b in settings.boards}
        self._pages: dict[tuple[str, str, int, int], tuple[float, Page]] = {}
        self._refills: dict[tuple[str, str, int, int], asyncio.Future[Page]] = {}

    def board(self, name: str) -> BoardSpec:
        spec = self.boards.get(name)
        if spec is None:
            raise NotFound(f"no board named {name!r}")
        return spec

    def window(self, spec: BoardSpec, window_id: str | None, group: str | None = None) -> Window:
        """The window asked for (the current one by default), and on a board split into
        groups, that group's window: ``?window=2026-W44&group=FR`` or ``2026-W44@FR``."""
        base_id, suffix = split_group(window_id) if window_id else (None, None)
        if suffix is not None and group is not None and suffix != group:
            raise InvalidInput(f"window {window_id!r} and group {group!r} disagree")
        group = group or suffix
        if base_id is None:
            w = spec.rule.window_at(int(self.clock.now()))
            if w is None:
                raise NotFound(f"board {spec.name} has no open window yet")
        else:
            try:
                w = spec.rule.parse(base_id)
            except WindowError as e:
                raise InvalidInput(str(e)) from None
        if spec.group_by is None:
            if group is not None:
                raise InvalidInput(f"board {spec.name} is not split into groups")
            return w
        if group is None:
            raise InvalidInput(
                f"board {spec.name} is split by {spec.group_by}: name a group "
                "(?group=FR, or a window id like 2026-W44@FR)"
            )
        if not GROUP_RE.fullmatch(group):
            raise InvalidInput(f"group {group!r} must be a two-letter country code")
        return grouped(w, group)

    async def _home(self, spec: BoardSpec, player_id: str, group: str | None) -> str | None:
        """A player's group on a grouped board, when the caller did not name one."""
        if spec.group_by is None or group is not None:
            return group
        profile = (await self._names([player_id])).get(player_id)
        return (profile.country if profile else None) or UNKNOWN_GROUP

    async def page(
        self, board: str, window_id: str | None, offset: int, limit: int, group: str | None = None
    ) -> Page:
        spec = self.board(board)
        w = self.window(spec, window_id, group)
        if offset >= spec.exact_top:
            raise InvalidInput(
                f"offset {offset} is past the exact top ({spec.exact_top}) of board {board}; "
                "look a player up by id instead"
            )
        cache_key = (board, w.id, offset, limit)
        hit = self._pages.get(cache_key)
        if hit is not None and hit[0] > self.clock.now():
            return hit[1]
        # One refill per page at a time: when an entry expires under load, every request
        # that misses it waits for the same refill instead of each making its own (at 64
        # readers the page p99 was 0.2-0.4 s against a p50 of 0.5 ms, BENCHMARKS.md).
        refill = self._refills.get(cache_key)
        if refill is None:
            refill = asyncio.ensure_future(self._refill(spec, w, offset, limit))
            self._refills[cache_key] = refill
            refill.add_done_callback(lambda done: self._refilled(cache_key, done))
        # Shielded: a reader that goes away must not cancel the refill the others wait for.
        return await asyncio.shield(refill)

    async def _refill(self, spec: BoardSpec, w: Window, offset: int, limit: int) -> Page:
        now = self.clock.now()
        stop = min(offset + limit, spec.exact_top) - 1
        if await self.lifecycle.is_frozen(spec.name, w.id):
            return await self.lifecycle.final_page(spec, w, offset, stop)
        key = BoardKey(spec.name, w.id)
        sliced = None if self.ranking is None else await self.ranking.page(key, offset, stop)
        if sliced is not None:  # a split board: a slice of the aggregator's merged top
            rows, now = sliced
        else:
            rows = await self.index.page(key, offset, stop, descending=spec.order == "desc")
        return Page(spec.name, w.id, now, await self._entries(spec, key, rows, offset))

    def _refilled(self, cache_key: tuple[str, str, int, int], done: asyncio.Future[Page]) -> None:
        if self._refills.get(cache_key) is not done:
            return  # the cache was cleared meanwhile: this page is not to be kept
        del self._refills[cache_key]
        if not done.cancelled() and done.exception() is None:
            self._remember(cache_key, self.clock.now(), done.result())

    async def _names(
        self, player_ids: list[str], held: dict[str, Profile] | None = None, ask: bool = True
    ) -> dict[str, Profile]:
        """Profiles for entries: those the index read along with the rows (``held``), else
        the index's copy (with ``ask``), else, while that copy is not complete, the store's
        through the cache."""
        if held is None and ask:
            held = await self.copy.profiles(player_ids)
        return held if held is not None else await self.profiles.get(player_ids)

    async def _entries(
        self,
        spec: BoardSpec,
        key: BoardKey,
        rows: list[tuple[str, int]],
        first: int,
        names: dict[str, Profile] | None = None,
    ) -> list[Entry]:
        """Index rows from 0-based position ``first`` as entries: ranks, points, names."""
        if names is None:
            names = await self._names([p for p, _ in rows])
        ranks = await self._ranks(spec, key, rows, first)
        codec = spec.codec
        return [
            entry(r, p, codec.points(s), names.get(p))
            for r, (p, s) in zip(ranks, rows, strict=True)
        ]

    def _remember(self, cache_key: tuple[str, str, int, int], now: float, page: Page) -> None:
        if len(self._pages) > 10_000:  # bounded: one entry per (board, window, page) asked for
            self._pages.clear()
        self._pages[cache_key] = (now + self.settings.server.page_cache_s, page)

    def clear_cache(self, changed_at: float | None = None) -> None:
        """Read everything again; ``changed_at``: the index changed then (a ban, a rebuild),
        so a split board's snapshots made before it are passed over too (``Ranking.forget``)."""
        self._pages.clear()
        self._refills.clear()
        if self.ranking is not None:
            self.ranking.forget(changed_at)

    async def player_rank(
        self,
        board: str,
        player_id: str,
        neighbors: int,
        window_id: str | None,
        group: str | None = None,
    ) -> PlayerRank:
        spec = self.board(board)
        w = self.window(spec, window_id, await self._home(spec, player_id, group))
        if await self.lifecycle.is_frozen(board, w.id):
            return await self.lifecycle.final_rank(spec, w, player_id, neighbors)
        key = BoardKey(board, w.id)
        if self.ranking is not None:
            # In the exact top of a split board: its rank and neighbors, exact as of the
            # aggregator's snapshot, with no shard asked (every shard would be: near()).
            top = await self.ranking.inside(key, player_id, neighbors)
            if top is not None:
                at, rows, as_of = top
                first = max(0, at - neighbors)
                around = await self._entries(spec, key, rows, first)
                mine = around[at - first]
                return PlayerRank(board, w.id, mine.rank, True, mine.points, around, as_of=as_of)
            # Below the exact top of a split board: an estimate, labelled, without neighbors.
            est = await self.ranking.estimated(spec, key, player_id)
            if est is not None:
                return self._estimated_rank(spec, w.id, est)
        # Rank and rows come from one read at one instant, so the player's own row is always
        # among the rows, and their displayed rank (a shared one, too) is that row's.
        found = await self.index.around(key, player_id, neighbors, descending=spec.order == "desc")
        if found is None:
            raise NotFound(f"player {player_id} is not on board {board} ({w.id})")
        first = max(0, found.rank - neighbors)
        # The names came with the rows when the index's copy is complete: one round trip.
        names = await self._names([p for p, _ in found.rows], found.profiles, ask=False)
        around = await self._entries(spec, key, found.rows, first, names)
        mine = around[found.rank - first]  # the player's own row: their rank and points
        # The index says whether the rank is exact: below the exact top of a board split
        # across shards it may be an estimate, and then says so (invariant 6 of
        # docs/architecture.md).
        return PlayerRank(board, w.id, mine.rank, found.exact, mine.points, around)

    def _estimated_rank(self, spec: BoardSpec, window: str, est: Estimated) -> PlayerRank:
        e = est.estimate
        points = spec.codec.points(est.score)
        return PlayerRank(
            spec.name,
            window,
            e.rank,
            False,
            points,
            [],
            top_percent=est.top_percent,
            rank_low=e.low,
            rank_high=e.high,
            as_of=est.as_of,
        )

    async def _global_places(
        self, spec: BoardSpec, key: BoardKey, ids: list[str]
    ) -> list[tuple[str, int, int, bool]]:
        """Each player on the board, in board order, with their 0-based place on the whole
        board and whether it is exact: by the aggregator's snapshot on a split board that
        estimates (exact inside its top, estimated below), else counted by the index."""
        desc = spec.order == "desc"
        placed = None
        if self.ranking is not None and spec.ties is Ties.FIRST:
            placed = await self.ranking.placed(spec, key, ids)
        if placed is None:
            found = await self.index.ranks(key, ids, descending=desc)
            rows = [(p, h.score, h.rank, h.exact) for p, h in zip(ids, found, strict=True) if h]
        else:
            scores, places = placed
            rows = []
            for p, s, place in zip(ids, scores, places, strict=True):
                if s is None or place is None:
                    continue
                if isinstance(place, Estimated):
                    rows.append((p, s, place.estimate.rank - 1, False))
                else:
                    rows.append((p, s, place, True))
        # In board order by score (the one order), not by the ranks: an estimated rank need
        # not agree with the order it estimates.
        return in_board_order(rows, desc)

    async def friends_page(
        self, board: str, player_id: str, window_id: str | None, group: str | None = None
    ) -> Page:
        spec = self.board(board)
        w = self.window(spec, window_id, await self._home(spec, player_id, group))
        friends = await self.store.friends(player_id)
        ids = [player_id, *[f for f in friends if f != player_id]]
        if await self.lifecycle.is_frozen(board, w.id):
            return await self.lifecycle.final_friends(spec, w, ids)
        present = await self._global_places(spec, BoardKey(board, w.id), ids)
        rows = [(p, s) for p, s, _, _ in present]
        names = await self._names([p for p, _ in rows])
        if spec.ties is Ties.SHARED:
            shared = await self._shared_ranks(BoardKey(board, w.id), spec, [s for _, s in rows])
            global_ranks = [shared[s] for _, s in rows]
        else:
            global_ranks = [rank + 1 for _, _, rank, _ in present]
        among = ranks_in_order(spec, rows, 1)
        codec = spec.codec
        entries = [
            entry(i, p, codec.points(s), names.get(p), g, exact)
            for i, g, (p, s, _, exact) in zip(among, global_ranks, present, strict=True)
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
        return ranks_in_order(spec, rows, first + 1, head)

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

    async def distribution(
        self, board: str, window_id: str | None, buckets: int, group: str | None = None
    ) -> Distribution:
        """How many players hold how many points: equal-width point buckets from the lowest
        to the highest total on the board, counted from the index at one instant."""
        spec = self.board(board)
        w = self.window(spec, window_id, group)
        key = BoardKey(board, w.id)
        if self.ranking is not None and spec.ranks_below_top is Below.ESTIMATED:
            snap = await self.ranking.snapshot(key)
            if snap is not None and snap.histogram is not None and not snap.whole:
                return self._estimated_distribution(spec, w.id, snap, buckets)
        desc = spec.order == "desc"
        n = await self.index.count(key)
        if n == 0:
            return Distribution(board, w.id, self.clock.now(), 0, [])
        ends = await self.index.page(key, 0, 0, descending=desc)
        # The last row as the first of the other order: on a split board, a page at rank
        # n - 1 would make every shard send all its rows to be merged.
        ends += await self.index.page(key, 0, 0, descending=not desc)
        codec = spec.codec
        lo, hi = sorted(codec.points(s) for _, s in ends)
        edges = _point_edges(lo, hi, buckets)
        counts = await self.index.count_between(key, [codec.floor(p) for p in edges])
        out = [Bucket(a, b - 1, c) for a, b, c in zip(edges, edges[1:], counts, strict=False)]
        return Distribution(board, w.id, self.clock.now(), n, out)

    def _estimated_distribution(
        self, spec: BoardSpec, window: str, snap: Snapshot, buckets: int
    ) -> Distribution:
        """The same buckets from the aggregator's snapshot of a split board, without asking
        the shards: counted in its exact top, estimated from its histogram below it (so
        ``exact`` is False), as of its ``asOf``."""
        assert self.ranking is not None and snap.last is not None and snap.top
        codec = spec.codec
        lo, hi = sorted((codec.points(snap.top[0][1]), codec.points(snap.last)))
        edges = _point_edges(lo, hi, buckets)
        at_least = [self.ranking.at_least(spec, snap, codec.floor(p)) for p in edges]
        at_least[0], at_least[-1] = snap.total, 0  # every member is within [lo, hi]
        for i in range(1, len(at_least)):  # estimates never let a count go negative
            at_least[i] = min(at_least[i], at_least[i - 1])
        out = [
            Bucket(a, b - 1, at_least[i] - at_least[i + 1])
            for i, (a, b) in enumerate(itertools.pairwise(edges))
        ]
        return Distribution(spec.name, window, snap.as_of, snap.total, out, exact=False)


def _point_edges(lo: int, hi: int, buckets: int) -> list[int]:
    """Edges of at most ``buckets`` equal-width point buckets covering ``lo..hi``."""
    width = max(1, -(-(hi - lo + 1) // buckets))  # ceiling division
    return [*range(lo, hi + 1, width), hi + 1]
