"""The server process of the third probe (issue 33), on a real ``podium serve``: a bad store,
index or log URL stops the start with one line that names the setting and the bad value and
never repeats the URL's password (a malformed port was a 200-line traceback)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.ports import free_port

SECRET = "s3cretpw"
PG = f"postgresql://u:{SECRET}@127.0.0.1"
USER = f"u:{SECRET}@"


def _url(section: str, url: str) -> str:
    return f'[{section}]\nurl = "{url}"\n'


def _serve(
    tmp: Path, toml: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cfg = tmp / "podium.toml"
    cfg.write_text(toml)
    argv = [sys.executable, "-m", "podium", "serve", "--config", str(cfg)]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PODIUM_")}
    return subprocess.run(
        [*argv, "--port", str(free_port())],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
    )


@pytest.mark.parametrize(
    ("toml", "env", "says"),
    [
        (f'[store]\nurl = "{PG}:bad/db"\n', {}, ["store.url", "'bad'"]),
        (f'[store]\nurl = "{PG}:99999/db"\n', {}, ["store.url", "'99999'"]),
        (f'[store]\nurl = "{PG}:5432,127.0.0.1:x1/db"\n', {}, ["store.url", "'x1'"]),
        (f'[store]\nurl = "mysql://u:{SECRET}@h/db"\n', {}, ["store.url", "mysql://u:***@h/db"]),
        (f'store = "{PG}/db"\n', {}, ["store", "expected a table"]),
        (
            f'[store]\nurl = "{PG}/home"\nshards = ["{PG}:bad/p1"]\n',
            {},
            ["store.shards[0]", "'bad'"],
        ),
        (
            f'[store]\nurl = "{PG}/home"\nshards = ["mysql://u:{SECRET}@h/p1"]\n',
            {},
            ["store.shards[0]", "postgresql://"],
        ),
        (_url("index", f"redis://{USER}127.0.0.1:bad/0"), {}, ["index.url", "'bad'"]),
        (_url("index", f"redis://{USER}127.0.0.1/zz"), {}, ["index.url", "'zz'"]),
        (_url("index", f"redis+cluster://{USER}h:7000,h:bad"), {}, ["index.url", "'bad'"]),
        (_url("log", f"nats://{USER}127.0.0.1:bad"), {}, ["log.url", "'bad'"]),
        ("", {"PODIUM_INDEX_URL": f"redis://u:{SECRET}@127.0.0.1:70000"}, ["index.url", "70000"]),
    ],
)
def test_a_bad_url_stops_serve_in_one_line_without_its_password(
    tmp_path: Path, toml: str, env: dict[str, str], says: list[str]
) -> None:
    done = _serve(tmp_path, toml, env)
    printed = done.stdout + done.stderr
    assert done.returncode == 2, printed
    assert "Traceback" not in printed and SECRET not in printed, printed
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, printed
    assert lines[0].startswith("podium: configuration error: "), lines[0]
    for said in says:
        assert said in lines[0], lines[0]


def test_several_bad_values_are_a_line_each(tmp_path: Path) -> None:
    toml = f'[store]\nurl = "{PG}:bad/db"\n[server]\nport = 0\n[log]\nurl = "nats://h:-1"\n'
    done = _serve(tmp_path, toml)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    named = [line.removeprefix("podium: configuration error: ").split(":")[0] for line in lines]
    assert named == [
        "server.port",
        "store.url",
        "log.url",
    ], lines
    assert SECRET not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('[server]\nread_limiter = "redis"\n', "server.read_limiter: redis needs index.url"),
        (_url("index", "redis+cluster://h:7000/1"), "index.url: Redis Cluster has only database 0"),
    ],
)
def test_a_setting_bootstrap_refuses_is_said_before_the_start(
    tmp_path: Path, toml: str, says: str
) -> None:
    """Refused by the wiring, not the file's checks: said in one line all the same, not as a
    traceback from inside uvicorn's failed start."""
    done = _serve(tmp_path, toml)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"podium: configuration error: {says}"), lines


async def test_a_nats_log_that_cannot_connect_is_named_without_its_password() -> None:
    """The log's outage says which server it tried (it goes to the log and to podium
    status), not the password in its URL."""
    from podium.errors import PodiumError
    from podium.log.nats.log import NatsLog
    from podium.ports import SystemClock

    log = NatsLog.from_url(f"nats://{USER}127.0.0.1:{free_port()}", "probe", SystemClock())
    with pytest.raises(PodiumError) as caught:
        await log._connect()
    assert "u:***@127.0.0.1" in str(caught.value) and SECRET not in str(caught.value)


# -- connections: idle ones closed, half-sent requests cut off, a cap per process -----------


def _closed(sock: socket.socket, within_s: float) -> bytes:
    """What the server sent on ``sock`` before it closed it (b"" for nothing), waiting up to
    ``within_s``; fails if it is still open by then."""
    sock.settimeout(within_s)
    got = b""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return got
        except TimeoutError:
            break
        if not chunk:
            return got
        got += chunk
    raise AssertionError(f"still open after {within_s} s; sent {got!r}")


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


