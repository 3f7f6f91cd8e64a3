"""A change of the index's shard count while the fleet runs (``service/upkeep/reshard.py``,
``index/redis/layout.py``; docs/architecture.md §8): a production podium (Postgres, a split Redis
index) resharded from 4 shards to 8 and back to 3 while results are recorded and applied
by two processes (two ``bootstrap.build`` of the same settings, each with its updater) and
readers in both ask players' ranks throughout.

No read finds a seeded player missing or at zero points; afterwards each board equals the
store in both processes, both follow the new layout, the old layout's keys are gone, and a
process started later with the old count in its settings follows the record and says so.
On the machine's Redis under the test's own prefix, and on the tests' Redis Cluster.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from podium import bootstrap
from podium.bootstrap import Backends
from podium.config import settings as config
from podium.config.settings import Settings, parse
from podium.errors import ConfigError, Conflict, Unavailable
from podium.index.redis.keys import layout_pattern
from podium.ports import BoardKey
from podium.service.upkeep.gapless import GaplessRebuild, Target
from podium.workers.aggregator import Aggregator
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL
from tests.integration.test_cli_ops import podium
from tests.integration.test_rebuild_cli import LEAGUE_BOARDS, seed_cup_and_league

# The same week, boards and helpers as the rebuild without a gap: a reshard is that rebuild
# under another shard count.
from tests.integration.test_rebuild_gap import (
    BOARDS,
    Clock,
    expected,
    key_of,
    read_ranks,
    record,
)
from tests.moments import skip_in_a_weeks_first

PLAYERS = [f"p{i:03d}" for i in range(120)]
WATCH_S = 0.2


@pytest.fixture(params=["redis", "cluster"])
def where(request: pytest.FixtureRequest) -> tuple[str, str, str]:
    """The index's URL and prefix, the test's own; and the database."""
    pg = request.getfixturevalue("postgres_url")
    if request.param == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        return pg, cluster.url, request.getfixturevalue("cluster_prefix")
    return pg, REDIS_URL, request.getfixturevalue("redis_prefix")


def settings_of(where: tuple[str, str, str], shards: int = 4) -> Settings:
    pg, url, prefix = where
    return parse(
        {
            "store": {"url": pg},
            "index": {"url": url, "prefix": prefix, "shards": shards, "watch_s": WATCH_S},
            "workers": {"idle_sleep_s": 0.005},
            "boards": [
                {"name": "week", "window": "week"},
                {"name": "lastweek", "window": "week", "aggregate": "last"},
            ],
        }
    )


@pytest.fixture
async def fleet(where: tuple[str, str, str]) -> AsyncIterator[tuple[Backends, Backends]]:
    """Two processes of one deployment: the same settings, each built and started; the
    second runs the updater role (its mender beside it, watching the markers every
    ``watch_s``), the first's changes are applied by the test."""
    one = bootstrap.build(settings_of(where), Clock())
    await one.start()
    two = bootstrap.build(settings_of(where), Clock())
    await two.start()
    two.start_roles(["updater"])
    yield one, two
    await two.close()
    await one.close()


async def keys_of_layout(
    b: Backends, where: tuple[str, str, str], count: int, tagged: bool = True
) -> list[str]:
    """Every key of a layout's shards (under the plain tags, or those that carry its count)."""
    assert b.layout is not None
    client: Any = b.layout.record._r
    pattern = layout_pattern(where[2], count, tagged)
    return [k async for k in client.scan_iter(match=pattern, count=1000)]


