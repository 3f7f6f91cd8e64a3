"""The ops page in Chromium: an ops key, then live charts of the process's figures."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Server, shot
from tests.e2e.test_board import expect

HEADLINE = {
    "podium_results_accepted": "Accepted results /s",
    "podium_commit_to_board_seconds": "Commit to board",
    "podium_read_seconds": "Read latency",
    "podium_outbox_age_seconds": "Outbox age",
    "podium_board_behind_seconds": "Board behind",
    "podium_worker_heartbeat_timestamp": "Updater lag",
}


def traffic(server: Server, stop: threading.Event) -> None:
    """Results and reads a few times a second, so rates and percentiles have something."""
    i = 0
    while not stop.is_set():
        server.submit(f"ops-{i}", [(f"o_{i % 7}", 10), (f"o_{(i + 3) % 7}", 5)])
        httpx.get(f"{server.url}/v1/boards/week?limit=10")
        i += 1
        time.sleep(0.1)


def test_the_ops_page_charts_the_figures_after_an_ops_key(server: Server, page: Any) -> None:
    stop = threading.Event()
    load = threading.Thread(target=traffic, args=(server, stop), daemon=True)
    load.start()
    try:
        page.goto(server.url + "/ops")
        key = page.get_by_label("Ops key")
        expect(key).to_have_attribute("type", "password")
        expect(page.locator(".chart")).to_have_count(0)
        key.fill(server.ops_key)
        page.get_by_role("button", name="Connect").click()
        expect(page.locator("#status")).to_have_attribute("data-state", "live")
        assert page.evaluate("sessionStorage.getItem('podium.opsKey')") == server.ops_key
        expect(key).to_have_value("")  # not left in the field

        charts = page.locator(".chart")
        # The headline charts come first, in order; every other family follows.
        for i, title in enumerate(HEADLINE.values()):
            expect(charts.nth(i).locator("h2")).to_have_text(title)
        for metric in ["podium_changes_applied", "podium_outbox_pending", "podium_accept_seconds"]:
            expect(page.locator(f'.chart[data-metric="{metric}"]')).to_have_count(1)
        # Lines once two polls have given a difference.
        for metric in HEADLINE:
            line = page.locator(f'.chart[data-metric="{metric}"] svg :is(.line, .dot)')
            expect(line.first).to_be_attached(timeout=8000)
        rate = page.locator('.chart[data-metric="podium_results_accepted"] .legend strong')
        expect(rate).to_have_text(re.compile(r"^\d+(\.\d+)?/s$"))
        p99 = page.locator('.chart[data-metric="podium_commit_to_board_seconds"] .legend li')
        expect(p99).to_have_count(2)
        page.wait_for_timeout(2000)  # a few seconds of lines for the screenshot
        shot(page, "ops", full_page=True)
    finally:
        stop.set()
        load.join()

    # The key survives a reload of the tab (sessionStorage), and is forgotten on request.
    page.reload()
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    page.get_by_role("button", name="Forget key").click()
    assert page.evaluate("sessionStorage.getItem('podium.opsKey')") is None


@pytest.mark.parametrize("which", ["game_key", "admin_key"])
def test_a_key_of_another_scope_is_refused(server: Server, page: Any, which: str) -> None:
    page.goto(server.url + "/ops")
    page.get_by_label("Ops key").fill(getattr(server, which))  # only an ops key reads figures
    page.get_by_role("button", name="Connect").click()
    expect(page.locator("#status")).to_have_attribute("data-state", "down")
    expect(page.locator("#status")).to_contain_text("the key was refused")
    assert page.evaluate("sessionStorage.getItem('podium.opsKey')") is None


def test_percentiles_interpolate_within_buckets(server: Server, page: Any) -> None:
    page.goto(server.url + "/ops")
    q = "([q, b]) => podiumOps.quantile(q, b)"
    buckets = [[0.01, 0], [0.1, 50], [1.0, 100], [None, 100]]
    assert page.evaluate(q, [0.5, buckets]) == pytest.approx(0.1)
    assert page.evaluate(q, [0.25, buckets]) == pytest.approx(0.055)
    assert page.evaluate(q, [0.99, buckets]) == pytest.approx(0.982)
    assert page.evaluate(q, [0.99, [[0.5, 1], [None, 10]]]) == 0.5  # past the last bound
    assert page.evaluate(q, [0.5, [[0.5, 0], [None, 0]]]) is None  # nothing observed
