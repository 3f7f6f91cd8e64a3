"""The operator's commands (``podium ban``, ``unban``, ``freeze``, ``status``) on the embedded
default (a SQLite file, the in-process index) and on the machine's Postgres and Redis, each
run as a user runs it: the command line over one settings file, in-process through typer's
runner. What they did is read back as a freshly started process sees it: the store, and the
board (on embedded rebuilt from the store, as every start does; on production in Redis)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from click.testing import Result
from typer.testing import CliRunner

from podium import bootstrap
from podium.cli.main import app
from podium.config import settings as config
from podium.domain.models import PlayerResult, Scope
from podium.workers.marker import Marker
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL
from tests.integration.conftest import Backends
from tests.moments import week_start

DAY = 86_400
LATE_S = 3 * DAY  # closed windows take late results this long: yesterday is still open to them


def settings_file(tmp_path: Path, kind: str, backends: Backends, index_url: str = "") -> Path:
    if kind == "embedded":
        store = f"sqlite:///{tmp_path}/podium.db"
        index = f'url = "{index_url}"\n' if index_url else ""
    else:
        store = backends.postgres_url or ""
        index = f'url = "{index_url or REDIS_URL}"\nprefix = "{backends.prefix}"\n'
    conf = tmp_path / "podium.toml"
    conf.write_text(
        f'[store]\nurl = "{store}"\n[index]\n{index}[archive]\ndir = "{tmp_path}/standings"\n'
        f'[[boards]]\nname = "day"\nwindow = "day"\nfreeze_after_s = {LATE_S}\n'
        f'[[boards]]\nname = "week"\nwindow = "week"\nfreeze_after_s = {LATE_S}\n'
    )
    return conf


async def podium(conf: Path, *args: str) -> Result:
    """The command line, as run by hand (in a thread: each command runs its own loop)."""
    return await asyncio.to_thread(CliRunner().invoke, app, [*args, "--config", str(conf)])


async def started(conf: Path) -> bootstrap.Backends:
    """A process's view, freshly started: the in-process index is rebuilt from the store."""
    b = bootstrap.build(config.load(str(conf)))
    await b.start()
    return b


async def drain(b: bootstrap.Backends) -> None:
    """Every change waiting in the outbox applied to the index, as the updaters do."""
    up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
    while await up.step():
        pass


