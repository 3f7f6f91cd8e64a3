"""``podium loadgen`` against a real ``podium serve`` on the embedded default: a few
seconds of load at a low rate, then its JSON summary read: results acknowledged, reads on
every route, no errors, results watched onto the board, and the read-back of every
player's totals in agreement with what the submissions answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Server, start_server, stop_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # No reads shed: the run counts every answer, and a loaded machine's gate shed 6 of them
    # (a 503 the loadgen rightly lists as an error); shedding has tests of its own.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PODIUM_SERVER_SHED_READS", "false")
        s = start_server(tmp_path_factory.mktemp("loadgen"))
    yield s
    stop_server(s)


def test_a_short_run_is_acknowledged_read_seen_on_the_board_and_verified(
    server: Server, tmp_path: Path
) -> None:
    game, admin = tmp_path / "game.key", tmp_path / "admin.key"
    game.write_text(server.game_key)
    admin.write_text(server.admin_key)
    out = tmp_path / "out.json"
    argv = [sys.executable, "-m", "podium", "loadgen", "--api", server.url]
    argv += ["--key-file", str(game), "--admin-key-file", str(admin)]
    argv += ["--players", "40", "--friends-players", "20", "--rate", "4", "--duration", "3s"]
    # Every match watched onto the board, with a deadline no busy machine should reach.
    argv += ["--commit-sample", "1", "--commit-deadline", "60", "--seed", "1"]
    argv += ["--no-live", "--json", str(out), "--verify"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PODIUM_")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    printed = done.stdout + done.stderr
    assert server.game_key not in printed and server.admin_key not in printed
    assert "errors: none" in done.stdout

    summary = json.loads(out.read_text())
    assert summary["results"]["acknowledged"] > 0
    assert summary["matches"]["acknowledged"] == summary["matches"]["sent"] > 0
    assert summary["results"]["acknowledged"] == 2 * summary["matches"]["acknowledged"]
    assert all(n > 0 for n in summary["reads"]["by_route"].values()), summary["reads"]
    assert set(summary["reads"]["by_route"]) == {"top", "rank", "friends"}
    for route in ("submit", "top", "rank", "friends"):
        p = summary["routes"][route]
        assert p["count"] > 0 and p["p50_ms"] <= p["p99_ms"] <= p["p99.9_ms"] <= p["max_ms"]
    assert summary["errors"] == {}
    commit = summary["commit_to_board"]
    assert commit["seen"] > 0 and commit["p50_ms"] is not None, commit
    verify = summary["verify"]
    assert verify["checked"] > 0 and verify["players"] > 0
    assert verify["mismatch_count"] == 0, verify["mismatches"]
    assert summary["settings"]["friends"] is True


def test_verify_fails_a_run_whose_every_match_was_refused(tmp_path: Path) -> None:
    """Issue 33: with every match refused (a 422: the server's only mode takes matches of
    1,000 s or more, the loadgen's last 60 to 900), ``--verify`` had nothing to read back
    and exited 0. A run that was not verified is not a pass: exit 1, saying why."""
    modes = '[[modes]]\nname = "default"\nmin_duration_s = 1000\nmax_duration_s = 2000\n'
    server = start_server(tmp_path / "server", config=modes)
    try:
        game = tmp_path / "game.key"
        game.write_text(server.game_key)
        out = tmp_path / "out.json"
        argv = [sys.executable, "-m", "podium", "loadgen", "--api", server.url]
        argv += ["--key-file", str(game), "--players", "20", "--rate", "4", "--duration", "2s"]
        argv += ["--seed", "1", "--no-live", "--json", str(out), "--verify"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PODIUM_")}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)
    finally:
        stop_server(server)
    summary = json.loads(out.read_text())
    assert summary["matches"]["sent"] > 0 and summary["matches"]["acknowledged"] == 0
    assert summary["errors"] == {"submit": {"422": summary["matches"]["sent"]}}
    assert done.returncode == 1, done.stdout + done.stderr
    verify = summary["verify"]
    assert verify["passed"] is False
    assert any("were not acknowledged" in f for f in verify["failures"]), verify
    assert "verify: FAILED" in done.stdout