async def reshard_under_load(one: Backends, two: Backends, count: int) -> dict[str, Any]:
    """Reshard to ``count`` while both processes record, apply and read; what was seen."""
    up = Updater(one.settings, one.store, one.index, one.copy, one.log, one.clock)
    stop = asyncio.Event()
    seen: dict[str, Any] = {"reads": 0, "missing": [], "recorded": 0, "short": [], "on_new": 0}
    # The aggregator, in the first process: the top pages are slices of its snapshots.
    agg = Aggregator(one.settings, one.needs().shards, one.snapshots, one.clock)

    async def updater() -> None:
        while not stop.is_set():
            if not await up.step():
                await asyncio.sleep(0.005)

    async def writer() -> None:
        r, n = random.Random(count), 0
        while not stop.is_set():
            a, c = r.choice(PLAYERS), f"new{count}-{n:04d}"
            b = one if n % 2 else two
            await record(b, f"live{count}-{n}", {a: r.randrange(1, 40), c: r.randrange(1, 40)})
            n += 1
            seen["recorded"] = n
            await asyncio.sleep(0.003)

    def reader(b: Backends) -> Any:
        def on_new() -> None:  # a read on the new layout
            assert b.layout is not None
            seen["on_new"] += b.layout.count == count

        return lambda: read_ranks(b, PLAYERS, stop, seen, on_new)

    async def aggregating() -> None:
        while not stop.is_set():
            await agg.step()
            await asyncio.sleep(0.02)

    def pager(b: Backends) -> Any:
        async def run() -> None:
            r = random.Random()
            while not stop.is_set():
                board = r.choice(BOARDS)
                b.podium.reads.clear_cache()  # the index's answer, not one held
                page = await b.podium.reads.page(board, None, 0, 50)
                if len(page.entries) < 50 or any(e.points <= 0 for e in page.entries):
                    seen["short"].append((board, len(page.entries)))
                await asyncio.sleep(0.01)

        return run

    runs = [updater, writer, reader(one), reader(two), aggregating]
    runs += [pager(one), pager(two)]
    tasks = [asyncio.create_task(t()) for t in runs]
    try:
        while seen["recorded"] < 5:
            await asyncio.sleep(0.01)
        boards = one.podium.boards
        targets = [Target(boards.board(n), boards.window(boards.board(n), None)) for n in BOARDS]
        before = seen["reads"], seen["recorded"]
        seen["outcomes"] = await one.reshard().run(targets, count, grace_s=0.2)
        seen["during"] = seen["reads"] - before[0], seen["recorded"] - before[1]
        await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    await drained(one, up)
    return seen


async def drained(b: Backends, up: Updater) -> None:
    """Every committed change applied: this updater's, and the second process's role's."""
    deadline = time.monotonic() + 60
    while True:
        while await up.step():
            pass
        pending, _ = await b.store.outbox_backlog(time.time())
        if pending == 0:
            return
        assert time.monotonic() < deadline, f"{pending} changes never applied"
        await asyncio.sleep(0.05)


