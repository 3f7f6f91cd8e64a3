"""The read use cases: pages, a player's rank with neighbors, friends, the distribution.

Live windows are ranked by the rank source bootstrap picked (``ports.index.RankSource``:
counted on the index, or a split board's aggregator snapshot with estimates below its exact
top), never by asking which it is; frozen ones from their final standings (through
``Lifecycle``). Ranks follow the board's tie rule: positions, or shared ranks counted from
one histogram read of the index.
"""

from __future__ import annotations

from dataclasses import replace

from podium import metrics
from podium.config.settings import Settings
from podium.domain.boards import BoardSpec, Ties, in_board_order
from podium.domain.cursor import Cursor
from podium.domain.models import Profile
from podium.domain.recording import UNKNOWN_GROUP
from podium.domain.windows import Window
from podium.errors import IndexUnavailable, InvalidInput, NotFound
from podium.ports import (
    BoardKey,
    Clock,
    EntryMetadata,
    Estimated,
    Players,
    ProfileCopy,
    RankSource,
)
from podium.service.boards import Boards
from podium.service.lifecycle import Lifecycle
from podium.service.profiles import ProfileCache
from podium.service.reads.freshness import Freshness, label_of, labelled
from podium.service.reads.paging import links, read_cursor, uneven
from podium.service.views import (
    Bucket,
    Distribution,
    Entry,
    Page,
    PlayerRank,
    entry,
    ranks_in_order,
)
from podium.util.caching import Cache

# Pages one process holds, one per (board, window, offset, limit) asked for: the offset and
# the limit are the client's, so without a bound a client walking every pair would grow it
# without end, while the pages players look at within ``page_cache_s`` (the first few of
# each live board window) are far fewer; past it the one written longest ago is read again.
PAGES_HELD = 10_000
# While the index cannot be read (Redis down, a cluster shard down, its copy being rebuilt),
# a page of a live window is answered from the last one this process read, with that
# read's true asOf, if it is at most this old: the top page may be stale, a player's own
# rank may not (a rank read that cannot be answered is a 503, never an old rank). Long
# enough to cover a Redis restarted and its boards rebuilt from the store (a 10-million
# member board took minutes), short enough that nobody takes it for the board of now.
LAST_PAGE_S = 600.0
# Last pages held for that, one per (board, window, offset, limit): held minutes rather than
# a second, so bounded lower than PAGES_HELD (a client walking offsets would otherwise keep
# thousands); the first pages of every live board window fit.
LAST_PAGES_HELD = 1_000


