"""kill -9 a running server mid-stream: after a restart, every acknowledged result is on
the board exactly once (invariant 2 of docs/architecture.md), on both configurations."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REDIS_URL
from tests.integration.conftest import two_player_match
from tests.ports import free_port as _free_port

PLAYERS = [f"p{i:03d}" for i in range(40)]


def _config(tmp: Path, kind: str, pg: str | None, prefix: str | None) -> Path:
    store = f'url = "{pg}"' if kind == "production" else f'url = "sqlite:///{tmp}/podium.db"'
    index = (
        f'url = "{REDIS_URL}"\nprefix = "{prefix}"' if kind == "production" else 'url = "memory://"'
    )
    path = tmp / "podium.toml"
    path.write_text(
        f"[store]\n{store}\n[index]\n{index}\n"
        "[server]\nread_rate_per_s = 0\n"
        "[workers]\nlease_s = 1.0\n"
        '[[boards]]\nname = "all"\nwindow = "all"\n'
    )
    return path


def _podium(*args: str, cfg: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "podium", *args, "--config", str(cfg)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def _serve(cfg: Path, cwd: Path, port: int) -> subprocess.Popen[bytes]:
    log = open(cwd / f"serve-{port}-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "podium", "serve", "--config", str(cfg), "--port", str(port)],
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


async def _ready(client: httpx.AsyncClient, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "server exited during start"
        try:
            if (await client.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("server did not become ready")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["embedded", "production"])
def test_kill_9_loses_and_doubles_nothing(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg = prefix = None
    if kind == "production":
        pg = request.getfixturevalue("postgres_url")
        prefix = request.getfixturevalue("redis_prefix")
    cfg = _config(tmp_path, kind, pg, prefix)
    _podium("migrate", cfg=cfg, cwd=tmp_path)
    key = (
        _podium("keys", "create", "--name", "crash", "--modes", "default", cfg=cfg, cwd=tmp_path)
        .stdout.strip()
        .splitlines()[-1]
    )
    asyncio.run(_scenario(cfg, tmp_path, key))


async def _scenario(cfg: Path, tmp: Path, key: str) -> None:
    port = _free_port()
    rng = random.Random(7)
    matches: dict[str, dict[str, Any]] = {}
    acked: set[str] = set()
    proc = _serve(cfg, tmp, port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await _ready(client, proc)

            async def sender(n: int) -> None:
                i = 0
                while True:
                    mid = f"m{n}-{i}"
                    i += 1
                    matches[mid] = two_player_match(rng, PLAYERS)
                    try:
                        r = await client.post(
                            f"/v1/matches/{mid}/results",
                            json=matches[mid],
                            headers={"Authorization": f"Bearer {key}"},
                        )
                    except httpx.TransportError:
                        return  # the server is gone: this match's fate is unknown
                    if r.status_code == 200:
                        acked.add(mid)

            senders = [asyncio.create_task(sender(n)) for n in range(4)]
            while len(acked) < 200:
                await asyncio.sleep(0.01)
            proc.send_signal(signal.SIGKILL)  # mid-stream: senders have requests in flight
            proc.wait(timeout=10)
            await asyncio.gather(*senders)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    proc = _serve(cfg, tmp, port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            await _ready(client, proc)
            unknown = [m for m in matches if m not in acked]
            assert len(acked) >= 200 and unknown, "the kill should land with requests in flight"
            # A game server retries what was never acknowledged; retries are always safe.
            for mid in unknown:
                r = await client.post(
                    f"/v1/matches/{mid}/results",
                    json=matches[mid],
                    headers={"Authorization": f"Bearer {key}"},
                )
                assert r.status_code == 200, r.text
            expected: dict[str, int] = {}
            for body in matches.values():
                for res in body["results"]:
                    expected[res["playerId"]] = expected.get(res["playerId"], 0) + res["points"]

            async def board() -> dict[str, int]:
                out: dict[str, int] = {}
                r = await client.get("/v1/boards/all", params={"limit": 100})
                for e in r.json()["entries"]:
                    out[e["playerId"]] = e["points"]
                return out

            deadline = time.monotonic() + 20
            got = await board()
            while got != expected and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                got = await board()
            assert got == expected
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
