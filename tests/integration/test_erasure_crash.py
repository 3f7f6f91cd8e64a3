"""kill -9 the process carrying out an erasure, at random moments, again and again: the next
one resumes at the step the record is at, and finishes; nothing of the player is left."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from podium import bootstrap
from podium.archive.standings import read as read_standings
from podium.config.settings import load
from podium.domain.models import PlayerResult, Profile
from podium.workers.freezer import Freezer
from tests.conftest import REDIS_URL
from tests.integration.conftest import split_databases  # noqa: F401
from tests.integration.test_erasure import GONE, KEY, _file_hits, _index_hits, _store_hits
from tests.integration.test_freeze import DAY, Clock, _drain, _midweek


def _config(tmp: Path, kind: str, pg: list[str], prefix: str | None) -> Path:
    """Embedded; Postgres and Redis; or the split fleet's store and index: a home and two
    shard databases, 16 index shards."""
    if kind == "embedded":
        store, index = f'url = "sqlite:///{tmp}/podium.db"', 'url = "memory://"'
    else:
        store = f'url = "{pg[0]}"'
        index = f'url = "{REDIS_URL}"\nprefix = "{prefix}"'
    if kind == "split":
        store += f"\nshards = {json.dumps(pg[1:])}\npool_size = 4\nread_pool_size = 3"
        index += "\nshards = 16"
    path = tmp / "podium.toml"
    path.write_text(
        f'[store]\n{store}\nerasure_secret = "s3cret"\n[index]\n{index}\n'
        f'[archive]\ndir = "{tmp}/archive"\n'
        "[workers]\nerasure_settle_s = 5.0\n"  # longer than any run lives: killed mid-way
        # A killed eraser's lease holds its record this long (the default, a minute, would
        # leave every later run waiting): the next run waits it out at most, then takes the
        # record over, however fast the machine; the runs themselves renew it as they go.
        "erasure_lease_s = 3.0\n"
        '[[boards]]\nname = "day"\nwindow = "day"\nfreeze_after_s = 600\nexact_top = 2\n'
        '[[boards]]\nname = "week"\nwindow = "week"\n'
    )
    return path


def _killed(cfg: Path, cwd: Path, kind: str) -> None:
    """The process carrying out the erasure killed with -9 six times at random moments: the
    eraser role of ``podium worker`` (on the embedded store, whose index lives in one
    process, ``podium player erase --wait``)."""
    rng = random.Random(35)
    subprocess.run(
        [sys.executable, "-m", "podium", "player", "erase", GONE, "--config", str(cfg)],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip  (the receipt: recorded, not carried out yet)
    if kind == "embedded":
        argv = [sys.executable, "-m", "podium", "player", "erase", GONE, "--wait"]
    else:
        argv = [sys.executable, "-m", "podium", "worker", "--roles", "eraser"]
    argv += ["--config", str(cfg)]
    for i in range(6):
        with open(cwd / f"eraser-{i}.log", "wb") as out:  # searched for the id after
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        time.sleep(rng.uniform(0.8, 3.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def _finished(cfg: Path, cwd: Path) -> str:
    """``podium player erase --wait`` run to its end: what it printed, on both outputs."""
    argv = [sys.executable, "-m", "podium", "player", "erase", GONE, "--wait", "--config", str(cfg)]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", ["embedded", "production", "split"])
def test_an_erasure_killed_at_random_moments_resumes_and_finishes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg: list[str] = []
    if kind == "production":
        pg = [request.getfixturevalue("postgres_url")]
    if kind == "split":
        pg = request.getfixturevalue("split_databases")
    prefix = request.getfixturevalue("redis_prefix") if kind != "embedded" else None
    asyncio.run(_scenario(_config(tmp_path, kind, pg, prefix), tmp_path, kind))
    # What every killed process wrote, from its start to its kill: nothing names them.
    logs = sorted(tmp_path.glob("eraser-*.log"))
    assert len(logs) == 6 and [p.name for p in logs if GONE.encode() in p.read_bytes()] == []


async def _scenario(cfg: Path, tmp_path: Path, kind: str) -> None:
    settings = load(str(cfg), env={})
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(settings, clock)
    await b.start()
    try:
        for i, p in enumerate(["a", GONE, "b", "c"]):
            await b.podium.matches.record(
                KEY, f"m{i}", "default", day + 60 * i, 60, [PlayerResult(p, 10 * (i + 1))]
            )
        await b.podium.player_admin.set_profile(Profile(GONE, "Gone"))
        await b.podium.player_admin.set_friends("a", [GONE])
        await _drain(b)
        clock.t = day + DAY + 601
        assert await Freezer(b.settings, b.store, b.clock, b.podium.lifecycle).step() >= 1
        await b.podium.matches.record(
            KEY, "n1", "default", day + DAY + 60, 60, [PlayerResult(GONE, 99)]
        )
        await _drain(b)
    finally:
        await b.close()
    window = settings.board("day").rule.window_at(day)  # type: ignore[union-attr]
    assert window is not None
    before = read_standings(tmp_path / "archive", f"day/{window.id}.csv.gz")

    await asyncio.to_thread(_killed, cfg, tmp_path, kind)
    b = bootstrap.build(settings, clock)
    try:
        # Recorded, and killed before its end (asked again: the record held, unchanged).
        pending = await b.podium.erasures.request(GONE, "test")
        assert pending.done_at is None
        assert pending.step.value != "done"
    finally:
        await b.close()
    out = await asyncio.to_thread(_finished, cfg, tmp_path)
    assert ": done," in out and GONE not in out

    b = bootstrap.build(settings, clock)
    await b.start()  # the in-process index rebuilt from the store
    try:
        assert await _store_hits(settings, GONE) == []
        assert await _index_hits(b, GONE) == []
        assert _file_hits(tmp_path / "archive", GONE) == []
        after = read_standings(tmp_path / "archive", f"day/{window.id}.csv.gz")
        assert [(e.position, e.rank, e.points) for e in after] == [
            (e.position, e.rank, e.points) for e in before
        ]
    finally:
        await b.close()
