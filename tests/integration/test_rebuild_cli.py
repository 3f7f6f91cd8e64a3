"""``podium rebuild`` from a terminal, on Postgres with Redis: a board window whose index lost
members behind podium's back (as a failover's last writes are lost) is rebuilt from the
store; the difference it found is printed before the switch; ``--all`` rebuilds every live
window, a tournament's run (board ``~<id>``) among them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from podium import bootstrap, config
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.models import PlayerResult
from podium.domain.tournaments import Tournament
from podium.index.keys import Keys
from podium.ports import BoardKey
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL
from tests.integration.conftest import Backends
from tests.integration.test_cli_ops import podium, settings_file

HOUR = 3600


class Then:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


@pytest.mark.parametrize("config_kind", ["production"], indirect=True)
async def test_rebuild_mends_a_board_and_all_rebuilds_tournaments_too(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    conf = settings_file(tmp_path, config_kind, backend_urls)
    now = int(time.time())
    # Recorded ten minutes ago: older than the log the rebuild applies again, which would
    # mend the live generation too before the two are compared.
    b = bootstrap.build(config.load(str(conf)), Then(now - 600))
    await b.start()
    try:
        t = Tournament(
            "cup", "Cup", ("default",), Aggregate.SUM, Order.DESC, Ties.FIRST, now - HOUR,
            now + HOUR,
        )  # fmt: skip
        await b.podium.tournaments.create(t)
        key, _ = await b.podium.keys.create("gs", ["default"])
        for i in range(30):
            players = [PlayerResult(f"p{i:02d}", 10 + i), PlayerResult(f"q{i:02d}", 5 + i)]
            await b.podium.matches.record(key, f"m{i}", "default", now - 660, 60, players)
        up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
        while await up.step():
            pass
        week = b.podium.reads.window(b.podium.reads.board("week"), None)
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
