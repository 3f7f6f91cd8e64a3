"""What a crash and an outage leave behind, on real ``podium serve`` processes (issue 22 of
the second probe).

- A request that dies between its claim of a match and its results (kill -9) leaves a claim
  with no result. Once that claim is past its lease (``server.claim_lease_s``), another key
  may record the match; the same key's retry finishes it at any time, and a match with a
  result stays its key's.
- A ban while the rank index is down is recorded (the store is the record): the answer is a
  202 that says so, not a 503 "nothing was recorded", and the reconciler drops the player
  from the boards once the index is back. An unban while it is down records nothing (503).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from podium.config.settings import parse
from podium.serve.app import create_app
from podium.store.postgres import locks
from tests.conftest import REDIS_URL
from tests.integration.conftest import Api
from tests.ports import free_port

LEASE_S = 1.0  # the claim lease of these servers: a dead claim is free a second later
DEADLINE_S = 30.0


def _config(tmp: Path, pg: str | None = None, prefix: str | None = None) -> Path:
    if pg is None:
        store, index = f'url = "sqlite:///{tmp}/podium.db"', 'url = "memory://"'
    else:
        store, index = f'url = "{pg}"', f'url = "{REDIS_URL}"\nprefix = "{prefix}"'
    path = tmp / "podium.toml"
    path.write_text(
        f"[store]\n{store}\n[index]\n{index}\n"
        f"[server]\nread_rate_per_s = 0\nclaim_lease_s = {LEASE_S}\n"
        "[workers]\nlease_s = 1.0\n"
        '[[boards]]\nname = "all"\nwindow = "all"\n'
    )
    return path


def _podium(cfg: Path, *args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "podium", *args, "--config", str(cfg)],
        cwd=cfg.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, f"podium {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


def _key(cfg: Path, name: str) -> tuple[str, str]:
    """A game-server key: (its id, its secret)."""
    out = _podium(cfg, "keys", "create", "--name", name, "--modes", "default")
    found = re.search(r"created key (\S+) ", out)
    assert found, out
    return found.group(1), out.strip().splitlines()[-1]


class Server:
    def __init__(self, cfg: Path) -> None:
        self.cfg = cfg
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.cfg.parent / f"serve-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
        argv = ["serve", "--config", str(self.cfg), "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "podium", *argv],
            cwd=self.cfg.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    async def ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + 45
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as c:
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, "the server exited during its start"
                try:
                    if (await c.get("/readyz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError("the server did not become ready")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _match(player: str, points: int, ended: float) -> dict[str, object]:
    return {
        "mode": "default",
        "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended)),
        "durationSeconds": 60,
        "results": [{"playerId": player, "points": points}],
    }


async def _post(c: httpx.AsyncClient, mid: str, body: object, secret: str) -> httpx.Response:
    return await c.post(
        f"/v1/matches/{mid}/results", json=body, headers={"Authorization": f"Bearer {secret}"}
    )


async def _until_accepted(
    c: httpx.AsyncClient, mid: str, body: object, secret: str
) -> httpx.Response:
    """Post until the answer is not the 403 of a claim still within its lease."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        r = await _post(c, mid, body, secret)
        if r.status_code != 403 or time.monotonic() > deadline:
            return r
        await asyncio.sleep(0.2)


async def _board(c: httpx.AsyncClient, expected: dict[str, int]) -> dict[str, int]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        page = (await c.get("/v1/boards/all", params={"limit": 100})).json()
        got = {e["playerId"]: e["points"] for e in page["entries"]}
        if got == expected or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.2)


