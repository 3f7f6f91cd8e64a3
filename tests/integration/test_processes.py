"""``podium serve --processes N``: several API processes on one port and one process of
background roles, against the shared production backends."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.test_crash import _config, _free_port, _podium, _ready


def test_the_embedded_index_refuses_more_than_one_process(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "embedded", None, None)
    r = subprocess.run(
        [sys.executable, "-m", "podium", "serve", "--config", str(cfg), "--processes", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "--processes needs a shared index" in r.stderr


@pytest.mark.slow
@pytest.mark.empty_database  # `podium migrate` on a database with nothing in it
@pytest.mark.parametrize("processes", [1, 2])
def test_processes_share_the_port_and_the_board(
    processes: int, tmp_path: Path, postgres_url: str, redis_prefix: str
) -> None:
    cfg = _config(tmp_path, "production", postgres_url, redis_prefix)
    _podium("migrate", cfg=cfg, cwd=tmp_path)
    key = (
        _podium("keys", "create", "--name", "p", "--modes", "default", cfg=cfg, cwd=tmp_path)
        .stdout.strip()
        .splitlines()[-1]
    )
    ops = _podium("keys", "create", "--name", "o", "--ops", cfg=cfg, cwd=tmp_path)
    ops_key = ops.stdout.strip().splitlines()[-1]
    port = _free_port()
    proc = _serve(cfg, tmp_path, port, processes)
    try:
        asyncio.run(_scenario(port, key, ops_key, proc))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    # Everything it started stops with it.
    assert _left_running(proc.pid) == []
    out = (tmp_path / "serve.log").read_text()
    assert out.count("Application startup complete") == processes, out  # the API processes
    assert "worker running roles relay,updater,aggregator,freezer,reconciler" in out, out


def _serve(cfg: Path, tmp_path: Path, port: int, processes: int) -> subprocess.Popen[bytes]:
    """``podium serve --processes N`` in a process group of its own, logging to serve.log."""
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115
    argv = ["serve", "--config", str(cfg), "--port", str(port), "--processes", str(processes)]
    return subprocess.Popen(
        [sys.executable, "-m", "podium", *argv],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _left_running(pgid: int) -> list[str]:
    """What of the group is still running once it has had 10 s to go (multiprocessing's
    resource tracker, for one, leaves only when it sees its pipe close)."""
    deadline = time.monotonic() + 10
    while _running_in_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _running_in_group(pgid)


def _running_in_group(pgid: int) -> list[str]:
    """Live processes of a process group. Zombies don't count: a child that outlived its
    parent for a moment waits for an init that may never reap it, as in a container."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[2]) == pgid and stat[0] != "Z":
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
    return out


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _scenario(port: int, key: str, ops_key: str, proc: subprocess.Popen[bytes]) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    expected: dict[str, int] = {}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        await _ready(client, proc)
        ended = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for i in range(40):
            a, b = f"a{i % 7}", f"b{i % 5}"
            body = {
                "mode": "default",
                "endedAt": ended,
                "durationSeconds": 60,
                "results": [{"playerId": a, "points": i}, {"playerId": b, "points": 2 * i}],
            }
            # New connections each time, so that both processes take some of them.
            async with httpx.AsyncClient(base_url=client.base_url, timeout=10) as one:
                r = await one.post(f"/v1/matches/m{i}/results", json=body, headers=auth)
            assert r.status_code == 200, r.text
            expected[a] = expected.get(a, 0) + i
            expected[b] = expected.get(b, 0) + 2 * i
        deadline = time.monotonic() + 20
        got: dict[str, int] = {}
        while got != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            page = (await client.get("/v1/boards/all")).json()
            got = {e["playerId"]: e["points"] for e in page["entries"]}
        assert got == expected
        # Whichever process answers /metrics counts for all of them.
        for _ in range(4):
            async with httpx.AsyncClient(base_url=client.base_url, timeout=10) as one:
                text = (await one.get("/metrics", headers=_bearer(ops_key))).text
            assert "podium_results_accepted_total 80.0" in text, text


@pytest.mark.slow
@pytest.mark.empty_database  # `podium migrate` on a database with nothing in it
def test_nothing_outlives_a_killed_serve(
    tmp_path: Path, postgres_url: str, redis_prefix: str
) -> None:
    cfg = _config(tmp_path, "production", postgres_url, redis_prefix)
    _podium("migrate", cfg=cfg, cwd=tmp_path)
    port = _free_port()
    proc = _serve(cfg, tmp_path, port, 1)

    async def ready() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            await _ready(c, proc)

    try:
        asyncio.run(ready())
        assert len(_running_in_group(proc.pid)) >= 3  # serve, an API process, the roles
        proc.kill()  # no clean-up of its own: the kernel tells the children
        proc.wait(10)
        assert _left_running(proc.pid) == []
    finally:
        if _running_in_group(proc.pid):  # the test failed: leave nothing behind all the same
            os.killpg(proc.pid, signal.SIGKILL)
