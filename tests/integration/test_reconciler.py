"""The reconciler against a rank index corrupted behind podium's back: members deleted, a
score too high and one too low, a banned player put back, members the store has no tally
of. After its steps the board equals the store again; a result recorded while it runs is
not undone, nor a stray member removed whose first result is on its way; a banned player is
never put back; two reconcilers at once agree. On the embedded store with the in-process
index (one shard and four), and on Postgres with Redis."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from podium import bootstrap, metrics
from podium.bootstrap import Backends
from podium.config.settings import parse
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.models import PlayerResult
from podium.domain.tournaments import Tournament
from podium.domain.windows import index_expiry
from podium.ports import BoardKey
from podium.service.tournaments import Specs
from podium.workers.reconciler import Reconciler
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL

# Now, not a fixed past time: Redis expires a window's keys at the window's end for real.
# A minute into the week at least, so that every result below falls in the current week.
_T = int(time.time())
_MONDAY = _T - (_T - 345_600) % 604_800  # the epoch was a Thursday; ISO weeks start Monday
NOW = float(max(_T, _MONDAY + 300))
BOARDS = ("week", "lastweek")  # a GT board, and a versioned one ("last" can fall)


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


@pytest.fixture(params=["memory", "split4", "production"])
def kind(request: pytest.FixtureRequest) -> tuple[str, str | None, str | None]:
    """The backends' kind, and for production the database and key prefix: a plain
    fixture, so that it asks for the async service fixtures only when needed."""
    if request.param != "production":
        return request.param, None, None
    pg, prefix = request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_prefix")
    return request.param, pg, prefix


@pytest.fixture
async def backends(
    kind: tuple[str, str | None, str | None], tmp_path: Path
) -> AsyncIterator[Backends]:
    name, pg, prefix = kind
    raw: dict[str, Any] = {
        "boards": [
            {"name": "week", "window": "week"},
            {"name": "lastweek", "window": "week", "aggregate": "last"},
        ]
    }
    if name == "production":
        raw["store"] = {"url": pg}
        raw["index"] = {"url": REDIS_URL, "prefix": prefix}
    else:
        raw["store"] = {"url": f"sqlite:///{tmp_path / 'p.db'}"}
        raw["index"] = {"shards": 4 if name == "split4" else 1}
    b = bootstrap.build(parse(raw), Clock())
    await b.start()
    yield b
    await b.close()


async def record(b: Backends, match: str, points: dict[str, int], ended: int) -> None:
    key, _ = await b.podium.keys.create(f"gs-{match}", ["default"])
    results = [PlayerResult(p, n) for p, n in points.items()]
    await b.podium.matches.record(key, match, "default", ended, 60, results)


async def apply_all(b: Backends) -> None:
    up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
    while await up.step():
        pass


async def board(b: Backends, name: str) -> dict[str, int]:
    key = key_of(b, name)
    return dict(await b.index.page(key, 0, 1000, descending=True))


def key_of(b: Backends, name: str) -> BoardKey:
    spec = b.podium.boards.board(name)
    w = spec.rule.window_at(int(NOW))
    assert w is not None
    return BoardKey(name, w.id)


async def expected(b: Backends, name: str) -> dict[str, int]:
    """What the store says the board must hold: every unbanned player's score."""
    spec = b.podium.boards.board(name)
    key = key_of(b, name)
    w = spec.rule.window_at(int(NOW))
    assert w is not None
    out: dict[str, int] = {}
    async for page in b.store.standings(name, key.window):
        banned = await b.store.banned([s.player_id for s in page])
        out |= {s.player_id: spec.score(s.tally, w) for s in page if s.player_id not in banned}
    return out


async def run(*recs: Reconciler, steps: int = 16) -> None:
    """Steps enough to walk every window (its tallies and its members, in turn: two boards'
    windows, two walks each, up to 3 pages a walk here) and then confirm what was seen."""
    for _ in range(steps):
        for r in recs:
            await r.step()


async def corrupt(b: Backends, name: str, players: list[str]) -> None:
    """Delete one member, write one too high and one too low, behind podium's back: as a
    stray script would, keeping whatever version the index holds."""
    key = key_of(b, name)
    held = await board(b, name)
    gone, high, low = players
    w = b.podium.boards.board(name).rule.window_at(int(NOW))
    assert w is not None
    exp = index_expiry(w)
    # ban + unban clears a member and its version on one window: then a plain write lands
    for p in (gone, high, low):
        await b.index.ban([key], p)
        await b.index.unban([key], p)
    await b.index.write(key, [(high, held[high] + (1 << 40))], descending=True, expire_at=exp)
    await b.index.write(key, [(low, held[low] - (1 << 40))], descending=True, expire_at=exp)


