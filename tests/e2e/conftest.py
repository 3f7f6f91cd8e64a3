"""A real ``podium serve`` and Debian's Chromium driven by Playwright.

Chromium comes from the machine (``apt-get install chromium``), never from
``playwright install``. Without it, or without the ``playwright`` package, these tests skip
with the reason on a laptop and fail under ``PODIUM_REQUIRE_SERVICES=1`` (CI).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REQUIRE
from tests.ports import free_port

CHROMIUM = os.environ.get("PODIUM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is ``slow``: a podium process and a browser each."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.slow)


def _missing(what: str) -> None:
    if REQUIRE:
        pytest.fail(f"{what} and PODIUM_REQUIRE_SERVICES=1")
    pytest.skip(what)


@dataclass
class Server:
    url: str
    game_key: str
    admin_key: str
    proc: subprocess.Popen[bytes]
    log: Path
    ops_key: str

    def submit(self, match_id: str, results: list[tuple[str, int]]) -> dict[str, Any]:
        body = {
            "mode": "default",
            "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "durationSeconds": 300,
            "results": [{"playerId": p, "points": n} for p, n in results],
        }
        r = httpx.post(
            f"{self.url}/v1/matches/{match_id}/results",
            json=body,
            headers={"Authorization": f"Bearer {self.game_key}"},
        )
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    def admin(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.url}{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.admin_key}"},
        )

    def ops(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", headers={"Authorization": f"Bearer {self.ops_key}"})

    def on_board(self, player: str, board: str = "week") -> bool:
        """The background updater has put ``player`` on ``board``."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if httpx.get(f"{self.url}/v1/boards/{board}/players/{player}").status_code == 200:
                return True
            time.sleep(0.02)
        return False


def _cli(cfg: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "podium", *args, "--config", str(cfg)],
        cwd=cfg.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip().splitlines()[-1]


def start_server(tmp: Path, *extra: str, config: str = "", backends: str = "") -> Server:
    """``podium serve`` on a free port with its own SQLite file; keys made through the CLI.
    ``config``: more of the settings file (boards, say), after what every server has;
    ``backends``: the ``[store]`` (and ``[index]``) sections instead of the SQLite file."""
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "podium.toml"
    cfg.write_text(
        (backends or f'[store]\nurl = "sqlite:///{tmp}/podium.db"\n')
        + "[server]\nread_rate_per_s = 0\n"
        "[workers]\nidle_sleep_s = 0.005\n" + config
    )
    game = _cli(cfg, "keys", "create", "--name", "e2e-gs", "--modes", "default")
    admin = _cli(cfg, "keys", "create", "--name", "e2e-admin", "--admin")
    ops = _cli(cfg, "keys", "create", "--name", "e2e-ops", "--ops")
    port = free_port()
    log = tmp / "serve.log"
    argv = [sys.executable, "-m", "podium", "serve", "--config", str(cfg), "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*argv, *extra],
            cwd=tmp,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(f"http://127.0.0.1:{port}", game, admin, proc, log, ops)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited during start:\n{log.read_text()}"
        try:
            if httpx.get(f"{server.url}/readyz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    stop_server(server)
    raise AssertionError(f"server did not become ready:\n{log.read_text()}")


def stop_server(server: Server) -> None:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            server.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server(tmp_path_factory.mktemp("e2e"))
    yield s
    stop_server(s)


@pytest.fixture(scope="package")  # closed before the async tests of other packages run
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() or not shutil.which(CHROMIUM):
        _missing(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[test]')")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab; any JavaScript error on it fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def shot(page: Any, name: str, **kwargs: Any) -> None:
    # Animations stopped (a moving board slides rows and flashes gains, and a screenshot
    # waits for frames a loaded machine is slow to paint), and a generous timeout.
    kwargs.setdefault("animations", "disabled")
    kwargs.setdefault("timeout", 120_000)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), **kwargs)
