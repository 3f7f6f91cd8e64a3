"""The server process of the third probe (issue 33), on a real ``podium serve``: a bad store,
index or log URL stops the start with one line that names the setting and the bad value and
never repeats the URL's password (a malformed port was a 200-line traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    from podium.log.nats import NatsLog
    from podium.ports import SystemClock

    log = NatsLog.from_url(f"nats://{USER}127.0.0.1:{free_port()}", "probe", SystemClock())
    with pytest.raises(PodiumError) as caught:
        await log._connect()
    assert "u:***@127.0.0.1" in str(caught.value) and SECRET not in str(caught.value)
