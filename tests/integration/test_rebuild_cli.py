"""``podium rebuild`` from a terminal, on Postgres with Redis: a board window whose index lost
members behind podium's back (as a failover's last writes are lost) is rebuilt from the
store; the difference it found is printed before the switch; ``--all`` rebuilds every live
window, a tournament's run (board ``~<id>``) among them. A league's cohort (``--window
<cohortId>``) and a tournament's board (``--board ~<id>``) are rebuilt by name, and ``--all``
rebuilds the live cohorts too, on the embedded store with a Redis index, on Postgres and on
the split fleet."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from podium import bootstrap
from podium.config import settings as config
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.models import PlayerResult
from podium.domain.tournaments import Tournament
from podium.index.redis.keys import Keys
from podium.ports import BoardKey
from podium.service.tournaments import Specs
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL
from tests.integration.conftest import SPLIT_INDEX_SHARDS, Backends
from tests.integration.test_cli_ops import podium, settings_file
from tests.moments import skip_in_a_weeks_first

HOUR = 3600


class Then:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def live_cup(now: int) -> Tournament:
    """A live tournament "cup" of mode default, from an hour ago for two hours."""
    return Tournament(
        "cup", "Cup", ("default",), Aggregate.SUM, Order.DESC, Ties.FIRST, now - HOUR, now + HOUR
    )


async def seed_cup_and_league(b: bootstrap.Backends, now: int) -> None:
    """The live cup, and seven players' results of ten minutes ago (each placed in a cohort
    of a league board), applied to the index."""
    await b.podium.tournaments.create(live_cup(now))
    key, _ = await b.podium.keys.create("gs", ["default"])
    for i in range(7):
        await b.podium.matches.record(
            key, f"m{i}", "default", now - 660, 60, [PlayerResult(f"p{i}", 10 + i)]
        )
    up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock, Specs(b.store, b.clock))
    while await up.step():
        pass


@pytest.mark.parametrize("config_kind", ["production"], indirect=True)
async def test_rebuild_mends_a_board_and_all_rebuilds_tournaments_too(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    conf = settings_file(tmp_path, config_kind, backend_urls)
    now = int(time.time())
    skip_in_a_weeks_first(660, now)
    # Recorded ten minutes ago: older than the log the rebuild applies again, which would
    # mend the live generation too before the two are compared.
    b = bootstrap.build(config.load(str(conf)), Then(now - 600))
    await b.start()
    try:
        await b.podium.tournaments.create(live_cup(now))
        key, _ = await b.podium.keys.create("gs", ["default"])
        for i in range(30):
            players = [PlayerResult(f"p{i:02d}", 10 + i), PlayerResult(f"q{i:02d}", 5 + i)]
            await b.podium.matches.record(key, f"m{i}", "default", now - 660, 60, players)
        up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
        while await up.step():
            pass
        week = b.podium.boards.window(b.podium.boards.board("week"), None)
        board = BoardKey("week", week.id)
        assert await b.index.count(board) == 60
    finally:
        await b.close()
    assert backend_urls.prefix is not None
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:  # two members lost behind podium's back
        await raw.zrem(Keys(backend_urls.prefix).board(board), "p03", "q07")
    finally:
        await raw.aclose()

    done = await podium(conf, "rebuild", "--board", "week", "--grace", "0", "--no-progress")
    assert done.exit_code == 0, done.output
    assert f"rebuilt week {week.id} with 60 players" in done.output, done.output
    assert "members: live 58, new 60 (+2)" in done.output, done.output
    b = bootstrap.build(config.load(str(conf)))
    try:
        assert await b.index.count(board) == 60
        placed = await b.index.rank(board, "p03", descending=True)
        assert placed is not None
    finally:
        await b.close()

    every = await podium(conf, "rebuild", "--all", "--grace", "0", "--no-progress")
    assert every.exit_code == 0, every.output
    assert "rebuilt ~cup " in every.output and "rebuilt day " in every.output, every.output
    assert "members: live 60, new 60 (+0)" in every.output, every.output

    both = await podium(conf, "rebuild", "--all", "--board", "week")
    assert both.exit_code == 2 and "--board" in both.output, both.output


# -- cohorts and tournament boards, on every configuration with a shared index --------------

LEAGUE_BOARDS = (
    '[[boards]]\nname = "week"\nwindow = "week"\n'
    '[[boards]]\nname = "league"\nwindow = "week"\ncohort_size = 3\n'
    'tiers = ["bronze", "silver"]\npromote = 1\ndemote = 1\n'
)


def league_file(tmp_path: Path, kind: str, backends: Backends, prefix: str) -> Path:
    """Settings with a league board (cohorts of 3) beside a plain one, on a Redis index
    under the test's own prefix: the embedded store with Redis (`podium rebuild` refuses the
    in-process index), Postgres, or Postgres split by player over a Redis split in four."""
    if kind == "embedded":
        store = f'url = "sqlite:///{tmp_path}/podium.db"\n'
    else:
        store = f'url = "{backends.postgres_url}"\n'
    if backends.shards:
        shards = ", ".join(f'"{s}"' for s in backends.shards)
        store += f"shards = [{shards}]\npool_size = 4\nread_pool_size = 3\n"
    index = f'url = "{REDIS_URL}"\nprefix = "{prefix}"\n'
    if kind == "split":
        index += f"shards = {SPLIT_INDEX_SHARDS}\n"
    conf = tmp_path / "podium.toml"
    conf.write_text(
        f'[store]\n{store}[index]\n{index}[archive]\ndir = "{tmp_path}/standings"\n' + LEAGUE_BOARDS
    )
    return conf


async def lose(prefix: str, window: str, member: str) -> int:
    """``member`` taken out of every shard's sorted set of a window behind podium's back (as
    a failover's last writes are lost); how many sets held it."""
    raw = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        lost = 0
        async for name in raw.scan_iter(match=f"{prefix}:*", count=1000):
            if name.endswith(f"{window}:z") or name.endswith(f"{window}}}:z"):
                lost += await raw.zrem(name, member)
        return lost
    finally:
        await raw.aclose()


@pytest.mark.parametrize("config_kind", ["embedded", "production", "split"], indirect=True)
async def test_rebuild_knows_cohorts_and_tournament_boards(
    config_kind: str, backend_urls: Backends, redis_prefix: str, tmp_path: Path
) -> None:
    """A cohort (a window of its league board, ``2026-W49.bronze-1``) and a tournament's
    board (``~cup``) that lost members are rebuilt by name, and ``--all`` rebuilds every
    live cohort with the boards and the runs, through the same rebuild without a gap."""
    conf = league_file(tmp_path, config_kind, backend_urls, redis_prefix)
    now = int(time.time())
    skip_in_a_weeks_first(660, now)
    b = bootstrap.build(config.load(str(conf)), Then(now - 600))  # as above: before the replay
    await b.start()
    try:
        await seed_cup_and_league(b, now)
        every = await b.podium.leagues.live_cohorts()
        views = [await b.podium.leagues.cohort("league", w.id) for _, w in every]
        assert sum(len(v.members) for v in views) == 7
        # the largest cohort (on Postgres each of the tier's lock stripes fills cohorts of
        # its own, and on a split store each database)
        first = max(views, key=lambda v: len(v.members))
        size, victim = len(first.members), first.members[0].player_id
        [(_, run)] = await b.podium.tournaments.live_runs()
        cup = BoardKey("~cup", run.id)
        assert await b.index.count(cup) == 7
    finally:
        await b.close()
    cohort = BoardKey("league", first.id)
    assert await lose(redis_prefix, first.id, victim) == 1
    assert await lose(redis_prefix, run.id, "p5") == 1

    one = await podium(
        conf, "rebuild", "--board", "league", "--window", first.id, "--grace", "0", "--no-progress"
    )
    assert one.exit_code == 0, one.output
    assert f"rebuilt league {first.id} with {size} players" in one.output, one.output
    assert f"members: live {size - 1}, new {size} (+1)" in one.output, one.output

    cup_only = await podium(conf, "rebuild", "--board", "~cup", "--grace", "0", "--no-progress")
    assert cup_only.exit_code == 0, cup_only.output
    assert f"rebuilt ~cup {run.id} with 7 players" in cup_only.output, cup_only.output
    assert "members: live 6, new 7 (+1)" in cup_only.output, cup_only.output

    b = bootstrap.build(config.load(str(conf)))
    try:
        assert await b.index.count(cohort) == size
        assert await b.index.count(cup) == 7
        assert await b.index.rank(cohort, victim, descending=True) is not None
    finally:
        await b.close()

    assert await lose(redis_prefix, first.id, victim) == 1
    every_out = await podium(conf, "rebuild", "--all", "--grace", "0", "--no-progress")
    assert every_out.exit_code == 0, every_out.output
    for _, w in every:
        assert f"rebuilt league {w.id} with " in every_out.output, every_out.output
    assert f"rebuilt league {first.id} with {size} players" in every_out.output, every_out.output
    assert f"rebuilt ~cup {run.id} with 7 players" in every_out.output, every_out.output
    assert "rebuilt week " in every_out.output, every_out.output
    b = bootstrap.build(config.load(str(conf)))
    try:
        assert await b.index.count(cohort) == size
        assert await b.index.rank(cohort, victim, descending=True) is not None
    finally:
        await b.close()

    # what the store does not hold is named, never rebuilt empty
    missing = f"{first.window}.bronze-99"
    gone = await podium(conf, "rebuild", "--board", "league", "--window", missing, "--no-progress")
    assert gone.exit_code == 1 and "no cohort" in gone.output, gone.output
    plain = await podium(conf, "rebuild", "--board", "week", "--window", first.id, "--no-progress")
    assert plain.exit_code == 1 and "not played in cohorts" in plain.output, plain.output
    nocup = await podium(conf, "rebuild", "--board", "~nope", "--no-progress")
    assert nocup.exit_code == 1 and "no tournament" in nocup.output, nocup.output
