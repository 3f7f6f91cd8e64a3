"""Schedule boards on the board page, in Chromium against a running ``podium serve``: a
countdown to the end of the open window, a schedule's past windows in the picker as the
server lists them, and a board with no window open saying when the next opens."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Server, shot, start_server, stop_server
from tests.e2e.test_board import expect

DAY = 86_400
# "daily": a window every UTC day, open all day, taking late results for two days, so that
# yesterday's window (closed) can still be played in. "newyear": one minute a year, so
# closed whenever this runs (but in the first minute of a year).
CONFIG = """
[[boards]]
name = "daily"
window = "schedule"
schedule = "0 0 * * *"
duration_s = 86400
freeze_after_s = 172800

[[boards]]
name = "newyear"
window = "schedule"
schedule = "0 0 1 1 *"
duration_s = 60
"""


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server(tmp_path_factory.mktemp("e2e-schedule"), config=CONFIG)
    yield s
    stop_server(s)


def _submit(server: Server, match_id: str, ended_at: float, player: str) -> None:
    body = {
        "mode": "default",
        "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended_at)),
        "durationSeconds": 60,
        "results": [{"playerId": player, "points": 10}],
    }
    r = httpx.post(
        f"{server.url}/v1/matches/{match_id}/results",
        json=body,
        headers={"Authorization": f"Bearer {server.game_key}"},
    )
    assert r.status_code == 200, r.text


def test_a_countdown_and_a_schedules_past_windows(scheduled: Server, page: Any) -> None:
    now = time.time()
    today = time.strftime("%Y%m%dT0000", time.gmtime(now))
    yesterday = time.strftime("%Y%m%dT0000", time.gmtime(now - DAY))
    _submit(scheduled, "y", now - DAY, "late_one")
    _submit(scheduled, "t", now, "today_one")
    assert scheduled.on_board("today_one", "daily")

    page.goto(f"{scheduled.url}/#daily")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("#countdown")).to_have_text(
        re.compile(r"^live window ends in (\d+ h \d+ min|\d+ min|under a minute)$")
    )
    options = page.locator("#window option")
    expect(options).to_have_count(2)  # today's, and yesterday's from the server's list
    assert options.nth(0).inner_text() == f"{today} (live)"
    assert options.nth(1).get_attribute("value") == yesterday
    page.get_by_label("Window").select_option(yesterday)
    expect(page.locator("#status")).to_have_attribute("data-state", "past")
    expect(page.locator("#top-body")).to_contain_text("late_one")
    shot(page, "schedule-board")

    page.get_by_role("tab", name="newyear").click()
    expect(page.locator("#status")).to_have_attribute("data-state", "idle")
    expect(page.locator("#top-body")).to_contain_text("No window is open: the next opens")
    expect(page.locator("#countdown")).to_have_text(
        re.compile(r"^next window opens in \d+ (d|h|min)")
    )
    assert page.locator("#window option").nth(0).inner_text() == "none open"

    got = page.evaluate(
        """async () => {
            const w = await import('/static/windows.js');
            const listed = [{id: '20261211T1800'}, {id: '20261204T1800'}, {id: '20261127T1800'}];
            return [
                w.scheduledBefore('20261211T1800', listed, 2),
                w.scheduledBefore(null, listed, 6),
                w.countdown((2 * 24 + 4) * 3600e3 + 59e3),
                w.countdown((3 * 60 + 12) * 60e3),
                w.countdown(12 * 60e3 + 5e3),
                w.countdown(30e3),
                w.countdown(-5e3),
            ];
        }"""
    )
    assert got == [
        ["20261211T1800", "20261204T1800"],
        ["20261211T1800", "20261204T1800", "20261127T1800"],
        "2 d 4 h",
        "3 h 12 min",
        "12 min",
        "under a minute",
        "under a minute",
    ]