async def held(b: Backends, name: str) -> dict[str, int]:
    return dict(await b.index.page(key_of(b, name), 0, 10_000, descending=True))


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_reshard_4_to_8_and_back_to_3_loses_no_rank_nor_result(
    fleet: tuple[Backends, Backends], where: tuple[str, str, str], caplog: pytest.LogCaptureFixture
) -> None:
    one, two = fleet
    assert one.layout is not None and two.layout is not None
    for i in range(0, len(PLAYERS), 2):
        await record(one, f"seed{i}", {PLAYERS[i]: 10 + i, PLAYERS[i + 1]: 5 + i})
    await drained(one, Updater(one.settings, one.store, one.index, one.copy, one.log, one.clock))
    plain = await keys_of_layout(one, where, 4, tagged=False)
    assert plain, "the configured layout's keys, under the plain tags"

    caplog.clear()
    with caplog.at_level(logging.INFO):
        seen = await reshard_under_load(one, two, 8)
    # the mender beside the second process's updater saw nothing to mend: the new layout
    # was marked before the switch, and the old one dropped after every process followed
    assert not [r for r in caplog.records if r.name == "podium.mender"], caplog.text
    assert seen["missing"] == [], seen["missing"][:10]
    assert seen["short"] == [], seen["short"][:10]  # every top page whole
    assert min(seen["during"]) > 0, seen["during"]  # reads and results during the reshard
    assert 0 < seen["on_new"] < seen["reads"], seen  # read on both layouts
    assert [o.key for o in seen["outcomes"]] == [key_of(one, n) for n in BOARDS]
    assert all(o.difference is not None for o in seen["outcomes"])
    assert (one.layout.count, two.layout.count) == (8, 8)
    assert "switched from 4 shards to 8 shards (tagged)" in caplog.text
    for name in BOARDS:
        want = await expected(one, name)
        assert await held(one, name) == want, name
        assert await held(two, name) == want, name
    assert await keys_of_layout(one, where, 4, tagged=False) == []  # the old layout dropped
    assert await keys_of_layout(one, where, 8)
    # Names come from the new layout's copy of profiles, complete.
    assert await one.copy.profiles_complete()

    caplog.clear()
    seen = await reshard_under_load(one, two, 3)
    assert not [r for r in caplog.records if r.name == "podium.mender"], caplog.text
    assert seen["missing"] == [], seen["missing"][:10]
    assert seen["short"] == [], seen["short"][:10]
    assert (one.layout.count, two.layout.count) == (3, 3)
    for name in BOARDS:
        want = await expected(one, name)
        assert await held(one, name) == want, name
        assert await held(two, name) == want, name
    assert await keys_of_layout(one, where, 8) == []

    # A process started later with index.shards = 4 in its file follows the record.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        late = bootstrap.build(settings_of(where), Clock())
        await late.start()
    try:
        assert late.layout is not None and late.layout.count == 3
        assert "set index.shards = 3" in caplog.text
        for name in BOARDS:
            assert await held(late, name) == await expected(one, name), name
    finally:
        await late.close()
    assert await one.layout.record.read() == (3, None)  # the record: 3, no reshard under way


@pytest.mark.parametrize("where", ["redis"], indirect=True)
async def test_a_reshard_to_the_live_count_or_to_one_shard_is_refused(
    fleet: tuple[Backends, Backends],
) -> None:
    one, _ = fleet
    with pytest.raises(Conflict, match="4 shards already"):
        await one.reshard().run([], 4, grace_s=0)
    with pytest.raises(Conflict, match="split index to a split index"):
        await one.reshard().run([], 1, grace_s=0)


async def test_the_in_process_index_refuses_a_reshard(tmp_path: Any) -> None:
    b = bootstrap.build(
        parse({"store": {"url": f"sqlite:///{tmp_path / 'p.db'}"}, "index": {"shards": 4}})
    )
    with pytest.raises(ConfigError, match="in process"):
        b.reshard()
    await b.close()


@pytest.mark.parametrize("where", ["redis"], indirect=True)
async def test_an_unsplit_redis_refuses_to_start_on_a_resharded_index(
    fleet: tuple[Backends, Backends], where: tuple[str, str, str]
) -> None:
    """index.shards = 1 left in a file after a reshard: its keys are not the live ones."""
    one, _ = fleet
    assert one.layout is not None
    await one.layout.record.switch(6)  # as a reshard to 6 shards leaves it
    b = bootstrap.build(settings_of(where, shards=1), Clock())
    try:
        with pytest.raises(ConfigError, match=r"set index\.shards = 6"):
            await b.start()
    finally:
        await b.close()


# -- the command ---------------------------------------------------------------------------


