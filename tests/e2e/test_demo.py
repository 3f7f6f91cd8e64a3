"""A newcomer's first minute: ``podium serve --demo``, then the browser shows a full,
moving board within seconds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Server, shot, start_server, stop_server
from tests.e2e.test_board import expect


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server(Path(tmp_path_factory.mktemp("demo")), "--demo")
    yield s
    stop_server(s)


def test_the_demo_board_fills_and_moves(demo: Server, page: Any) -> None:
    # Reduced motion: the rows change places without sliding, so that a loaded machine's
    # software-rendered browser spends its time on the page's work, not on 100 animations
    # a second (the sliding itself is tested in test_board.py on a board that holds still).
    page.emulate_media(reduced_motion="reduce")
    page.goto(demo.url + "/")
    rows = page.locator("#top-body tr[data-player]")
    expect(rows).to_have_count(100, timeout=10_000)
    expect(rows.first.locator("img.avatar")).to_be_visible()
    before = rows.all_inner_texts()
    page.wait_for_function(
        """(before) => {
            const now = [...document.querySelectorAll('#top-body tr[data-player]')]
                .map(r => r.innerText);
            return now.some((t, i) => t !== before[i]);
        }""",
        arg=before,
        timeout=10_000,
    )
    page.wait_for_timeout(1500)
    shot(page, "demo-board")

    # The first player's name is a button that looks them up: rank, friends, chart. The
    # demo's board never stops moving (rows slide to new places, the top changes hands), so
    # the click is dispatched to the button rather than aimed at where it was a frame ago:
    # a pointer click waits for the row to hold still, which a busy machine may never see.
    rows.first.locator(".player-link").dispatch_event("click")
    # Generous waits: the lookup is three reads, and the demo's writers share the cores.
    expect(page.locator(".rank-text")).to_be_visible(timeout=30_000)
    expect(page.locator("#friends-body tr").first).to_be_visible(timeout=90_000)
    expect(page.locator("#dist-chart line.marker")).to_have_count(1, timeout=90_000)
    page.set_viewport_size({"width": 1280, "height": 1500})
    shot(page, "demo-player")


def test_the_ops_page_during_the_demo(demo: Server, page: Any) -> None:
    # The demo prints, at start, an ops key for its own store: the line after the one
    # naming the ops page.
    lines = demo.log.read_text().splitlines()
    key = lines[next(i for i, x in enumerate(lines) if "/ops takes this key" in x) + 1]
    page.goto(demo.url + "/ops")
    page.get_by_label("Ops key").fill(key)
    page.get_by_role("button", name="Connect").click()
    line = page.locator('.chart[data-metric="podium_results_accepted"] svg .line')
    expect(line).to_have_count(1, timeout=8000)
    page.wait_for_timeout(4000)  # some history for the screenshot
    shot(page, "demo-ops", full_page=True)