@pytest.fixture
async def seeded(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> AsyncIterator[tuple[Path, str]]:
    """The settings file, and today's day window. Yesterday p1 (50), p2 (30) and p3 (10)
    played; today p1 and p2 (20 each)."""
    conf = settings_file(tmp_path, config_kind, backend_urls)
    b = await started(conf)
    try:
        key, _ = await b.podium.keys.create("gs", ["default"], scope=Scope.GAME)
        now = int(time.time())
        results = [PlayerResult("p1", 50), PlayerResult("p2", 30), PlayerResult("p3", 10)]
        await b.podium.matches.record(key, "m-yesterday", "default", now - DAY, 60, results)
        today = [PlayerResult("p1", 20), PlayerResult("p2", 20)]
        await b.podium.matches.record(key, "m-today", "default", now, 60, today)
        await drain(b)
        yield conf, b.podium.boards.window(b.podium.boards.board("day"), None).id
    finally:
        await b.close()


async def day_board(conf: Path, window: str | None = None) -> dict[str, int]:
    b = await started(conf)
    try:
        await drain(b)
        page = await b.podium.reads.page("day", window, 0, 100)
        return {e.player_id: e.points for e in page.entries}
    finally:
        await b.close()


async def test_ban_removes_the_player_and_unban_restores_them(
    seeded: tuple[Path, str],
) -> None:
    conf, _ = seeded
    assert await day_board(conf) == {"p1": 20, "p2": 20}

    done = await podium(conf, "ban", "p1", "--reason", "aimbot")
    assert done.exit_code == 0, done.output
    assert "banned p1: recorded in the store" in done.output
    assert await day_board(conf) == {"p2": 20}
    b = await started(conf)
    try:  # the store keeps the totals, for appeals, and the ban itself
        assert await b.store.banned(["p1"]) == {"p1"}
        kept = {(s.board, s.tally.total) for s in await b.store.player_standings("p1")}
        assert ("day", 20) in kept and ("day", 50) in kept
        # Yesterday's 50 and today's 20 are one week's, but on a Monday two weeks'.
        now = time.time()
        weeks = {70} if week_start(now - DAY) == week_start(now) else {50, 20}
        assert {t for board, t in kept if board == "week"} == weeks, kept
    finally:
        await b.close()

    done = await podium(conf, "unban", "p1")
    assert done.exit_code == 0, done.output
    assert "unbanned p1" in done.output
    assert await day_board(conf) == {"p1": 20, "p2": 20}

    # The API's refusals, said the same way, in one line, exit 1; nothing changed.
    again = await podium(conf, "unban", "p1")
    assert again.exit_code == 1
    assert again.output.strip() == "podium: player p1 is not banned"
    bad = await podium(conf, "ban", "p 1", "--reason", "x")
    assert bad.exit_code == 1 and "playerId 'p 1' must match" in bad.output
    empty = await podium(conf, "ban", "p2", "--reason", "")
    assert empty.exit_code == 2 and "--reason" in empty.output
    assert await day_board(conf) == {"p1": 20, "p2": 20}


async def test_freeze_gives_the_final_standings_once(seeded: tuple[Path, str]) -> None:
    conf, today = seeded
    b = await started(conf)
    yesterday = b.podium.boards.board("day").rule.window_at(int(time.time()) - DAY)
    await b.close()
    assert yesterday is not None

    done = await podium(conf, "freeze", "--board", "day", "--window", yesterday.id)
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0].startswith(f"froze day {yesterday.id} at ") and "3 players" in lines[0]
    assert [line.split() for line in lines[1:]] == [
        ["1", "50", "p1"],
        ["2", "30", "p2"],
        ["3", "10", "p3"],
    ]
    assert await day_board(conf, yesterday.id) == {"p1": 50, "p2": 30, "p3": 10}

    again = await podium(conf, "freeze", "--board", "day", "--window", yesterday.id)
    assert again.exit_code == 0, again.output
    assert again.output.startswith(f"already frozen: day {yesterday.id}")
    assert again.output.splitlines()[0].split("sha256")[1] == lines[0].split("sha256")[1]

    unknown = await podium(conf, "freeze", "--board", "month", "--window", yesterday.id)
    assert unknown.exit_code == 1
    assert unknown.output.strip() == "podium: no board named 'month'"
    tomorrow = b.podium.boards.board("day").rule.window_at(int(time.time()) + DAY)
    assert tomorrow is not None
    early = await podium(conf, "freeze", "--board", "day", "--window", tomorrow.id)
    assert early.exit_code == 1
    assert early.output.strip() == f"podium: window {tomorrow.id} of day has not started"
    assert await day_board(conf) == {"p1": 20, "p2": 20}  # today's window is still open
    assert today != yesterday.id