@pytest.mark.slow
async def test_the_command_reshards_boards_cohorts_and_tournament_runs(
    postgres_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    """``podium rebuild --all --shards 8``: every live window, a league's cohorts and a
    tournament's run among them, under the new count; a process started after follows it."""
    conf = tmp_path / "podium.toml"
    conf.write_text(
        f'[store]\nurl = "{postgres_url}"\n'
        f'[index]\nurl = "{REDIS_URL}"\nprefix = "{redis_prefix}"\nshards = 4\n'
        f"watch_s = {WATCH_S}\n"
        f'[archive]\ndir = "{tmp_path}/standings"\n' + LEAGUE_BOARDS
    )
    now = int(time.time())
    skip_in_a_weeks_first(660, now)
    b = bootstrap.build(config.load(str(conf)), Clock(now - 600))
    await b.start()
    try:
        await seed_cup_and_league(b, now)
        cohorts = [w for _, w in await b.podium.leagues.live_cohorts()]
        before = {w.id: await b.podium.leagues.cohort("league", w.id) for w in cohorts}
        assert sum(len(v.members) for v in before.values()) == 7
        [(_, run)] = await b.podium.tournaments.live_runs()
    finally:
        await b.close()

    alone = await podium(conf, "rebuild", "--board", "week", "--shards", "8")
    assert alone.exit_code == 2 and "--shards goes with --all" in alone.output, alone.output

    done = await podium(conf, "rebuild", "--all", "--shards", "8", "--grace", "0", "--no-progress")
    assert done.exit_code == 0, done.output
    for w in cohorts:
        assert f"rebuilt league {w.id} with " in done.output, done.output
    assert f"rebuilt ~cup {run.id} with 7 players" in done.output, done.output
    assert "rebuilt week " in done.output, done.output
    assert "set index.shards = 8 in the settings" in done.output, done.output

    b = bootstrap.build(config.load(str(conf)))
    await b.start()
    try:
        assert b.layout is not None and b.layout.count == 8
        for w in cohorts:
            after = await b.podium.leagues.cohort("league", w.id)
            assert [m.player_id for m in after.members] == [
                m.player_id for m in before[w.id].members
            ]
        assert await b.index.count(BoardKey("~cup", run.id)) == 7
        week = b.podium.boards.window(b.podium.boards.board("week"), None)
        assert await b.index.count(BoardKey("week", week.id)) == 7
        # Every process read how far it was, and reads it done for a minute after.
        [told] = await b.podium.upkeep.running(time.time())
        assert (told.kind, told.phase, told.shards_from, told.shards_to) == (
            "reshard",
            "done",
            4,
            8,
        )
        assert told.windows_done == len(told.windows) and f"week {week.id}" in told.windows
    finally:
        await b.close()


async def test_the_command_refuses_shards_on_the_in_process_index(tmp_path: Path) -> None:
    conf = tmp_path / "podium.toml"
    conf.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/podium.db"\n[index]\nshards = 4\n')
    out = await podium(conf, "rebuild", "--all", "--shards", "8", "--no-progress")
    assert out.exit_code == 2, out.output
    assert "in-process index" in out.output and "restart" in out.output, out.output


@pytest.mark.parametrize("where", ["redis"], indirect=True)
async def test_a_reshard_that_fails_before_its_switch_changes_nothing(
    fleet: tuple[Backends, Backends],
    where: tuple[str, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fill dies after both layouts were written a while: the record's next goes, the
    new layout's keys go, both processes stop writing it, the live layout is as it was."""
    one, two = fleet
    assert one.layout is not None and two.layout is not None
    up = Updater(one.settings, one.store, one.index, one.copy, one.log, one.clock)
    await record(one, "m0", {"p000": 10, "p001": 5})
    await drained(one, up)

    async def dies(*_: Any, **__: Any) -> Any:
        await record(two, "m1", {"p002": 7})  # applied meanwhile: to both layouts
        await drained(one, up)
        assert await keys_of_layout(one, where, 8)
        raise Unavailable("the store went away")

    monkeypatch.setattr(GaplessRebuild, "run", dies)
    boards = one.podium.boards
    targets = [Target(boards.board(n), boards.window(boards.board(n), None)) for n in BOARDS]
    with pytest.raises(Unavailable, match="went away"):
        await one.reshard().run(targets, 8, grace_s=0)
    assert await one.layout.record.read() == (None, None)
    assert await keys_of_layout(one, where, 8) == []
    assert await keys_of_layout(one, where, 4, tagged=False)
    for b in (one, two):
        await b.layout.follow()
        assert (b.layout.count, b.layout.next) == (4, None)
    assert await held(one, "week") == await expected(one, "week")