async def _after_the_crash(
    server: Server, a: tuple[str, str], b: tuple[str, str], dead: dict[str, object]
) -> None:
    """On a server started after the crash that left ``dead`` (player pz, 5 points) claimed
    by ``a`` with no result: the other key records it once the lease is over, and from then
    on the match is ``b``'s; a match with a result stays its key's."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
        r = await _until_accepted(c, "m-dead", dead, b[1])
        assert r.status_code == 200, r.text
        assert r.json()["players"] == [{"playerId": "pz", "totals": {"all": 5}}]
        # the match is b's now: b's retry is idempotent, a is refused
        again = await _post(c, "m-dead", dead, b[1])
        assert again.status_code == 200 and again.json() == r.json()
        assert (await _post(c, "m-dead", dead, a[1])).status_code == 403
        # a match with a result is never given away, however old
        assert (await _post(c, "m-live", _match("py", 3, time.time()), b[1])).status_code == 403
        assert await _board(c, {"pz": 5, "py": 3}) == {"pz": 5, "py": 3}


@pytest.mark.slow
def test_a_claim_left_by_a_crash_is_freed_on_the_embedded_store(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    _podium(cfg, "migrate")
    a, b = _key(cfg, "a"), _key(cfg, "b")
    server = Server(cfg)
    ended = time.time() - 60
    dead = _match("pz", 5, ended)

    async def before() -> None:
        await server.ready()
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
            r = await _post(c, "m-live", _match("py", 3, ended), a[1])
            assert r.status_code == 200, r.text

    server.start()
    try:
        asyncio.run(before())
        server.kill9()
        # What a kill -9 between the claim of m-dead and its result leaves in the file: the
        # claim, committed on its own (the result is a later transaction). Written here
        # because the two commits are too close for a signal to land between them surely.
        with sqlite3.connect(tmp_path / "podium.db") as db:
            db.execute(
                "INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s)"
                " VALUES ('m-dead', ?, ?, 'default', ?, 60)",
                (a[0], time.time(), int(ended)),
            )
        server.start()
        asyncio.run(server.ready())
        asyncio.run(_after_the_crash(server, a, b, dead))
    finally:
        server.stop()


@pytest.mark.slow
def test_the_same_key_finishes_a_claim_left_by_a_crash(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    _podium(cfg, "migrate")
    a, b = _key(cfg, "a"), _key(cfg, "b")
    ended = time.time() - 60
    with sqlite3.connect(tmp_path / "podium.db") as db:  # as a crash left it, long ago
        db.execute(
            "INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s)"
            " VALUES ('m-dead', ?, ?, 'default', ?, 60)",
            (a[0], time.time() - 3600, int(ended)),
        )
    server = Server(cfg)

    async def scenario() -> None:
        await server.ready()
        dead = _match("pz", 5, ended)
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as c:
            # the key that claimed it retries, past the lease: its own claim, finished
            first = await _post(c, "m-dead", dead, a[1])
            assert first.status_code == 200, first.text
            again = await _post(c, "m-dead", dead, a[1])
            assert again.status_code == 200 and again.json() == first.json()
            assert (await _post(c, "m-dead", dead, b[1])).status_code == 403
            assert await _board(c, {"pz": 5}) == {"pz": 5}

    server.start()
    try:
        asyncio.run(scenario())
    finally:
        server.stop()


@pytest.mark.slow
def test_a_kill_9_between_the_claim_and_the_result_on_postgres(
    tmp_path: Path, postgres_url: str, redis_prefix: str
) -> None:
    cfg = _config(tmp_path, postgres_url, redis_prefix)
    _podium(cfg, "migrate")
    a, b = _key(cfg, "a"), _key(cfg, "b")
    server = Server(cfg)
    ended = time.time() - 60
    dead = _match("pz", 5, ended)

    async def crash() -> None:
        await server.ready()
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            r = await _post(c, "m-live", _match("py", 3, ended), a[1])
            assert r.status_code == 200, r.text
        held = await asyncpg.connect(postgres_url)
        try:
            # pz's record lock, held here: the server's record of m-dead waits on it after
            # its claim has committed, and is killed there, for certain.
            await held.execute(
                "SELECT pg_advisory_lock($1, $2)", locks.RECORD_NS, locks.player_key("pz")
            )
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
                sent = asyncio.create_task(_post(c, "m-dead", dead, a[1]))
                deadline = time.monotonic() + DEADLINE_S
                while not await held.fetchval(
                    "SELECT count(*) FROM matches WHERE match_id = 'm-dead'"
                ):
                    assert time.monotonic() < deadline and not sent.done()
                    await asyncio.sleep(0.05)
                server.kill9()
                with pytest.raises(httpx.TransportError):
                    await sent
            # The killed process's session would still run its statement once the lock is
            # free; a dead server's sessions end with it.
            await held.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        finally:
            await held.close()
        check = await asyncpg.connect(postgres_url)
        try:
            assert (
                await check.fetchval("SELECT count(*) FROM results WHERE match_id = 'm-dead'") == 0
            )
            assert (
                await check.fetchval("SELECT key_id FROM matches WHERE match_id = 'm-dead'") == a[0]
            )
        finally:
            await check.close()

    server.start()
    try:
        asyncio.run(crash())
        server.start()
        asyncio.run(server.ready())
        asyncio.run(_after_the_crash(server, a, b, dead))
    finally:
        server.stop()


class PrivateRedis:
    """A redis-server of this test's own, on a free loopback port, that keeps its data
    across a stop and a start (an append-only file, fsynced on every write)."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.dir = tmp / "redis"
        self.dir.mkdir()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        server = shutil.which("redis-server")
        if server is None:
            pytest.skip("redis-server is not installed")
        argv = [server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                "--save", "", "--appendonly", "yes", "--appendfsync", "always"]  # fmt: skip
        log = open(self.dir / "redis.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        import redis

        client = redis.Redis(port=self.port, socket_timeout=1)
        while True:
            try:
                if client.ping():
                    break
            except redis.RedisError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "no redis"
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # with the append-only file flushed
            self.proc.wait(timeout=20)
        self.proc = None


async def test_a_ban_while_the_index_is_down_is_recorded_and_reaches_the_boards(
    tmp_path: Path,
) -> None:
    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    settings = parse(
        {
            "server": {"read_rate_per_s": 0, "page_cache_s": 0},
            "workers": {"idle_sleep_s": 0.01, "lease_s": 1.0},
            "store": {"url": f"sqlite:///{tmp_path}/podium.db"},
            "index": {"url": f"redis://127.0.0.1:{redis_server.port}/0"},
            "boards": [{"name": "all", "window": "all"}],
        }
    )
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            podium = app.state.podium
            _, game = await podium.keys.create("gs", ["default"], False)
            _, admin = await podium.keys.create("admin", [], True)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://podium") as c:
                api = Api(c, app.state.backends, game, admin)
                await _ban_while_down(api, redis_server)
    finally:
        redis_server.stop()


async def _ban_while_down(api: Api, redis_server: PrivateRedis) -> None:
    store = api.backends.store
    assert (await api.submit("m1", [("a", 10), ("b", 5)])).status_code == 200
    await api.settle()

    async def board() -> list[tuple[str, int]]:
        page = await api.page("all")
        return [(e["playerId"], e["points"]) for e in page["entries"]]

    assert await board() == [("a", 10), ("b", 5)]
    redis_server.stop()
    ban = "/v1/admin/players/a/ban"
    for _ in range(2):  # the retry is as safe as the first
        r = await api.client.post(ban, json={"reason": "aimbot"}, headers=api.auth(api.admin_key))
        assert r.status_code == 202, r.text
        body = r.json()
        assert body["playerId"] == "a" and body["banned"] is True
        assert "is recorded" in body["detail"] and "retry is safe" in body["detail"]
        assert await store.banned(["a"]) == {"a"}
    # An unban needs the index first: while it is down, nothing is recorded.
    r = await api.client.delete(ban, headers=api.auth(api.admin_key))
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1, r.text
    assert await store.banned(["a"]) == {"a"}
    # The index comes back with a on it; nobody asks again, and the boards drop them.
    redis_server.start()

    async def dropped() -> bool:
        try:
            return await board() == [("b", 5)]
        except AssertionError:
            return False  # a read while the index's clients reconnect

    assert await api.until(dropped, timeout=90), await board()
    # and the unban, now, restores the totals the store kept
    r = await api.client.delete(ban, headers=api.auth(api.admin_key))
    assert r.status_code == 204, r.text
    await api.settle()
    assert await board() == [("a", 10), ("b", 5)]