async def test_repairs_every_kind_of_corruption(backends: Backends) -> None:
    b = backends
    ended = int(NOW) - 100
    await record(b, "m1", {f"p{i}": 10 * i + 5 for i in range(12)}, ended)
    await apply_all(b)
    await b.podium.player_admin.ban("p11", "cheat")
    for name in BOARDS:
        assert await board(b, name) == await expected(b, name)
        await corrupt(b, name, ["p1", "p2", "p3"])
        await b.index.unban([key_of(b, name)], "p11")  # the ban lost, and the player put back
        await b.index.write(key_of(b, name), [("p11", 999)], descending=True, expire_at=None)
        assert await board(b, name) != await expected(b, name)
    rec = Reconciler(b.settings, b.store, b.index, b.clock, batch=5)
    await run(rec)
    for name in BOARDS:
        assert await board(b, name) == await expected(b, name)
        assert "p11" not in await board(b, name)
    # the ban is back on the index too: a replayed write of the banned player is refused
    await b.index.write(key_of(b, "week"), [("p11", 10**9)], descending=True, expire_at=None)
    assert "p11" not in await board(b, "week")


async def test_a_change_in_flight_is_not_undone(backends: Backends) -> None:
    b = backends
    ended = int(NOW) - 100
    await record(b, "m1", {"a": 10, "b": 20}, ended)
    await apply_all(b)
    rec = Reconciler(b.settings, b.store, b.index, b.clock, batch=5)
    await rec.step()
    # committed, not yet applied: the index is behind, and must be left to the updater
    await record(b, "m2", {"a": 500}, ended + 1)
    before = await board(b, "week")
    await run(rec)
    assert await board(b, "week") == before  # nothing "repaired" while the change waits
    await apply_all(b)
    await run(rec)
    assert await board(b, "week") == await expected(b, "week")
    assert (await board(b, "week"))["a"] > before["a"]


async def test_two_reconcilers_at_once_agree(backends: Backends) -> None:
    b = backends
    await record(b, "m1", {f"q{i}": i + 1 for i in range(9)}, int(NOW) - 50)
    await apply_all(b)
    for name in BOARDS:
        await corrupt(b, name, ["q1", "q4", "q7"])
    one = Reconciler(b.settings, b.store, b.index, b.clock, batch=4)
    two = Reconciler(b.settings, b.store, b.index, b.clock, batch=3)
    await run(one, two)
    for name in BOARDS:
        assert await board(b, name) == await expected(b, name)


async def test_a_banned_player_is_never_put_back(backends: Backends) -> None:
    b = backends
    await record(b, "m1", {"x": 40, "y": 30}, int(NOW) - 50)
    await apply_all(b)
    rec = Reconciler(b.settings, b.store, b.index, b.clock, batch=5)
    await b.index.ban([key_of(b, "week")], "x")  # "x" missing: a suspect of the walk
    await rec.step()
    await b.podium.player_admin.ban("x", "cheat")  # banned before the suspect is confirmed
    await run(rec)
    assert "x" not in await board(b, "week")
    assert await board(b, "week") == await expected(b, "week")


def extra_repairs() -> float:
    """Members removed for having no tally, so far (the counter is process-wide)."""
    got = metrics.REGISTRY.get_sample_value("podium_reconciler_mismatches_total", {"kind": "extra"})
    return got or 0.0


async def stray(b: Backends, name: str, player: str, score: int) -> None:
    """An index write for a player with no result, behind podium's back (with a version on
    the versioned board, as a buggy updater would write one)."""
    spec = b.podium.boards.board(name)
    w = spec.rule.window_at(int(NOW))
    assert w is not None
    versions = [7] if b.settings.versioned(spec) else None
    await b.index.write(
        key_of(b, name), [(player, score)], descending=True, expire_at=None, versions=versions
    )


