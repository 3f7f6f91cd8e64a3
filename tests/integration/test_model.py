"""Both configurations held against a plain Python model of a board (docs/architecture.md §5).

Hypothesis draws random matches, retries, conflicting retries, bans and unbans; the change
log is made hostile (shuffled, split at random, with old changes replayed, also after a
ban); then every page, every rank and every stored total must match the model, which knows
nothing of score packing: just points, the time they were reached, and player ids.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium import bootstrap
from podium.config.settings import Settings
from podium.domain.boards import in_board_order
from podium.domain.models import ApiKey, Message, PlayerResult, Target
from podium.errors import Conflict
from podium.ports import BoardKey
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL, need
from tests.integration.conftest import settings_for

DAY = 86_400
# Days ahead of the real clock: Redis expires keys by its own clock, a week after the window.
BASE = (int(time.time()) // DAY + 400) * DAY
PLAYERS = ["a", "b", "B", "c", "a1"]  # byte order matters on ties: "B" < "a" < "a1" < "b" < "c"
MODES = [
    {"name": "default", "min_points": 0, "max_points": 4},
    {"name": "duel", "min_points": -4, "max_points": 4},  # totals fed by it can fall
]
# Every aggregate x order x ties; each is fed by both modes, so the sums among them can fall
# and are written by version. Two more sums take only the rising mode and use ZADD GT.
BOARDS = [
    {
        "name": f"{agg}-{order}-{ties}",
        "window": "day",
        "aggregate": agg,
        "order": order,
        "ties": ties,
    }
    for agg in ("sum", "best", "last")
    for order in ("desc", "asc")
    for ties in ("first", "shared")
] + [
    {
        "name": f"gt-{ties}",
        "window": "day",
        "aggregate": "sum",
        "order": "desc",
        "ties": ties,
        "modes": ["default"],
    }
    for ties in ("first", "shared")
]


class FixedClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


class ChaosLog:
    """A change log that delivers at least once, and badly: out of order, in random splits,
    with changes it already delivered sent again."""

    def __init__(self, inner: Any, rng: random.Random) -> None:
        self.inner = inner
        self.rng = rng
        self.seen: list[Message] = []

    @property
    def partitions(self) -> int:
        return 1

    async def relay(self, limit: int) -> int:
        return 0

    async def ping(self) -> None:
        return None

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        fresh: list[Message] = await self.inner.fetch(self.rng.randint(1, 7), partition)
        replays = self.rng.sample(self.seen, min(len(self.seen), self.rng.randint(0, 3)))
        self.seen += fresh
        batch = fresh + replays
        self.rng.shuffle(batch)
        return batch

    async def ack(self, changes: Sequence[Message]) -> None:
        await self.inner.ack([c for c in changes if c in self.seen])

    async def in_progress(self, changes: Sequence[Message]) -> None:
        await self.inner.in_progress([c for c in changes if c in self.seen])

    async def nak(self, changes: Sequence[Message]) -> None:
        await self.inner.nak([c for c in changes if c in self.seen])

    async def settled(self, changes: Sequence[Message]) -> list[bool]:
        return await self.inner.settled(changes)

    async def close(self) -> None:
        return None


@dataclass
class Model:
    players: list[str]
    # (player, match) -> (mode, points, ended_at)
    results: dict[tuple[str, str], tuple[str, int, int]] = field(default_factory=dict)
    banned: set[str] = field(default_factory=set)

    def tally(self, board: dict[str, Any], player: str) -> tuple[int, int] | None:
        """(points, when they were reached), computed the plain way from every result."""
        modes = board.get("modes")
        mine = [
            (pts, t)
            for (p, _), (mode, pts, t) in self.results.items()
            if p == player and (modes is None or mode in modes)
        ]
        if not mine:
            return None
        if board["aggregate"] == "sum":
            raised = [t for pts, t in mine if pts > 0]
            return sum(pts for pts, _ in mine), max(raised) if raised else min(t for _, t in mine)
        if board["aggregate"] == "last":
            t, pts = max((t, pts) for pts, t in mine)
            return pts, t
        best = (max if board["order"] == "desc" else min)(pts for pts, _ in mine)
        return best, min(t for pts, t in mine if pts == best)

    def board(self, board: dict[str, Any]) -> list[tuple[int, str, int]]:
        """(rank, player, points) in board order."""
        rows = [(p, self.tally(board, p)) for p in self.players if p not in self.banned]
        present = [(p, t) for p, t in rows if t is not None]
        desc = board["order"] == "desc"
        first = board["ties"] == "first"

        # Invariant 4 of docs/architecture.md: points; then who got there first (unless ranks
        # are shared); then Redis member order: the one order (``in_board_order``) of a score
        # that packs the points and the time the plain way (§2 there), with room to spare.
        def score(pts: int, t: int) -> int:
            if not first:
                return pts
            return pts * 2**32 + (2**32 - 1 - t if desc else t)

        present = [
            (p, t) for p, _, t in in_board_order([(p, score(*t), t) for p, t in present], desc)
        ]
        out = []
        for i, (p, (pts, _)) in enumerate(present):
            if first:
                rank = i + 1
            else:  # shared: one plus how many hold strictly better points
                rank = 1 + sum(1 for _, (q, _) in present if (q > pts if desc else q < pts))
            out.append((rank, p, pts))
        return out


match_st = st.tuples(
    st.lists(st.sampled_from(PLAYERS), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(-4, 4), min_size=4, max_size=4),  # small points: many ties
    st.integers(0, 3),  # few distinct seconds: ties on time too
    st.sampled_from(["default", "duel"]),
)
op_st = st.one_of(
    st.tuples(st.just("match"), match_st),
    st.tuples(st.just("retry"), st.integers(0, 50)),
    st.tuples(st.just("conflict"), st.integers(0, 50)),
    st.tuples(st.just("ban"), st.sampled_from(PLAYERS)),
    st.tuples(st.just("unban"), st.sampled_from(PLAYERS)),
)


def _rename(arg: Any, names: dict[str, str]) -> Any:
    if isinstance(arg, str):
        return names[arg]
    if isinstance(arg, tuple):
        return ([names[p] for p in arg[0]], *arg[1:])
    return arg


def _settings(kind: str, tmp: str, pg: str | None, prefix: str | None) -> Settings:
    return settings_for(
        kind,
        f"sqlite:///{tmp}/model.db",
        pg,
        prefix,
        boards=BOARDS,
        modes=MODES,
        server={"page_cache_s": 0},
    )


@pytest.mark.parametrize("kind", ["embedded", "production"])
def test_backends_match_the_model(kind: str, tmp_path: Any, request: pytest.FixtureRequest) -> None:
    pg = prefix = None
    if kind == "production":
        need(REDIS_URL, "Redis")
        pg = request.getfixturevalue("postgres_url")
        prefix = request.getfixturevalue("redis_prefix")
    counter = iter(range(10_000))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(ops=st.lists(op_st, min_size=1, max_size=25), seed=st.integers(0, 2**32))
    def run(ops: list[Any], seed: int) -> None:
        # Each example plays on a day of its own with players of its own (bans are global),
        # so examples never see each other's boards; one shared prefix keeps the byte order.
        n = next(counter)
        day = BASE + n * DAY
        players = {p: f"x{n:04d}{p}" for p in PLAYERS}
        named = [(op, _rename(arg, players)) for op, arg in ops]
        asyncio.run(
            _play(
                _settings(kind, str(tmp_path), pg, prefix),
                day,
                named,
                random.Random(seed),
                list(players.values()),
            )
        )

    run()


async def _play(
    s: Settings, day: int, ops: list[Any], rng: random.Random, players: list[str]
) -> None:
    clock = FixedClock(day + DAY - 1)
    b = bootstrap.build(s, clock)
    await b.start()
    model = Model(players)
    key = ApiKey("gs", "gs", "h", ("default", "duel"))
    log = ChaosLog(b.log, rng)
    updater = Updater(s, b.store, b.index, b.copy, log, clock)
    sent: list[tuple[str, str, list[PlayerResult], int]] = []
    try:
        for n, (op, arg) in enumerate(ops):
            if op == "match":
                who, points, t, mode = arg
                pts = [p if mode == "duel" else abs(p) for p in points]
                results = [PlayerResult(p, pts[i]) for i, p in enumerate(who)]
                sent.append((f"d{day}m{n}", mode, results, day + t * 60))
            if op in ("match", "retry", "conflict") and sent:
                match_id, mode, results, ended = (
                    sent[-1] if op == "match" else sent[arg % len(sent)]
                )
                if op == "conflict":
                    first = results[0]
                    other = [PlayerResult(first.player_id, 3 if first.points != 3 else 2)]
                    with pytest.raises(Conflict):
                        await b.podium.matches.record(key, match_id, mode, ended, 60, other)
                    continue
                await b.podium.matches.record(key, match_id, mode, ended, 60, results)
                for r in results:
                    model.results[(r.player_id, match_id)] = (mode, r.points, ended)
            elif op == "ban":
                await b.podium.player_admin.ban(arg, "model")
                model.banned.add(arg)
            elif op == "unban" and arg in model.banned:
                await b.podium.player_admin.unban(arg)
                model.banned.discard(arg)
            if rng.random() < 0.3:  # let the updater run in the middle of the story, too
                await updater.step()
        while (await b.store.outbox_backlog(clock.now()))[0]:
            await updater.step()
        for _ in range(3):  # late replays of anything ever delivered, after the bans
            await updater.step()
        await _compare(b, model, day)
    finally:
        await b.close()


async def _compare(b: bootstrap.Backends, model: Model, day: int) -> None:
    for board in BOARDS:
        name = str(board["name"])
        spec = b.podium.boards.board(name)
        window = spec.rule.window_at(day)
        assert window is not None
        expected = model.board(board)
        page = await b.podium.reads.page(name, window.id, 0, 100)
        got = [(e.rank, e.player_id, e.points) for e in page.entries]
        assert got == expected, (name, got, expected)
        for rank, p, pts in expected:
            mine = await b.podium.reads.player_rank(name, p, 1, window.id)
            assert (mine.rank, mine.points) == (rank, pts), (name, p)
        for p in model.banned:
            assert await b.index.rank(BoardKey(name, window.id), p, descending=True) is None
        for p in model.players:  # the store keeps every total, banned or not
            t = model.tally(board, p)
            stored = await b.store.totals(p, [Target(name, window.id, window.start)])
            assert stored == ({} if t is None else {name: t[0]}), (name, p)