class Reads:
    def __init__(
        self,
        settings: Settings,
        boards: Boards,
        players: Players,
        ranks: RankSource,
        copy: ProfileCopy,
        clock: Clock,
        lifecycle: Lifecycle,
        profiles: ProfileCache,
        metadata: EntryMetadata | None = None,
        freshness: Freshness | None = None,
    ) -> None:
        self.settings = settings
        # How far the board is behind the store (board marks): an exact answer from the
        # live board past the bound carries the watermark as its asOf. None: never labelled.
        self.freshness = freshness
        self.boards = boards  # the board and the window a read names
        self.players = players
        # Counted on the index, or on a board split across shards the aggregator's snapshot
        # (counted.py, service/ranks/snapshot.py): bootstrap picks.
        self.ranks = ranks
        self.copy = copy
        self.clock = clock
        self.lifecycle = lifecycle
        self.profiles = profiles
        self.metadata = metadata  # the index's entry metadata; None: entries show none
        # One refill per page at a time: when an entry expires under load, every request
        # that misses it waits for the same refill instead of each making its own (at 64
        # readers the page p99 was 0.2-0.4 s against a p50 of 0.5 ms, BENCHMARKS.md).
        self._pages: Cache[tuple[str, str, int, int, bytes | None], Page] = Cache(
            PAGES_HELD, settings.server.page_cache_s, clock.now
        )
        # Pages resumed from a cursor, by (board, window, cursor, limit): everyone who read
        # the same page a moment ago asks for the same next one.
        self._resumed: Cache[tuple[str, str, str, int], Page] = Cache(
            PAGES_HELD, settings.server.page_cache_s, clock.now
        )
        # The last live page read from the index, by (board, window, offset, limit): what a page
        # says while the index is out (``LAST_PAGE_S``).
        self._last: Cache[tuple[str, str, int, int], Page] = Cache(
            LAST_PAGES_HELD, LAST_PAGE_S, clock.now
        )

    async def _home(self, spec: BoardSpec, player_id: str, group: str | None) -> str | None:
        """A player's group on a grouped board, when the caller did not name one."""
        if spec.group_by is None or group is not None:
            return group
        profile = (await self._names([player_id])).get(player_id)
        return (profile.country if profile else None) or UNKNOWN_GROUP

    async def page(
        self,
        board: str,
        window_id: str | None,
        offset: int,
        limit: int,
        group: str | None = None,
        cursor: str | None = None,
    ) -> Page:
        spec = self.boards.board(board)
        w = self.boards.window(spec, window_id, group)
        if cursor is not None:
            at = read_cursor(cursor, spec, w, window_id is not None, self.clock.now())
            if offset:
                raise InvalidInput("give a cursor or an offset, not both: a cursor says where")
            return await self._resumed.get_or_load(
                (board, w.id, cursor, limit), lambda: self._resume(spec, w, at, limit)
            )
        if offset >= spec.exact_top:
            raise InvalidInput(
                f"offset {offset} is past the exact top ({spec.exact_top}) of board {board}; "
                "look a player up by id instead"
            )
        # One row more than asked, in the same read, says whether there is a next page.
        stop = min(offset + limit + 1, spec.exact_top) - 1
        # Held for page_cache_s, and on a split board only while what it was read from is
        # the newest: the aggregator's snapshot (its stamp), or for the first rows, counted
        # on the shards, a fraction of a second (issue 34: a new score on the page within a
        # second); each snapshot is sliced once per page.
        version = await self.ranks.version(BoardKey(board, w.id), stop)
        return await self._pages.get_or_load(
            (board, w.id, offset, limit, version),
            lambda: self._refill(spec, w, offset, limit, stop),
        )

    async def _refill(self, spec: BoardSpec, w: Window, offset: int, limit: int, stop: int) -> Page:
        if await self.lifecycle.is_frozen(spec.name, w.id):
            return _paged(
                spec, await self.lifecycle.final_page(spec, w, offset, stop), offset, limit
            )
        key = BoardKey(spec.name, w.id)
        last_key = (spec.name, w.id, offset, limit)
        try:
            label = await label_of(self.freshness)  # before the read: the board holds that
            top = await self.ranks.top(spec, key, offset, stop)
            as_of = labelled(top.as_of, label)
            page = await self._paged_live(spec, key, top.rows, offset, limit, as_of)
        except IndexUnavailable:
            last = self._last.get(last_key)
            if last is None:
                raise
            metrics.PAGES_FROM_LAST_READ.inc()
            return last  # as of when it was read: its asOf says so
        self._last.put(last_key, page)
        return page

    async def _resume(self, spec: BoardSpec, w: Window, at: Cursor, limit: int) -> Page:
        """The page beside a cursor's place: live, by the place in board order; on a frozen
        window's final standings, which never move, by the position."""
        if await self.lifecycle.is_frozen(spec.name, w.id):
            pos = at.rank
            if not at.final:  # issued live, and the window froze since: its final place
                mine = await self.lifecycle.store.final_entry(spec.name, w.id, at.member)
                pos = pos if mine is None else mine.position - 1
            first = max(0, pos - limit) if at.before else pos + 1
            stop = min(pos - 1 if at.before else pos + limit + 1, spec.exact_top - 1)
            if first > stop:
                return Page(spec.name, w.id, self.clock.now(), [])
            page = await self.lifecycle.final_page(spec, w, first, stop)
            return _paged(spec, page, first, limit, at.before)
        key = BoardKey(spec.name, w.id)
        label = await label_of(self.freshness)
        got = await self.ranks.page_from(spec, key, at.at, limit + (not at.before), at.before)
        as_of = labelled(got.as_of, label)
        return await self._paged_live(spec, key, got.rows, got.first, limit, as_of, at.before)

    async def _paged_live(
        self,
        spec: BoardSpec,
        key: BoardKey,
        rows: list[tuple[str, int]],
        first: int,
        limit: int,
        as_of: float,
        before: bool = False,
    ) -> Page:
        """Rows from 0-based rank ``first`` (and maybe one more, read to tell whether there
        is a next page) as a page inside the exact top, with its cursors; ``before``: the
        rows ahead of a cursor, so the cursor's own place is behind them."""
        rows = rows[: max(0, spec.exact_top - first)]
        more = before or len(rows) > limit
        rows = rows[:limit]
        entries = await self._entries(spec, key, rows, first)
        scored = [(e, s) for e, (_, s) in zip(entries, rows, strict=True)]
        nxt, prev = links(spec, key.window, first, scored, more)
        return Page(spec.name, key.window, as_of, entries, nxt, prev)

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
        meta: dict[str, str] | None = None,
    ) -> list[Entry]:
        """Index rows from 0-based position ``first`` as entries: ranks, points, names and
        metadata (``meta``: read with the rows; else asked for here)."""
        ids = [p for p, _ in rows]
        if names is None:
            names = await self._names(ids)
        if meta is None:
            meta = await self._meta(key, ids)
        ranks = await self._ranks(spec, key, rows, first)
        codec = spec.codec
        return [
            entry(r, p, codec.points(s), names.get(p), metadata=meta.get(p))
            for r, (p, s) in zip(ranks, rows, strict=True)
        ]

    async def _meta(self, key: BoardKey, player_ids: list[str]) -> dict[str, str]:
        if self.metadata is None or not player_ids:
            return {}
        return await self.metadata.entry_metadata(key, player_ids)

    def clear_cache(self, changed_at: float | None = None) -> None:
        """Read everything again; ``changed_at``: the index changed then (a ban, a rebuild),
        so a split board's snapshots made before it are passed over too (``RankSource.forget``)."""
        self._pages.clear()
        self._resumed.clear()
        self._last.clear()  # a ban or a rebuild: no page from before it is told again
        self.ranks.forget(changed_at)

    async def player_rank(
        self,
        board: str,
        player_id: str,
        neighbors: int,
        window_id: str | None,
        group: str | None = None,
        above: int | None = None,
        below: int | None = None,
    ) -> PlayerRank:
        """The player's rank and ``neighbors`` rows on each side; ``above`` and ``below``,
        where given, set one side each instead (Steam's -n..+m)."""
        up = neighbors if above is None else above
        down = neighbors if below is None else below
        found = await self._player_rank(board, player_id, max(up, down), window_id, group)
        if up == down:
            return found
        return replace(found, neighbors=uneven(found.neighbors, player_id, up, down))

    async def _player_rank(
        self,
        board: str,
        player_id: str,
        neighbors: int,
        window_id: str | None,
        group: str | None = None,
    ) -> PlayerRank:
        spec = self.boards.board(board)
        w = self.boards.window(spec, window_id, await self._home(spec, player_id, group))
        if await self.lifecycle.is_frozen(board, w.id):
            return await self.lifecycle.final_rank(spec, w, player_id, neighbors)
        key = BoardKey(board, w.id)
        label = await label_of(self.freshness)
        found = await self.ranks.around(spec, key, player_id, neighbors)
        if found is None:
            raise NotFound(f"player {player_id} is not on board {board} ({w.id})")
        if isinstance(found, Estimated):  # below the exact top: labelled, without neighbors
            return self._estimated_rank(spec, w.id, found)
        first = max(0, found.rank - neighbors)
        # The names came with the rows when the index's copy is complete: one round trip.
        names = await self._names([p for p, _ in found.rows], found.profiles, ask=False)
        around = await self._entries(spec, key, found.rows, first, names, found.metadata)
        mine = around[found.rank - first]  # the player's own row: their rank and points
        # The rank source says whether the rank is exact: below the exact top of a board
        # split across shards it may be an estimate, and then says so (invariant 6 of
        # docs/architecture.md). No asOf of its own: it speaks for now, unless labelled.
        as_of = label if found.as_of is None else labelled(found.as_of, label)
        return PlayerRank(board, w.id, mine.rank, found.exact, mine.points, around, as_of=as_of)

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
        board and whether it is exact, as the rank source places them."""
        found = await self.ranks.places(spec, key, ids)
        rows = [(p, h.score, h.rank, h.exact) for p, h in zip(ids, found, strict=True) if h]
        # In board order by score (the one order), not by the ranks: an estimated rank need
        # not agree with the order it estimates.
        return in_board_order(rows, spec.order == "desc")

    async def friends_page(
        self, board: str, player_id: str, window_id: str | None, group: str | None = None
    ) -> Page:
        spec = self.boards.board(board)
        w = self.boards.window(spec, window_id, await self._home(spec, player_id, group))
        friends = await self.players.friends(player_id)
        ids = [player_id, *[f for f in friends if f != player_id]]
        if await self.lifecycle.is_frozen(board, w.id):
            return _known(await self.lifecycle.final_friends(spec, w, ids), player_id, friends)
        label = await label_of(self.freshness)
        present = await self._global_places(spec, BoardKey(board, w.id), ids)
        rows = [(p, s) for p, s, _, _ in present]
        names = await self._names([p for p, _ in rows])
        meta = await self._meta(BoardKey(board, w.id), [p for p, _ in rows])
        if spec.ties is Ties.SHARED:
            shared = await self.ranks.shared_ranks(
                spec, BoardKey(board, w.id), [s for _, s in rows]
            )
            global_ranks = [shared[s] for _, s in rows]
        else:
            global_ranks = [rank + 1 for _, _, rank, _ in present]
        among = ranks_in_order(spec, rows, 1)
        codec = spec.codec
        entries = [
            entry(i, p, codec.points(s), names.get(p), g, exact, meta.get(p))
            for i, g, (p, s, _, exact) in zip(among, global_ranks, present, strict=True)
        ]
        as_of = labelled(self.clock.now(), label)
        return _known(Page(board, w.id, as_of, entries), player_id, friends)

    async def _ranks(
        self, spec: BoardSpec, key: BoardKey, rows: list[tuple[str, int]], first: int
    ) -> list[int]:
        """Display ranks of consecutive rows starting at 0-based position ``first``: the
        position itself, or with shared ties one plus the number strictly ahead."""
        if spec.ties is Ties.FIRST or not rows:
            return list(range(first + 1, first + 1 + len(rows)))
        head = (await self.ranks.shared_ranks(spec, key, [rows[0][1]]))[rows[0][1]]
        return ranks_in_order(spec, rows, first + 1, head)

    async def distribution(
        self, board: str, window_id: str | None, buckets: int, group: str | None = None
    ) -> Distribution:
        """How many players hold how many points: equal-width point buckets from the lowest
        to the highest total on the board, as the rank source counts (or estimates) them."""
        spec = self.boards.board(board)
        w = self.boards.window(spec, window_id, group)
        # Read from the board whatever the window (a frozen one's key too), so labelled as
        # every board read; estimated buckets too: unlike an estimated rank they have no
        # interval that speaks for the answer's moment.
        label = await label_of(self.freshness)
        spread = await self.ranks.spread(spec, BoardKey(board, w.id), buckets)
        out = [Bucket(low, high, n) for low, high, n in spread.buckets]
        as_of = labelled(spread.as_of, label)
        return Distribution(board, w.id, as_of, spread.players, out, exact=spread.exact)


def _paged(spec: BoardSpec, page: Page, first: int, limit: int, before: bool = False) -> Page:
    """A page of final standings from 0-based position ``first`` (and maybe one more row,
    read to tell whether there is a next page), with its cursors, which page the final
    standings by position: they never move."""
    entries = page.entries[:limit]
    codec = spec.codec
    scored = [(e, codec.floor(e.points)) for e in entries]
    more = before or len(page.entries) > limit
    nxt, prev = links(spec, page.window, first, scored, more, final=True)
    return Page(page.board, page.window, page.as_of, entries, nxt, prev)


def _known(page: Page, player_id: str, friends: list[str]) -> Page:
    """A friends board of a player with no total in the window and no friends listed is a
    404, as that player's rank is: an empty 200 would say they are there with no one around.
    A player with friends and no total of their own yet still sees the friends (what a new
    player opens first)."""
    if not page.entries and not friends:
        raise NotFound(
            f"player {player_id} is not on board {page.board} ({page.window}) and lists no friends"
        )
    return page