async def test_members_the_store_does_not_have_are_removed(backends: Backends) -> None:
    b = backends
    ended = int(NOW) - 100
    await record(b, "m1", {f"r{i}": 10 * i + 5 for i in range(12)}, ended)
    await apply_all(b)
    await b.podium.player_admin.ban("h", "cheat")  # banned, and no result at all
    real = {name: await board(b, name) for name in BOARDS}
    for name in BOARDS:
        assert real[name] == await expected(b, name)
        await stray(b, name, "ghost", 10**6)  # the top of the board
        await stray(b, name, "mid", 62)  # between r5 (55) and r6 (65)
        await b.index.unban([key_of(b, name)], "h")  # the ban lost, and the player put in
        await stray(b, name, "h", 1)
        assert set(await board(b, name)) == {*real[name], "ghost", "mid", "h"}
    before = extra_repairs()
    rec = Reconciler(b.settings, b.store, b.index, b.clock, batch=5)
    await run(rec)
    for name in BOARDS:
        assert await board(b, name) == real[name]  # the strays gone, every real player as was
    assert extra_repairs() - before == 6
    # the banned one's ban is back (a replayed write is refused); the others were not left
    # banned: their first result goes on the board
    await b.index.write(key_of(b, "week"), [("h", 10**9)], descending=True, expire_at=None)
    assert "h" not in await board(b, "week")
    await record(b, "m2", {"ghost": 7, "mid": 8}, ended + 1)
    await apply_all(b)
    for name in BOARDS:
        assert await board(b, name) == await expected(b, name)
        assert {"ghost", "mid"} <= set(await board(b, name))


async def test_a_stray_member_whose_result_is_on_its_way_is_not_removed(
    backends: Backends,
) -> None:
    b = backends
    ended = int(NOW) - 100
    await record(b, "m1", {"a": 10, "b": 20}, ended)
    await apply_all(b)
    # A change waiting in the outbox (the clock stands still): no suspect is due until it
    # is applied, as in a running fleet, where a change lands between a page and its check.
    await record(b, "m0", {"z": 1}, ended)
    for name in BOARDS:
        await stray(b, name, "g", 3)
    before = extra_repairs()
    rec = Reconciler(b.settings, b.store, b.index, b.clock, batch=5)
    for _ in range(4):  # every walk's first page: "g" is a suspect on both boards
        await rec.step()
    # g's first result, committed, not yet applied: g is no stray any more
    await record(b, "m2", {"g": 300}, ended + 1)
    held = {name: await board(b, name) for name in BOARDS}
    await run(rec)
    for name in BOARDS:
        assert await board(b, name) == held[name]  # nothing removed while the change waits
    await apply_all(b)
    await run(rec)  # now due: the store has g's tally, so g is left to the store's walk
    for name in BOARDS:
        assert await board(b, name) == await expected(b, name)
        assert "g" in await board(b, name)
    assert extra_repairs() == before  # g was never taken off, not even for a moment


async def test_a_tournaments_live_run_is_held_to_the_store(backends: Backends) -> None:
    """A tournament's run is a window of its board ``~<id>``: walked, and repaired, as a
    configured board's windows are (a member deleted, one too high, one too low, a stray)."""
    b = backends
    start = int(NOW) - 600
    cup = Tournament(
        "cup", "The Cup", ("default",), Aggregate.SUM, Order.DESC, Ties.FIRST, start, start + 7200
    )
    await b.podium.tournaments.create(cup)
    await record(b, "m1", {f"t{i}": 10 * i + 5 for i in range(8)}, int(NOW) - 100)
    up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock, Specs(b.store, b.clock))
    while await up.step():
        pass
    spec = (await b.podium.tournaments.get("cup")).spec()
    w = spec.rule.window_at(int(NOW))
    assert w is not None
    key = BoardKey(spec.name, w.id)

    async def held() -> dict[str, int]:
        return dict(await b.index.page(key, 0, 1000, descending=True))

    want: dict[str, int] = {}
    async for page in b.store.standings(spec.name, w.id):
        want |= {s.player_id: spec.score(s.tally, w) for s in page}
    assert len(want) == 8 and await held() == want
    exp = index_expiry(w)
    for p in ("t1", "t2", "t3"):
        await b.index.ban([key], p)
        await b.index.unban([key], p)
    versions = [1] if b.settings.versioned(spec) else None
    await b.index.write(key, [("t2", want["t2"] + (1 << 40))], descending=True, expire_at=exp)
    await b.index.write(key, [("t3", want["t3"] - (1 << 40))], descending=True, expire_at=exp)
    await b.index.write(key, [("ghost", 10**6)], descending=True, expire_at=exp, versions=versions)
    assert await held() != want
    rec = Reconciler(b.settings, b.store, b.index, b.clock, batch=5)
    await run(rec, steps=24)  # two boards' windows and the run, two walks each
    assert await held() == want