async def test_status_lists_every_part_and_the_roles_that_beat(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    conf = settings_file(tmp_path, config_kind, backend_urls)
    done = await podium(conf, "status", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["ok"] is True and report["down"] == []
    [database] = report["store"]
    assert database["up"] is True
    # named without user or password: the file, or host:port/database
    pg = urlparse(backend_urls.postgres_url or "")
    named = f"{pg.hostname}:{pg.port}{pg.path}"
    assert database["name"] == (f"{tmp_path}/podium.db" if config_kind == "embedded" else named)
    [node] = report["index"]
    assert node["up"] is True
    if config_kind == "embedded":
        assert (node["node"], node["role"], node["replOffset"]) == ("in process", None, None)
    else:
        assert node["node"] == "127.0.0.1:6379" and node["role"] == "master"
        assert isinstance(node["replOffset"], int)
    assert report["roles"] == []  # nothing runs yet
    assert report["outbox"] == {"pending": 0, "oldestAgeSeconds": 0.0}
    assert report["snapshots"] is None  # one shard: no aggregator, n/a
    # No board marks are read: the in-process index is another process's; on Redis no
    # marker has run, so no watermark is known and none is invented.
    assert report["boardBehindSeconds"] is None
    text = await podium(conf, "status")
    assert text.exit_code == 0, text.output
    assert "board behind" not in text.output

    # A process running roles writes their heartbeats to the store, for status to read.
    b = await started(conf)
    try:
        b.start_roles(["freezer"])

        async def beaten() -> Any:
            return [h for h in await b.store.heartbeats() if h.role == "freezer"]

        deadline = time.monotonic() + 30
        while not await beaten():
            assert time.monotonic() < deadline, "no heartbeat of the freezer in the store"
            await asyncio.sleep(0.1)
        table = await podium(conf, "status")
        assert table.exit_code == 0, table.output
        assert "freezer" in table.output and "Store databases" in table.output
        assert "Rank index" in table.output
        report = json.loads((await podium(conf, "status", "--json")).output)
        [freezer] = [r for r in report["roles"] if r["role"] == "freezer"]
        assert freezer["processes"] == 1 and freezer["stale"] is False
        assert freezer["holder"].endswith(f":{os.getpid()}")
    finally:
        await b.close()


class Ago:
    """The machine's clock, set back: a process that took its time so long ago."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def now(self) -> float:
        return time.time() - self.seconds


async def marked(conf: Path, ago_s: float) -> None:
    """One round of the board marks, as the relay's marker and an updater carry them: a mark
    for each (store database, partition) written into the outbox with the time taken
    ``ago_s`` seconds back, then applied and noted in the index. Nothing runs after it, so
    the board holds what the store had then."""
    b = await started(conf)
    try:
        assert b.marking is not None
        await Marker(b.marking, b.log.partitions, Ago(ago_s)).step()
        up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock, marks=b.snapshots)
        while await up.step():
            pass
        await up.close()  # the marks' note finished
        assert await b.snapshots.read_marks(), "the updater noted no mark"
    finally:
        await b.close()


async def board_behind(conf: Path) -> tuple[float | None, str]:
    """``podium status``'s boardBehindSeconds (JSON), and its line in the text form."""
    as_json = await podium(conf, "status", "--json")
    assert as_json.exit_code == 0, as_json.output
    text = await podium(conf, "status")
    assert text.exit_code == 0, text.output
    lines = [x for x in text.output.splitlines() if x.startswith("board behind the store")]
    return json.loads(as_json.output)["boardBehindSeconds"], "\n".join(lines)


HELD_S = 600.0  # how long ago the held board's marks were taken (whole minutes in the text)


@pytest.mark.parametrize("config_kind", ["production"], indirect=True)
async def test_status_says_how_far_behind_the_store_the_board_is(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    conf = settings_file(tmp_path, config_kind, backend_urls)
    # (No mark yet: not known, and no line; test_status_lists_every_part_and_the_roles_that_beat.)
    # The board held behind: the last marks it applied were taken HELD_S ago.
    await marked(conf, HELD_S)
    seconds, line = await board_behind(conf)
    assert seconds is not None and seconds >= HELD_S, seconds
    said = re.fullmatch(r"board behind the store \(its marks\): (\d+) min", line)
    assert said is not None, line
    assert int(said[1]) >= HELD_S / 60, line

    # The board current: marks taken now reach it, and the watermark moves up to them.
    await marked(conf, 0)
    seconds, line = await board_behind(conf)
    assert seconds is not None and 0 <= seconds < 120, seconds  # generous: a loaded machine
    said = re.fullmatch(r"board behind the store \(its marks\): (\d+\.\d) s", line)
    assert said is not None, line


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("config_kind", ["production"], indirect=True)
async def test_status_names_the_index_when_redis_is_down(
    config_kind: str, backend_urls: Backends, tmp_path: Path
) -> None:
    port = closed_port()
    conf = settings_file(tmp_path, config_kind, backend_urls, f"redis://127.0.0.1:{port}/0")
    done = await podium(conf, "status")
    assert done.exit_code == 1, done.output
    assert f"podium: down: index (one shard) at 127.0.0.1:{port}: redis:" in done.output
    assert "store database" not in done.output.split("podium: down:")[1]
    as_json = await podium(conf, "status", "--json")
    assert as_json.exit_code == 1
    report = json.loads(as_json.output.split("\npodium: down:")[0])
    assert report["ok"] is False
    assert [n["up"] for n in report["index"]] == [False]
    assert [d["up"] for d in report["store"]] == [True]