@contextlib.contextmanager
def _running(tmp: Path, server: str) -> Iterator[tuple[int, str]]:
    """``podium serve`` on the embedded store with ``server`` in its [server] section; its
    port and a game server's key."""
    cfg = tmp / "podium.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp}/podium.db"\n[server]\n{server}\n')
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PODIUM_")}
    argv = [sys.executable, "-m", "podium"]
    made = subprocess.run(
        [*argv, "keys", "create", "--name", "gs", "--modes", "default", "--config", str(cfg)],
        capture_output=True, text=True, check=True, timeout=60, env=clean,
    )  # fmt: skip
    key = made.stdout.strip().splitlines()[-1]
    port = free_port()
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [*argv, "serve", "--config", str(cfg), "--port", str(port)],
        cwd=tmp, stdout=log, stderr=subprocess.STDOUT, env=clean,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp / "serve.log").read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, (tmp / "serve.log").read_text()
            time.sleep(0.1)
        yield port, key
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _result(client: httpx.Client, key: str, match: str) -> httpx.Response:
    body = {"mode": "default", "endedAt": _now(), "durationSeconds": 300}
    body["results"] = [{"playerId": "a", "points": 5}]
    headers = {"Authorization": f"Bearer {key}"}
    return client.post(f"/v1/matches/{match}/results", json=body, headers=headers)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@pytest.mark.slow
def test_idle_and_half_sent_connections_are_closed(tmp_path: Path) -> None:
    """A connection that never sends a request was held for ever, and so was one that
    sends half a request; now the first is closed after ``idle_timeout_s`` and the second
    after ``request_timeout_s`` (a 408 where nothing had been answered), while a client that
    keeps to the times is served on its connection."""
    with _running(tmp_path, "idle_timeout_s = 1\nrequest_timeout_s = 2") as (port, key):
        silent = _connect(port)
        started = time.monotonic()
        assert _closed(silent, within_s=60) == b""
        assert time.monotonic() - started >= 0.9  # not at once: after the idle time

        headers_half = _connect(port)
        headers_half.sendall(b"GET /v1/boards HTTP/1.1\r\nHost: x\r\n")  # no blank line
        started = time.monotonic()
        said = _closed(headers_half, within_s=60)
        assert said.startswith(b"HTTP/1.1 408 "), said
        assert time.monotonic() - started >= 1.5
        # Trickled a byte at a time, as slowloris does: each byte restarted no clock.
        trickle = _connect(port)
        trickle.sendall(b"G")
        started = time.monotonic()
        with contextlib.suppress(OSError):
            for byte in b"ET /v1/boards HTTP/1.1\r\nHost: x\r\nX-A: b\r\n":
                time.sleep(0.2)
                trickle.sendall(bytes([byte]))
                if time.monotonic() - started > 30:
                    break
        assert time.monotonic() - started < 30, "the trickle was never cut off"
        assert _closed(trickle, within_s=60).startswith(b"HTTP/1.1 408 ")

        body_half = _connect(port)
        head = f"POST /v1/matches/m-half/results HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}"
        body_half.sendall(
            f"{head}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{{".encode()
        )
        _closed(body_half, within_s=60)

        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            assert _result(client, key, "m-whole").status_code == 200
            assert _result(client, key, "m-whole-2").status_code == 200  # the same connection
            # The half-sent match recorded nothing: its id is free.
            assert _result(client, key, "m-half").json()["players"][0]["totals"]["week"] == 15


@pytest.mark.slow
def test_past_the_connection_cap_a_new_connection_gets_503_and_results_go_through(
    tmp_path: Path,
) -> None:
    cap = 6
    limits = f"max_connections = {cap}\nidle_timeout_s = 60"
    with (
        _running(tmp_path, limits) as (port, key),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as game_server,
    ):
        assert _result(game_server, key, "m0").status_code == 200  # its connection open
        held = [_connect(port) for _ in range(cap - 1)]
        for s in held:  # each accepted and still open: the server has them all
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
        one_more = _connect(port)
        said = _closed(one_more, within_s=60)
        assert said.startswith(b"HTTP/1.1 503 "), said
        assert b"retry-after: " in said.lower() and b"application/problem+json" in said
        # The game server's connection still carries results, at the cap.
        for n in range(1, 4):
            r = _result(game_server, key, f"m{n}")
            assert r.status_code == 200, r.text
        # A connection closed makes room for a new one.
        held.pop().close()
        deadline = time.monotonic() + 60
        while True:
            with (
                httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as other,
                contextlib.suppress(httpx.TransportError),
            ):
                if other.get("/healthz").status_code == 200:
                    break
            assert time.monotonic() < deadline, "no room after a connection closed"
            time.sleep(0.1)
        for s in held:
            s.close()
