"""A board split by country in Chromium: its tab offers the board's groups with their
players, and the group picked there, or the group of the player looked up, is shown live."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Server, shot, start_server, stop_server
from tests.e2e.test_board import expect

BOARDS = (
    '[[boards]]\nname = "nations"\nwindow = "week"\ngroup_by = "country"\n'
    '[[boards]]\nname = "week"\nwindow = "week"\n'
)
LIVE_MS = 10_000  # generous: the broadcaster reads once a second, behind the updater


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server(tmp_path_factory.mktemp("e2e-country"), config=BOARDS)
    yield s
    stop_server(s)


def countries(server: Server, **of: str) -> None:
    for player, country in of.items():
        r = server.admin("PUT", f"/v1/players/{player}/profile", {"country": country})
        assert r.status_code == 204, r.text


def rows(page: Any) -> list[str]:
    return page.locator("#top-body tr").evaluate_all("rs => rs.map(r => r.dataset.player)")


def test_a_picked_group_is_shown_live(server: Server, page: Any) -> None:
    countries(server, fr_a="FR", fr_b="FR", de_a="DE")
    server.submit("c-1", [("fr_a", 300), ("fr_b", 200), ("de_a", 500)])
    assert server.on_board("fr_b", "nations") and server.on_board("de_a", "nations")

    page.goto(f"{server.url}/#nations")
    expect(page.get_by_role("tab", name="nations")).to_have_attribute("aria-selected", "true")
    group = page.get_by_label("Group", exact=True)
    expect(group).to_be_visible()
    # The board's groups, most players first; the first is shown at once, live.
    expect(group.locator("option")).to_have_text(["FR · 2 players", "DE · 1 player"])
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator("#top-caption")).to_contain_text("@FR")
    expect(page.locator('#top-body tr[data-player="fr_a"]')).to_be_visible()

    group.select_option("DE")
    expect(page.locator("#top-caption")).to_contain_text("@DE")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator('#top-body tr[data-player="de_a"]')).to_be_visible()
    assert rows(page) == ["de_a"]
    assert page.url.endswith("#nations@DE")
    expect(page.locator("#dist-caption")).to_contain_text("1 players on nations")

    # Recorded after the page opened: it comes over the group's stream, and the other
    # group's player of the same match stays off this board.
    countries(server, de_b="DE", fr_c="FR")
    server.submit("c-2", [("de_b", 900), ("fr_c", 50)])
    expect(page.locator('#top-body tr[data-player="de_b"]')).to_be_visible(timeout=LIVE_MS)
    expect(page.locator('#top-body tr[data-player="de_b"]')).to_contain_text("900")
    assert rows(page) == ["de_b", "de_a"]
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    shot(page, "country-board")

    # A board without groups has no group to pick.
    page.get_by_role("tab", name="week").click()
    expect(group).to_be_hidden()
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    expect(page.locator('#top-body tr[data-player="de_b"]')).to_be_visible()


def test_a_player_looked_up_brings_their_own_group(server: Server, page: Any) -> None:
    countries(server, jp_a="JP")
    server.submit("c-3", [("jp_a", 40)])
    assert server.on_board("jp_a", "nations")

    page.goto(f"{server.url}/#nations@FR")  # a link to one group
    expect(page.locator("#top-caption")).to_contain_text("@FR")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")

    page.get_by_label("Player id").fill("jp_a")
    page.get_by_role("button", name="Find").click()
    # Found in their own group, which the page now shows, live.
    expect(page.locator(".rank-text")).to_have_text("1st")
    expect(page.locator("#rank .who-line")).to_contain_text("@JP")
    expect(page.get_by_label("Group", exact=True)).to_have_value("JP")
    expect(page.locator("#top-caption")).to_contain_text("@JP")
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    assert page.url.endswith("#nations@JP")

    countries(server, jp_b="JP")
    server.submit("c-4", [("jp_b", 70)])
    expect(page.locator('#top-body tr[data-player="jp_b"]')).to_be_visible(timeout=LIVE_MS)
    assert rows(page) == ["jp_b", "jp_a"]
    # The player's card follows their board: now second.
    page.get_by_role("button", name="Find").click()
    expect(page.locator(".rank-text")).to_have_text("2nd")
