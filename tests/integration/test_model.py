"""Both configurations held against a plain Python model of a board (DESIGN §5).

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
from podium.config import Settings
from podium.domain.models import ApiKey, Change, PlayerResult
from podium.errors import Conflict
from podium.ports import BoardKey
from podium.workers.updater import Updater
from tests.conftest import POSTGRES_URL, REDIS_URL, need
from tests.integration.conftest import settings_for

DAY = 86_400
# Days ahead of the real clock: Redis expires keys by its own clock, a week after the window.
BASE = (int(time.time()) // DAY + 400) * DAY
PLAYERS = ["a", "b", "B", "c", "a1"]  # byte order matters on ties: "B" < "a" < "a1" < "b" < "c"
BOARDS = [
    {"name": "total", "window": "day", "aggregate": "sum", "order": "desc"},
    {"name": "best", "window": "day", "aggregate": "best", "order": "desc"},
    {"name": "fastest", "window": "day", "aggregate": "best", "order": "asc"},
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
        self.seen: list[Change] = []

    async def relay(self, limit: int) -> int:
        return 0

    async def fetch(self, limit: int) -> list[Change]:
        fresh = await self.inner.fetch(self.rng.randint(1, 7))
        replays = self.rng.sample(self.seen, min(len(self.seen), self.rng.randint(0, 3)))
        self.seen += fresh
        batch = fresh + replays
        self.rng.shuffle(batch)
        return batch

    async def ack(self, changes: Sequence[Change]) -> None:
        await self.inner.ack([c for c in changes if c in self.seen])

    async def close(self) -> None:
        return None


@dataclass
class Model:
    players: list[str]
    desc: dict[str, bool]
    agg: dict[str, str]
    results: dict[tuple[str, str], tuple[int, int]] = field(
        default_factory=dict
    )  # (player, match) -> (pts, t)
    banned: set[str] = field(default_factory=set)

    def tally(self, board: str, player: str) -> tuple[int, int] | None:
        mine = [v for (p, _), v in self.results.items() if p == player]
        if not mine:
            return None
        if self.agg[board] == "sum":
            total = sum(p for p, _ in mine)
            scoring = [t for p, t in mine if p]
            return total, (max(scoring) if scoring else min(t for _, t in mine))
        best = (max if self.desc[board] else min)(p for p, _ in mine)
        return best, min(t for p, t in mine if p == best)

    def board(self, board: str) -> list[tuple[str, int]]:
        rows = [(p, self.tally(board, p)) for p in self.players if p not in self.banned]
        present = [(p, t) for p, t in rows if t is not None]
        # Plain rule, DESIGN invariant 4: points, then who got there first, then Redis member
        # order (descending boards list equal scores in reverse byte order).
        if self.desc[board]:
            present.sort(key=lambda r: (-r[1][0], r[1][1], _rev(r[0])))
        else:
            present.sort(key=lambda r: (r[1][0], r[1][1], r[0].encode()))
        return [(p, t[0]) for p, t in present]


def _rev(s: str) -> tuple[int, ...]:
    return (*(-b for b in s.encode()), 1)  # longer sorts first when one is a prefix


match_st = st.tuples(
    st.lists(st.sampled_from(PLAYERS), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(0, 4), min_size=4, max_size=4),  # small points: many ties
    st.integers(0, 3),  # few distinct seconds: ties on time too
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
    return settings_for(kind, f"sqlite:///{tmp}/model.db", pg, prefix, boards=BOARDS)


@pytest.mark.parametrize("kind", ["embedded", "production"])
def test_backends_match_the_model(kind: str, tmp_path: Any, request: pytest.FixtureRequest) -> None:
    pg = prefix = None
    if kind == "production":
        need(POSTGRES_URL, "PostgreSQL")
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
    model = Model(
        players,
        {x["name"]: x["order"] == "desc" for x in BOARDS},
        {x["name"]: x["aggregate"] for x in BOARDS},
    )
    key = ApiKey("gs", "gs", "h", ("default",))
    log = ChaosLog(b.log, rng)
    updater = Updater(s, b.store, b.index, log, clock)
    sent: list[tuple[str, list[PlayerResult], int]] = []
    try:
        for n, (op, arg) in enumerate(ops):
            if op == "match":
                players, points, t = arg
                results = [PlayerResult(p, points[i]) for i, p in enumerate(players)]
                sent.append((f"d{day}m{n}", results, day + t * 60))
            if op in ("match", "retry", "conflict") and sent:
                match_id, results, ended = sent[-1] if op == "match" else sent[arg % len(sent)]
                if op == "conflict":
                    results = [PlayerResult(results[0].player_id, results[0].points + 1)]
                    with pytest.raises(Conflict):
                        await b.podium.record_match(key, match_id, "default", ended, 60, results)
                    continue
                await b.podium.record_match(key, match_id, "default", ended, 60, results)
                for r in results:
                    model.results[(r.player_id, match_id)] = (r.points, ended)
            elif op == "ban":
                await b.podium.ban(arg, "model")
                model.banned.add(arg)
            elif op == "unban" and arg in model.banned:
                await b.podium.unban(arg)
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
    window = b.settings.board("total").rule.window_at(day)  # type: ignore[union-attr]
    assert window is not None
    for name, desc in model.desc.items():
        key = BoardKey(name, window.id)
        expected = model.board(name)
        codec = b.settings.board(name).codec  # type: ignore[union-attr]
        got = [(p, codec.points(sc)) for p, sc in await b.index.page(key, 0, 100, descending=desc)]
        assert got == expected, (name, got, expected)
        for i, (p, _) in enumerate(expected):
            found = await b.index.rank(key, p, descending=desc)
            assert found is not None and found[0] == i
        for p in model.banned:
            assert await b.index.rank(key, p, descending=desc) is None
        for p in model.players:  # the store keeps every total, banned or not
            t = model.tally(name, p)
            stored = await b.store.totals(p, [_target(name, window)])
            assert stored == ({} if t is None else {name: t[0]})


def _target(board: str, window: Any) -> Any:
    from podium.domain.models import Target

    return Target(board, window.id, window.start)
