"""Players looked up by id on one board window: a clan's, a party's, a list of rivals'.

Each player's rank on the whole board, points, whether the rank is exact, and profile, in
one call; the players not on the board are named as absent, not an error. On a live window
the places are the rank source's batched read (``RankSource.places``: one script on one
sorted set; on a split board one call per shard holding any of them, then one count per
shard for all of them at once), and the names one read of the index's copy of profiles:
a fixed number of round trips, whatever the number of ids. Ranks are exact where the rank
source counts them, and an estimate (below a split board's exact top) says so
(invariant 6 of docs/architecture.md). A frozen window is read from its final standings
(which keep the board's exact top: a player below it is absent there). A live window's
answer is labelled as the reads' are while the board is behind the store (``freshness.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from podium.domain.boards import Order, Ties, in_board_order
from podium.domain.validation import ID_IS, ID_RE
from podium.errors import InvalidInput
from podium.ports import BoardKey, Clock, ProfileCopy, RankSource
from podium.service.boards import Boards
from podium.service.lifecycle import Lifecycle
from podium.service.profiles import ProfileCache
from podium.service.reads.freshness import Freshness, label_of, labelled

MAX_IDS = 100


@dataclass(frozen=True, slots=True)
class Found:
    player_id: str
    rank: int
    points: int
    exact: bool
    name: str | None = None
    avatar: str | None = None


@dataclass(frozen=True, slots=True)
class Lookup:
    board: str
    window: str
    as_of: float
    players: list[Found]  # in board order
    absent: list[str]  # in the order asked


def parse_ids(text: str) -> list[str]:
    """``a,b,c``: 1 to ``MAX_IDS`` player ids, each as ids are written; a repeated one is
    looked up once."""
    ids = text.split(",")
    if len(ids) > MAX_IDS:
        raise InvalidInput(f"ids: at most {MAX_IDS} player ids, not {len(ids)}")
    for i in ids:
        if not ID_RE.fullmatch(i):
            raise InvalidInput(f"ids: {i!r} is not a player id ({ID_IS}), comma-separated")
    return list(dict.fromkeys(ids))


class Lookups:
    def __init__(
        self,
        boards: Boards,
        lifecycle: Lifecycle,
        ranks: RankSource,
        copy: ProfileCopy,
        profiles: ProfileCache,
        clock: Clock,
        freshness: Freshness | None = None,
    ) -> None:
        # The same board and window rules, rank source, names and label as the reads
        # (``reads.py``): a player looked up is where a page shows them, as of the same moment.
        self.boards = boards
        self.lifecycle = lifecycle  # a frozen window's final standings
        self.ranks = ranks
        self.copy = copy  # the index's copy of profiles, while it is complete
        self.profiles = profiles  # else the store's, through this process's cache
        self.clock = clock
        self.freshness = freshness  # how far the board is behind; None: never labelled

    async def players(
        self, board: str, ids: list[str], window_id: str | None, group: str | None = None
    ) -> Lookup:
        spec = self.boards.board(board)
        w = self.boards.window(spec, window_id, group)
        label = None  # final standings speak for themselves
        if await self.lifecycle.is_frozen(board, w.id):
            found = []
            for p in ids:  # the final standings: one keyed read a player
                e = await self.lifecycle.store.final_entry(board, w.id, p)
                if e is not None:
                    found.append((e.position, Found(p, e.rank, e.points, True)))
            found.sort(key=lambda f: f[0])
            rows = [f for _, f in found]
        else:
            key = BoardKey(board, w.id)
            label = await label_of(self.freshness)  # before the places: the board holds that
            places = await self.ranks.places(spec, key, ids)
            present = [(p, h.score, h.rank, h.exact) for p, h in zip(ids, places, strict=True) if h]
            # In board order by score (the one order), not by ranks: an estimate need not
            # agree with the order it estimates.
            present = in_board_order(present, spec.order is Order.DESC)
            if spec.ties is Ties.SHARED and present:
                shared = await self.ranks.shared_ranks(spec, key, [s for _, s, _, _ in present])
                ranks = [shared[s] for _, s, _, _ in present]
            else:
                ranks = [r + 1 for _, _, r, _ in present]
            codec = spec.codec
            rows = [
                Found(p, rank, codec.points(s), exact)
                for rank, (p, s, _, exact) in zip(ranks, present, strict=True)
            ]
        ids_found = [f.player_id for f in rows]
        held = await self.copy.profiles(ids_found) if rows else {}
        names = held if held is not None else await self.profiles.get(ids_found)
        out = []
        for f in rows:
            prof = names.get(f.player_id)
            if prof is not None:
                f = Found(f.player_id, f.rank, f.points, f.exact, prof.name, prof.avatar)
            out.append(f)
        on_board = {f.player_id for f in out}
        absent = [p for p in ids if p not in on_board]
        return Lookup(board, w.id, labelled(self.clock.now(), label), out, absent)
