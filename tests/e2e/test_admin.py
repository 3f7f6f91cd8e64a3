"""The admin console (``/admin``) in Chromium against a real ``podium serve``: each task a
moderator or operator does, end to end, checked against what the API holds afterwards; the
key kept in the tab only; hostile names and metadata shown as text with no script run; an
ops key read-only, a game server's key refused; every view checked with axe-core."""

from __future__ import annotations

import base64
import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.conftest import REDIS_URL, _in_a_thread, need
from tests.e2e.conftest import Server, start_server, stop_server
from tests.e2e.test_board import expect
from tests.moments import earlier_today
from tests.ports import free_port

# Planted where a careless page would run them: as HTML, inside a script, in an attribute.
HOSTILE_NAME = "<img src=x onerror=pwned=1>"  # a name is at most 32 characters
HOSTILE_META = {
    "note": "</script><script>window.pwned=2</script>",
    "q": "\"'><svg onload=window.pwned=3>",
}
HOSTILE_KEY = "a\"key'<b onmouseover=window.pwned=4>"
SECRET = "whsec_" + base64.b64encode(b"console-tests-secret").decode()
WRITES = re.compile(
    r"^(Ban|Unban|Create key|Create tournament|Retry|End now|Freeze…|Revoke…|Reject…|Accept…"
    r"|Export data|Erase player)$"
)
VIEWS = ["players", "review", "keys", "boards", "tournaments", "webhooks"]


@pytest.fixture(scope="module", params=["embedded", "production"])
def backends(request: pytest.FixtureRequest) -> Iterator[str]:
    """The ``[store]`` and ``[index]`` of the server: none (SQLite and the in-process index),
    or a database of its own on the tests' Postgres and a key prefix of its own on Redis."""
    if request.param == "embedded":
        yield ""
        return
    need(REDIS_URL, "Redis")
    databases = request.getfixturevalue("postgres_server")
    need(databases.admin_url, "PostgreSQL")
    [url] = _in_a_thread(lambda: databases.take(1))
    prefix = f"podium-console-{secrets.token_hex(4)}"
    try:
        yield f'[store]\nurl = "{url}"\n[index]\nurl = "{REDIS_URL}"\nprefix = "{prefix}"\n'
    finally:
        _in_a_thread(lambda: databases.give_back([url]))
        client = redis.Redis.from_url(REDIS_URL)
        try:
            for key in client.scan_iter(match=f"{prefix}:*", count=1000):
                client.delete(key)
        finally:
            client.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backends: str) -> Iterator[Server]:
    # Nothing listens at the webhook's port: every delivery fails, given up after a second.
    config = f"""
[[boards]]
name = "week"
window = "week"
[[boards]]
name = "day"
window = "day"
[[boards]]
name = "sprint"
window = "day"
[[boards]]
name = "ladder"
window = "week"
cohort_size = 30
tiers = ["bronze", "silver", "gold"]
promote = 5
demote = 5

[[webhooks]]
url = "http://127.0.0.1:{free_port()}/hook"
secret = "{SECRET}"
events = ["player.banned", "player.flagged", "window.frozen"]
retry_for_s = 1.0
retry_first_s = 0.05
timeout_s = 2.0
"""
    # An erasure's last sweep comes half a second after the rest, not a quarter of a minute.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PODIUM_WORKERS_ERASURE_SETTLE_S", "0.5")
        s = start_server(tmp_path_factory.mktemp("admin"), config=config, backends=backends)
    yield s
    stop_server(s)


def shot(page: Any, tmp_path: Path, name: str) -> None:
    """A screenshot of the whole page in the test's own directory (never committed)."""
    page.screenshot(
        path=str(tmp_path / f"{name}.png"), full_page=True, animations="disabled", timeout=120_000
    )


def axe(page: Any) -> None:
    """No critical or serious accessibility violation on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    bad = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in results.response["violations"]
        if v["impact"] in ("critical", "serious")
    ]
    assert not bad, f"axe-core: {bad}"


def sign_in(page: Any, server: Server, key: str) -> None:
    page.goto(server.url + "/admin")
    page.get_by_label("Admin key").fill(key)
    page.get_by_role("button", name="Sign in").click()


def signed_in(page: Any, server: Server, key: str) -> None:
    sign_in(page, server, key)
    expect(page.locator("#status")).to_have_attribute("data-state", "live")


def open_view(page: Any, name: str) -> None:
    page.locator(f'#views button[data-view="{name}"]').click()
    expect(page.locator("#view")).to_have_attribute("data-view", name)


def alert(page: Any) -> Any:
    return page.locator("#alert")


def notice(page: Any) -> Any:
    return page.locator("#notice")


def submit(
    server: Server, match_id: str, results: list[dict[str, Any]], ended: float | None = None
) -> None:
    body = {
        "mode": "default",
        "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended or time.time())),
        "durationSeconds": 300,
        "results": results,
    }
    r = httpx.post(
        f"{server.url}/v1/matches/{match_id}/results",
        json=body,
        headers={"Authorization": f"Bearer {server.game_key}"},
    )
    assert r.status_code == 200, r.text


def ok(r: httpx.Response) -> Any:
    assert r.is_success, r.text
    return r.json() if r.content else None


# -- signing in ------------------------------------------------------------------------------


def test_the_key_is_kept_in_this_tab_only_and_the_page_is_locked_down(
    server: Server, page: Any, tmp_path: Path
) -> None:
    r = httpx.get(server.url + "/admin")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert (
        r.headers["cache-control"] == "no-store" and r.headers["referrer-policy"] == "no-referrer"
    )
    page.goto(server.url + "/admin")
    expect(page.get_by_label("Admin key")).to_have_attribute("type", "password")
    axe(page)
    shot(page, tmp_path, "sign-in")
    signed_in(page, server, server.admin_key)
    expect(page.locator("#who")).to_contain_text("admin key")
    expect(page.get_by_label("Admin key")).to_have_value("")
    assert page.evaluate("sessionStorage.getItem('podium.console.key')") == server.admin_key
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    assert server.admin_key not in page.url
    page.reload()  # the tab keeps the key
    expect(page.locator("#status")).to_have_attribute("data-state", "live")
    page.get_by_role("button", name="Sign out").click()
    assert page.evaluate("sessionStorage.getItem('podium.console.key')") is None
    expect(page.get_by_label("Admin key")).to_be_visible()


def test_a_game_server_key_and_an_unknown_key_are_refused_in_words(
    server: Server, page: Any
) -> None:
    sign_in(page, server, server.game_key)
    expect(alert(page)).to_contain_text("game server's key")
    expect(page.locator("#views")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('podium.console.key')") is None
    sign_in(page, server, "not-a-key")
    expect(alert(page)).to_contain_text("(401)")
    expect(alert(page)).to_contain_text("unknown or revoked")
    expect(page.locator("#views")).to_be_hidden()


def test_a_key_revoked_mid_session_signs_the_console_out_in_words(
    server: Server, page: Any
) -> None:
    made = ok(server.admin("POST", "/v1/admin/keys", {"name": "short-lived", "scope": "admin"}))
    signed_in(page, server, made["secret"])
    open_view(page, "keys")
    ok(server.admin("DELETE", f"/v1/admin/keys/{made['id']}"))
    open_view(page, "players")
    page.get_by_label("Player id or name").fill("anyone")
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#status")).to_have_attribute("data-state", "idle")
    expect(alert(page)).to_contain_text("(401)")
    expect(page.get_by_label("Admin key")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('podium.console.key')") is None


# -- players ---------------------------------------------------------------------------------


def test_a_moderator_finds_a_player_sees_their_file_and_bans_then_unbans(
    server: Server, page: Any, tmp_path: Path
) -> None:
    ok(server.admin("PUT", "/v1/players/mod_1/profile", {"name": "Marlow"}))
    submit(
        server,
        "mod-m1",
        [
            {"playerId": "mod_1", "points": 70, "metadata": {"car": "mx5", "lap": 61.2}},
            {"playerId": "mod_2", "points": 20},
        ],
    )
    assert server.on_board("mod_1")
    signed_in(page, server, server.admin_key)
    open_view(page, "players")
    page.get_by_label("Player id or name").fill("marl")
    page.get_by_role("button", name="Find").click()
    page.get_by_role("button", name="Marlow").click()
    expect(page.locator("#player-title")).to_have_text("Marlow · mod_1")
    file_ = page.locator("#view")
    expect(file_).to_contain_text('{"car":"mx5","lap":61.2}')
    boards = page.locator("section", has=page.get_by_role("heading", name="Boards now"))
    expect(boards.locator("tr", has_text="week")).to_contain_text("70")
    axe(page)
    shot(page, tmp_path, "player")

    ban = page.locator("section", has=page.get_by_role("heading", name="Ban"))
    expect(ban).to_contain_text("They leave these boards at once: week")
    ban.get_by_label("Reason (kept with the ban)").fill("aimbot, match mod-m1")
    go = ban.get_by_role("button", name="Ban")
    expect(go).to_be_disabled()
    ban.get_by_label("Type mod_1 to confirm").fill("mod_")
    expect(go).to_be_disabled()
    ban.get_by_label("Type mod_1 to confirm").fill("mod_1")
    expect(go).to_be_enabled()
    go.click()
    expect(notice(page)).to_contain_text("mod_1 is banned")
    expect(page.locator("#view")).to_contain_text("aimbot, match mod-m1")
    held = ok(server.admin("GET", "/v1/admin/players/mod_1"))
    assert held["banned"] is True and held["ban"]["reason"] == "aimbot, match mod-m1"
    assert httpx.get(f"{server.url}/v1/boards/week/players/mod_1").status_code == 404

    unban = page.locator("section", has=page.get_by_role("heading", name="Unban"))
    unban.get_by_label("Type mod_1 to confirm").fill("mod_1")
    unban.get_by_role("button", name="Unban").click()
    expect(notice(page)).to_contain_text("mod_1 is unbanned")
    assert ok(server.admin("GET", "/v1/admin/players/mod_1"))["banned"] is False
    assert server.on_board("mod_1")


def test_a_players_data_is_exported_as_a_json_file_named_after_them(
    server: Server, page: Any, tmp_path: Path
) -> None:
    submit(
        server,
        "exp-m1",
        [
            {"playerId": "exp_1", "points": 41, "metadata": {"car": "gt86"}},
            {"playerId": "exp_2", "points": 5},
        ],
    )
    submit(server, "exp-m2", [{"playerId": "exp_1", "points": 12}])
    assert server.on_board("exp_1")
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    signed_in(page, server, server.admin_key)
    page.goto(f"{server.url}/admin#players/exp_1")
    expect(page.locator("#player-title")).to_have_text("exp_1")
    box = page.locator("section", has=page.get_by_role("heading", name="Export data"))
    with page.expect_download() as got:
        box.get_by_role("button", name="Export data").click()
    download = got.value
    assert download.suggested_filename == "exp_1.json"
    data = json.loads(Path(download.path()).read_text())
    assert data["format"] == "podium.player-export/1" and data["playerId"] == "exp_1"
    assert data["erased"] is False
    results = {r["matchId"]: r for r in data["results"]}
    assert set(results) == {"exp-m1", "exp-m2"}
    assert results["exp-m1"]["points"] == 41 and results["exp-m1"]["metadata"] == {"car": "gt86"}
    assert results["exp-m2"]["points"] == 12
    expect(notice(page)).to_contain_text("exp_1's data is saved as exp_1.json")
    assert not [u for u in urls if server.admin_key in u]  # the key never in a URL
    axe(page)
    shot(page, tmp_path, "player-export")


def test_an_erasure_needs_the_players_id_typed_is_polled_until_done_and_the_player_is_gone(
    server: Server, page: Any, tmp_path: Path
) -> None:
    ok(server.admin("PUT", "/v1/players/er_1/profile", {"name": "Erin"}))
    submit(
        server, "er-m1", [{"playerId": "er_1", "points": 60}, {"playerId": "er_2", "points": 30}]
    )
    assert server.on_board("er_1") and server.on_board("er_2")
    signed_in(page, server, server.admin_key)
    page.goto(f"{server.url}/admin#players/er_1")
    expect(page.locator("#player-title")).to_have_text("Erin · er_1")
    erase = page.locator("section", has=page.get_by_role("heading", name="Erase player"))
    expect(erase).to_contain_text("cannot be undone")
    expect(erase).to_contain_text("pseudonym")
    go = erase.get_by_role("button", name="Erase player")
    typed = erase.get_by_label("Type er_1 to confirm")
    for wrong in ("er_", "er_2", "ER_1"):
        typed.fill(wrong)
        expect(go).to_be_disabled()
    typed.press("Enter")  # the form sent with the wrong id: nothing is asked
    axe(page)
    shot(page, tmp_path, "erase-confirm")
    page.wait_for_timeout(500)
    expect(page.locator("#erasure")).to_have_count(0)
    assert ok(server.admin("GET", "/v1/admin/players/er_1"))["name"] == "Erin"
    assert httpx.get(f"{server.url}/v1/boards/week/players/er_1").status_code == 200

    typed.fill("er_1")
    expect(go).to_be_enabled()
    go.click()
    expect(notice(page)).to_contain_text("er_1's erasure is asked: receipt era_")
    state = page.locator("#erasure-state")
    expect(state).to_have_attribute("data-state", "done", timeout=60_000)
    expect(state).to_have_text("Done: er_1 is gone from podium.")
    expect(notice(page)).to_contain_text("er_1 is erased")
    receipt = page.locator("#erasure dd").first.inner_text()
    assert re.fullmatch(r"era_[0-9a-f]{24}", receipt)
    held = ok(server.admin("GET", f"/v1/admin/erasures/{receipt}"))
    assert held["state"] == "done" and held["step"] == "done"
    assert held["counts"]["results"] == 1 and held["counts"]["profile"] == 1
    expect(page.locator("#erasure tr", has_text="results")).to_contain_text("1")
    # The file shown before is gone from the page: no stale profile, ban or export.
    expect(page.locator("#player-title")).to_have_count(0)
    expect(page.get_by_role("button", name="Export data")).to_have_count(0)
    axe(page)
    shot(page, tmp_path, "erase-done")

    # The API holds nothing of them: no rank, no file, an empty export marked erased.
    assert httpx.get(f"{server.url}/v1/boards/week/players/er_1").status_code == 404
    assert server.admin("GET", "/v1/admin/players/er_1").status_code == 404
    export = ok(server.admin("GET", "/v1/admin/players/er_1/export"))
    assert export["erased"] is True and export["results"] == [] and export["profile"] == []
    assert ok(httpx.get(f"{server.url}/v1/boards/week/players/er_2"))["points"] == 30
    # A later result for them is refused whole, in the API's words.
    late = httpx.post(
        f"{server.url}/v1/matches/er-m2/results",
        json={
            "mode": "default",
            "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "durationSeconds": 300,
            "results": [{"playerId": "er_1", "points": 5}, {"playerId": "er_2", "points": 5}],
        },
        headers={"Authorization": f"Bearer {server.game_key}"},
    )
    assert late.status_code == 403 and late.json()["title"] == "Player erased"
    # Their page now finds nothing.
    page.get_by_role("button", name="Open their page again").click()
    expect(alert(page)).to_have_text(
        "Not found (404): no player er_1 is known: no profile, result or ban"
    )
    expect(
        page.locator("section", has=page.get_by_role("heading", name="Erase player"))
    ).to_have_count(0)
    shot(page, tmp_path, "erased-player")


def test_an_export_or_erasure_the_api_refuses_is_shown_in_words(
    server: Server, page: Any, tmp_path: Path
) -> None:
    submit(server, "ref-m1", [{"playerId": "ref_1", "points": 8}])
    assert server.on_board("ref_1")
    signed_in(page, server, server.admin_key)
    page.goto(f"{server.url}/admin#players/ref_1")
    expect(page.locator("#player-title")).to_have_text("ref_1")

    def refused(status: int, title: str, detail: str) -> Any:
        problem = {"type": "about:blank", "title": title, "status": status, "detail": detail}
        return lambda route: route.fulfill(
            status=status, content_type="application/problem+json", body=json.dumps(problem)
        )

    # What the API would answer, played by the browser: the page says it in words.
    page.route("**/v1/admin/players/ref_1/export", refused(500, "Internal error", "disk full"))
    page.get_by_role("button", name="Export data").click()
    expect(alert(page)).to_have_text("Internal error (500): disk full")
    page.route(
        "**/v1/admin/players/ref_1",
        refused(503, "Busy", "podium is shedding load; nothing was recorded"),
    )
    erase = page.locator("section", has=page.get_by_role("heading", name="Erase player"))
    erase.get_by_label("Type ref_1 to confirm").fill("ref_1")
    erase.get_by_role("button", name="Erase player").click()
    expect(alert(page)).to_have_text("Busy (503): podium is shedding load; nothing was recorded")
    expect(page.locator("#erasure")).to_have_count(0)
    expect(page.locator("#player-title")).to_have_text("ref_1")
    shot(page, tmp_path, "erase-refused")
    page.unroute("**/v1/admin/players/ref_1")
    assert ok(server.admin("GET", "/v1/admin/players/ref_1"))["playerId"] == "ref_1"


def test_the_review_queue_lists_a_flagged_result(server: Server, page: Any, tmp_path: Path) -> None:
    # Steady results, then a jump far above them: flagged (counted, not refused).
    for i, at in enumerate(earlier_today(5)):  # the history the jump rule needs
        submit(server, f"rv-{i}", [{"playerId": "rv_1", "points": 10}], ended=at)
    submit(server, "rv-jump", [{"playerId": "rv_1", "points": 900_000}])
    flagged = ok(server.admin("GET", "/v1/admin/review?board=week"))["flagged"]
    assert [f["matchId"] for f in flagged if f["playerId"] == "rv_1"] == ["rv-jump"]
    signed_in(page, server, server.admin_key)
    open_view(page, "review")
    row = page.locator("tr", has_text="rv-jump")
    expect(row).to_contain_text("900,000")
    axe(page)
    shot(page, tmp_path, "review")
    row.get_by_role("button", name="rv_1", exact=True).click()
    expect(page.locator("#player-title")).to_have_text("rv_1")
    expect(page.locator("tr", has_text="rv-jump")).to_contain_text("900,000")
    expect(page.locator("#view")).to_contain_text("1 flagged for review")
    # Accepted after a look: what it changes is said first; it leaves the queue, still counted.
    before = ok(httpx.get(f"{server.url}/v1/boards/week/players/rv_1"))["points"]
    open_view(page, "review")
    page.get_by_role("button", name="Accept rv-jump of rv_1").click()
    expect(page.locator("#accept-panel")).to_contain_text("changes no total: rv_1 stays at rank")
    page.locator("#accept-panel").get_by_role("button", name="Accept", exact=True).click()
    expect(notice(page)).to_contain_text("rv-jump of rv_1 is accepted")
    expect(page.locator("tr", has_text="rv-jump")).to_have_count(0)
    flagged = ok(server.admin("GET", "/v1/admin/review?board=week"))["flagged"]
    assert [f for f in flagged if f["playerId"] == "rv_1"] == []
    assert ok(httpx.get(f"{server.url}/v1/boards/week/players/rv_1"))["points"] == before
    [jump] = [
        r
        for r in ok(server.admin("GET", "/v1/admin/players/rv_1"))["results"]
        if r["matchId"] == "rv-jump"
    ]
    assert jump["acceptedAt"] and jump["flag"].startswith("jump")


def test_a_rejected_flag_is_explained_confirmed_and_its_points_leave_every_board(
    server: Server, page: Any, tmp_path: Path
) -> None:
    for i, at in enumerate(earlier_today(5)):  # the history the jump rule needs, then a jump
        submit(server, f"rj-{i}", [{"playerId": "rj_1", "points": 10}], ended=at)
    jump, ended = {"playerId": "rj_1", "points": 900_000}, time.time()
    submit(server, "rj-jump", [jump], ended=ended)
    submit(server, "rj-rival", [{"playerId": "rj_2", "points": 800_000}])
    assert server.on_board("rj_2")
    week = f"{server.url}/v1/boards/week/players/rj_1"
    before = ok(httpx.get(week))
    assert before["points"] >= 900_000
    signed_in(page, server, server.admin_key)
    open_view(page, "review")
    page.get_by_role("button", name="Reject rj-jump of rj_1").click()
    panel = page.locator("#reject-panel")
    # Said first: the points each board loses, and the rank it drops to on this one.
    row = panel.locator("tr", has=page.get_by_role("cell", name="week", exact=True))
    expect(row).to_contain_text("-900,000")
    expect(row).to_contain_text(f"{before['points']:,}")
    expect(row).to_contain_text(f"{before['points'] - 900_000:,}")
    top = ok(httpx.get(f"{server.url}/v1/boards/week?limit=50"))["entries"]
    ahead = [e for e in top if e["playerId"] != "rj_1" and e["points"] > before["points"] - 900_000]
    expect(row).to_contain_text(f"about {len(ahead) + 1}")  # below the rival at least
    assert len(ahead) >= 1
    expect(
        panel.locator("tr", has=page.get_by_role("cell", name="day", exact=True))
    ).to_contain_text("-900,000")
    # Asking changed nothing.
    assert ok(httpx.get(week))["points"] == before["points"]
    axe(page)
    shot(page, tmp_path, "reject")
    go = panel.get_by_role("button", name="Reject", exact=True)
    expect(go).to_be_disabled()
    panel.get_by_label("Type rj_1 to confirm").fill("rj_1")
    go.click()
    expect(notice(page)).to_contain_text("rj-jump of rj_1 is rejected")
    expect(page.locator("tr", has_text="rj-jump")).to_have_count(0)
    # The API afterwards: every board lowered (below the rival), the store equal to the board.
    deadline = time.monotonic() + 10
    while ok(httpx.get(week))["points"] != before["points"] - 900_000:
        assert time.monotonic() < deadline, "the board was not lowered"
        time.sleep(0.05)
    after = ok(httpx.get(week))
    assert after["rank"] > ok(httpx.get(f"{server.url}/v1/boards/week/players/rj_2"))["rank"]
    # A retry of the match answers the store's totals: the board's, on every board.
    r = httpx.post(
        f"{server.url}/v1/matches/rj-jump/results",
        json={
            "mode": "default",
            "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended)),
            "durationSeconds": 300,
            "results": [jump],
        },
        headers={"Authorization": f"Bearer {server.game_key}"},
    )
    [totals] = [x["totals"] for x in ok(r)["players"]]
    for board, total in totals.items():
        held = ok(httpx.get(f"{server.url}/v1/boards/{board}/players/rj_1"))["points"]
        assert held == total, (board, held, total)
    [res] = [
        x
        for x in ok(server.admin("GET", "/v1/admin/players/rj_1"))["results"]
        if x["matchId"] == "rj-jump"
    ]
    assert res["rejectedAt"] and res["flag"].startswith("jump")
    # Again: the same answer, nothing more taken out.
    path = "/v1/admin/players/rj_1/results/rj-jump/reject"
    assert ok(server.admin("POST", path))["points"] == 900_000
    assert ok(httpx.get(week))["points"] == after["points"]
    # The player's file keeps it, marked.
    page.locator("tr", has_text="rj_1").first.get_by_role("button", name="rj_1").click()
    expect(page.locator("tr", has_text="rj-jump")).to_contain_text("rejected")


# -- keys ------------------------------------------------------------------------------------


def test_keys_are_listed_created_with_the_secret_once_and_revoked(
    server: Server, page: Any, tmp_path: Path
) -> None:
    signed_in(page, server, server.admin_key)
    open_view(page, "keys")
    expect(page.locator("tr", has_text="e2e-ops")).to_contain_text("ops")
    form = page.locator("#create-key")
    form.get_by_label("Name").fill("eu-west")
    form.get_by_label("Scope").select_option("game")
    form.get_by_label("Modes a game server may submit (comma separated)").fill("default")
    form.get_by_role("button", name="Create key").click()
    secret = page.locator("#secret")
    expect(secret).to_be_visible()
    value = secret.input_value()
    made = [k for k in ok(server.admin("GET", "/v1/admin/keys"))["keys"] if k["name"] == "eu-west"]
    assert len(made) == 1 and made[0]["scope"] == "game" and made[0]["modes"] == ["default"]
    key_id = made[0]["id"]
    # The secret works, as the key's own.
    submit_ok = httpx.post(
        f"{server.url}/v1/matches/k-1/results",
        json={
            "mode": "default",
            "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "durationSeconds": 300,
            "results": [{"playerId": "k_1", "points": 1}],
        },
        headers={"Authorization": f"Bearer {value}"},
    )
    assert submit_ok.status_code == 200, submit_ok.text
    axe(page)
    shot(page, tmp_path, "keys")
    page.get_by_role("button", name="Done").click()
    expect(page.locator("#secret")).to_have_count(0)

    page.get_by_role("button", name=f"Revoke key {key_id}").click()
    confirm = page.get_by_label(f"Type {key_id} to confirm")
    confirm.fill(key_id)
    page.get_by_role("button", name="Revoke", exact=True).click()
    expect(notice(page)).to_contain_text(f"key {key_id} is revoked")
    [gone] = [k for k in ok(server.admin("GET", "/v1/admin/keys"))["keys"] if k["id"] == key_id]
    assert gone["revokedAt"]
    expect(page.locator("#secret")).to_have_count(0)  # never shown again
    # A bad name is the API's 422, in words; nothing is made.
    before = len(ok(server.admin("GET", "/v1/admin/keys"))["keys"])
    form.get_by_label("Name").fill("   ")
    form.get_by_role("button", name="Create key").click()
    expect(alert(page)).to_contain_text("(422)")
    assert len(ok(server.admin("GET", "/v1/admin/keys"))["keys"]) == before


# -- boards and windows ----------------------------------------------------------------------


def test_a_rebuild_run_from_the_command_line_is_shown_on_the_boards_page(
    server: Server, backends: str, page: Any, tmp_path: Path
) -> None:
    if not backends:
        pytest.skip("the in-process index is rebuilt at start: podium rebuild needs Redis")
    for i in range(3):
        submit(server, f"up-{i}", [{"playerId": f"up_{i}", "points": 5 + i}])
    assert server.on_board("up_2")
    # podium rebuild, a process of its own, as an operator runs it.
    cfg = str(server.log.parent / "podium.toml")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "podium",
            "rebuild",
            "--board",
            "week",
            "--grace",
            "0",
            "--config",
            cfg,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    [run, *_] = ok(server.ops("/v1/admin/upkeep"))["running"]  # an ops key reads it
    assert (run["kind"], run["phase"], run["windowsDone"]) == ("rebuild", "done", 1)
    assert run["done"] == run["total"] >= 3 and run["windows"][0].startswith("week ")
    signed_in(page, server, server.admin_key)
    open_view(page, "boards")
    card = page.locator("#upkeep")
    row = card.locator("tr", has_text=f"rebuild of {run['windows'][0]}")
    expect(row).to_contain_text("done")
    expect(row).to_contain_text(f"{run['done']:,} of {run['total']:,}")
    expect(row).to_contain_text("1 of 1")
    expect(row).to_contain_text(run["startedAt"].replace("T", " ").replace("Z", " UTC"))
    axe(page)
    shot(page, tmp_path, "upkeep")


def test_a_window_is_frozen_and_its_standings_downloaded(
    server: Server, page: Any, tmp_path: Path
) -> None:
    submit(server, "fz-1", [{"playerId": "fz_1", "points": 30}, {"playerId": "fz_2", "points": 20}])
    assert server.on_board("fz_1", "sprint")
    [today] = [
        b["currentWindow"]
        for b in ok(httpx.get(server.url + "/v1/boards"))["boards"]
        if b["name"] == "sprint"
    ]
    signed_in(page, server, server.admin_key)
    open_view(page, "boards")
    sprint = page.locator('section[data-board="sprint"]')
    expect(sprint.locator("figure svg .bar").first).to_be_attached()  # the distribution
    axe(page)
    shot(page, tmp_path, "boards")
    sprint.get_by_role("button", name=f"Freeze sprint {today}").click()
    sprint.get_by_label(f"Type {today} to confirm").fill(today)
    sprint.get_by_role("button", name="Freeze", exact=True).click()
    expect(notice(page)).to_contain_text(f"sprint {today} is frozen with")
    windows = ok(httpx.get(server.url + "/v1/boards/sprint/windows"))["windows"]
    assert [w["state"] for w in windows if w["id"] == today] == ["frozen"]
    link = (
        page.locator('section[data-board="sprint"]')
        .get_by_role("link", name="Download standings")
        .first
    )
    expect(link).to_be_visible()
    href = link.get_attribute("href")
    csv = httpx.get(server.url + href, follow_redirects=True)
    assert csv.status_code == 200 and "fz_1" in csv.text
    # The frozen window is in the player's past, with its picture.
    page.goto(f"{server.url}/admin#players/fz_1")
    past = page.locator("section", has=page.get_by_role("heading", name="Past windows"))
    expect(past.locator("tr", has_text=today)).to_contain_text("30")
    expect(past.locator("svg :is(.line, .dot)").first).to_be_attached()
    expect(past.locator(".legend")).to_contain_text("sprint")
    shot(page, tmp_path, "player-past")


def test_a_leagues_tiers_and_cohorts_are_shown(server: Server, page: Any, tmp_path: Path) -> None:
    ok(server.admin("PUT", "/v1/players/lg_1/profile", {"name": "Ladder One"}))
    submit(server, "lg-1", [{"playerId": "lg_1", "points": 44}, {"playerId": "lg_2", "points": 4}])
    cohort = ok(httpx.get(f"{server.url}/v1/boards/ladder/players/lg_1/cohort"))["cohortId"]
    signed_in(page, server, server.admin_key)
    open_view(page, "boards")
    ladder = page.locator('section[data-board="ladder"]')
    expect(ladder).to_contain_text("tiers bronze → silver → gold, cohorts of 30, top 5 up")
    row = ladder.locator("tr", has_text=cohort)
    expect(row).to_contain_text("bronze")
    row.get_by_role("button", name=f"Members of {cohort}").click()
    expect(ladder.locator("tr", has_text="Ladder One (lg_1)")).to_contain_text("44")
    axe(page)
    page.goto(f"{server.url}/admin#players/lg_1")
    leagues = page.locator("section", has=page.get_by_role("heading", name="Leagues"))
    expect(leagues.locator("tr", has_text="ladder")).to_contain_text(cohort)
    shot(page, tmp_path, "league")


# -- tournaments -----------------------------------------------------------------------------


def test_a_tournament_is_refused_in_the_apis_words_then_made_and_ended(
    server: Server, page: Any, tmp_path: Path
) -> None:
    signed_in(page, server, server.admin_key)
    open_view(page, "tournaments")
    form = page.locator("#create-tournament")
    now = time.time()
    stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    form.get_by_label("Id").fill("cup-1")
    form.locator('input[name="joinRequired"]').check()
    form.get_by_label("Title").fill("Friday Cup")
    form.get_by_label("Starts at (RFC 3339, UTC)").fill(stamp(now - 60))
    form.get_by_label("Ends at (RFC 3339, UTC)").fill(stamp(now - 120))  # before the start
    form.get_by_label("Attempts that count per player").fill("lots")
    form.get_by_label("Most entrants").fill("0")
    form.get_by_label("Metadata (a JSON object)").fill("[1, 2]")
    form.get_by_label("Order (desc: more points first)").select_option("asc")
    form.get_by_label("Ties (first to reach, or shared ranks)").select_option("shared")
    form.get_by_label("Category").fill("weekly")
    form.get_by_role("button", name="Create tournament").click()
    expect(alert(page)).to_contain_text("(422)")
    expect(alert(page)).to_contain_text("maxAttempts")
    # Each field at fault marked where it is typed, in the API's words.
    for label in ("Attempts that count per player", "Most entrants", "Metadata (a JSON object)"):
        box = form.get_by_label(label)
        expect(box).to_have_attribute("aria-invalid", "true")
        said = page.locator(f"#{box.get_attribute('aria-describedby')}")
        expect(said).not_to_be_empty()
    expect(form.get_by_label("Title")).not_to_have_attribute("aria-invalid", "true")
    assert httpx.get(server.url + "/v1/tournaments/cup-1").status_code == 404
    axe(page)
    form.get_by_label("Attempts that count per player").fill("3")
    form.get_by_label("Most entrants").fill("50")
    form.get_by_label("Metadata (a JSON object)").fill('{"prize": "<b>skin</b>"}')
    form.get_by_role("button", name="Create tournament").click()
    expect(alert(page)).to_contain_text("endsAt")
    ends = form.get_by_label("Ends at (RFC 3339, UTC)")
    expect(ends).to_have_attribute("aria-invalid", "true")  # a rule no schema states
    expect(page.locator("#tournament-endsAt-error")).to_contain_text("after startsAt")
    expect(form.get_by_label("Attempts that count per player")).not_to_have_attribute(
        "aria-invalid", "true"
    )
    assert httpx.get(server.url + "/v1/tournaments/cup-1").status_code == 404
    ends.fill(stamp(now + 3600))
    form.get_by_role("button", name="Create tournament").click()
    expect(notice(page)).to_contain_text("cup-1 is made (live)")
    made = ok(httpx.get(server.url + "/v1/tournaments/cup-1"))
    assert (made["maxAttempts"], made["maxEntrants"], made["category"]) == (3, 50, "weekly")
    assert (made["order"], made["ties"], made["metadata"]) == (
        "asc",
        "shared",
        {"prize": "<b>skin</b>"},
    )
    for p in ("cup_a", "cup_b"):
        r = httpx.post(
            f"{server.url}/v1/tournaments/cup-1/entrants",
            json={"playerId": p},
            headers={"Authorization": f"Bearer {server.game_key}"},
        )
        assert r.status_code == 201, r.text
    submit(server, "cup-m1", [{"playerId": "cup_a", "points": 12}])
    deadline = time.monotonic() + 30  # the updater puts it on the tournament's board
    while time.monotonic() < deadline:
        # The page as the console reads it (the server holds a page a second).
        if "cup_a" in httpx.get(f"{server.url}/v1/tournaments/cup-1/board?limit=50").text:
            break
        time.sleep(0.05)
    page.reload()
    detail = page.locator('section[data-tournament="cup-1"]')
    standings = detail.locator("table", has_text="standings of run")
    expect(standings.locator("tr", has_text="cup_a")).to_contain_text("12")
    axe(page)
    shot(page, tmp_path, "tournaments")
    # An entrant removed, typing their id: the place is free again.
    detail.get_by_role("button", name="Remove entrant cup_b").click()
    detail.get_by_label("Type cup_b to confirm").fill("cup_b")
    detail.get_by_role("button", name="Remove", exact=True).click()
    expect(notice(page)).to_contain_text("cup_b is no longer an entrant of cup-1")
    assert ok(httpx.get(server.url + "/v1/tournaments/cup-1"))["entrants"] == 1
    detail = page.locator('section[data-tournament="cup-1"]')
    expect(detail.locator("tr", has_text="cup_a").first).to_be_visible()
    expect(detail.get_by_role("button", name="Remove entrant cup_b")).to_have_count(0)
    detail.get_by_label("Type cup-1 to confirm").fill("cup-1")
    detail.get_by_role("button", name="End now").click()
    expect(notice(page)).to_contain_text("cup-1 is ended")
    assert ok(httpx.get(server.url + "/v1/tournaments/cup-1"))["state"] == "ended"


# -- webhooks --------------------------------------------------------------------------------


def test_a_failed_delivery_shows_its_last_answer_and_is_retried(
    server: Server, page: Any, tmp_path: Path
) -> None:
    ok(server.admin("POST", "/v1/admin/players/wh_1/ban", {"reason": "spam"}))

    def failed() -> list[dict[str, Any]]:
        page_ = ok(server.admin("GET", "/v1/admin/webhooks/deliveries?state=failed&limit=500"))
        return [d for d in page_["deliveries"] if d["type"] == "player.banned"]

    deadline = time.monotonic() + 60
    while not failed() and time.monotonic() < deadline:
        time.sleep(0.1)
    before = {d["eventId"]: d["attempts"] for d in failed()}
    assert before, "no delivery failed"
    event_id, attempts = next(iter(before.items()))
    signed_in(page, server, server.admin_key)
    open_view(page, "webhooks")
    expect(page.locator("#view")).to_contain_text("player.banned, player.flagged, window.frozen")
    row = page.locator(
        "section", has=page.get_by_role("heading", name="Failed deliveries")
    ).locator("tr", has_text=event_id)
    expect(row).to_contain_text("All connection attempts failed")  # nothing listens there
    expect(page.locator("#failure-rate")).to_contain_text("% failed of")
    axe(page)
    shot(page, tmp_path, "webhooks")
    row.get_by_role("button", name="Retry").click()
    expect(notice(page)).to_contain_text(f"{event_id} is due again")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        again = {d["eventId"]: d["attempts"] for d in failed()}
        if again.get(event_id, 0) > attempts:
            break
        time.sleep(0.1)
    assert again.get(event_id, 0) > attempts, "the retried delivery was not tried again"


# -- safety ----------------------------------------------------------------------------------


def test_hostile_names_and_metadata_are_shown_as_text_and_run_nothing(
    server: Server, page: Any, tmp_path: Path
) -> None:
    ok(server.admin("PUT", "/v1/players/evil_1/profile", {"name": HOSTILE_NAME}))
    submit(server, "evil-m1", [{"playerId": "evil_1", "points": 5, "metadata": HOSTILE_META}])
    ok(server.admin("POST", "/v1/admin/keys", {"name": HOSTILE_KEY, "scope": "ops"}))
    ok(server.admin("POST", "/v1/admin/players/evil_1/ban", {"reason": HOSTILE_META["note"]}))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    signed_in(page, server, server.admin_key)
    open_view(page, "players")
    page.get_by_label("Player id or name").fill("onerror")
    page.get_by_role("button", name="Find").click()
    page.get_by_role("button", name=HOSTILE_NAME).click()
    expect(page.locator("#player-title")).to_have_text(f"{HOSTILE_NAME} · evil_1")
    expect(page.locator("#view")).to_contain_text(HOSTILE_META["note"])
    expect(page.locator("#view")).to_contain_text(HOSTILE_META["q"])
    shot(page, tmp_path, "hostile-player")
    open_view(page, "keys")
    expect(page.locator("#view")).to_contain_text(HOSTILE_KEY)
    for view in VIEWS:
        open_view(page, view)
    page.wait_for_timeout(500)  # an image's error handler would have fired by now
    assert page.evaluate("window.pwned") is None
    assert page.locator("img[src='x'], svg[onload], b[onmouseover], #view script").count() == 0
    assert dialogs == []


def test_an_ops_key_sees_read_only_views_and_the_api_refuses_it_anyway(
    server: Server, page: Any, tmp_path: Path
) -> None:
    submit(server, "ops-m1", [{"playerId": "ro_1", "points": 9}])
    assert server.on_board("ro_1")
    signed_in(page, server, server.ops_key)
    expect(page.locator("#who")).to_contain_text("read-only")
    open_view(page, "players")
    page.get_by_label("Player id").fill("ro_1")
    page.get_by_role("button", name="Find").click()
    expect(page.locator("#player-title")).to_have_text("ro_1")
    # The export and the erasure are the admin's alone: an ops key is refused both.
    expect(page.locator("#view button", has_text=WRITES)).to_have_count(0)
    expect(page.locator("#view button.danger")).to_have_count(0)
    expect(
        page.locator("section", has=page.get_by_role("heading", name="Boards now")).locator(
            "tr", has_text="week"
        )
    ).to_contain_text("9")
    axe(page)
    shot(page, tmp_path, "ops-player")
    for view in VIEWS:
        open_view(page, view)
        if view in ("players",):
            continue
        # Nothing that changes anything is offered: no such button, no form that writes.
        expect(page.locator("#view button", has_text=WRITES)).to_have_count(0)
        writing = page.locator("#view button.danger, #create-key, #create-tournament")
        expect(writing).to_have_count(0)
    open_view(page, "keys")
    expect(page.locator("#view")).to_contain_text("Read-only")
    # And the API refuses the same key anyway, whatever a page would send.
    status = page.evaluate(
        """async () => (await fetch('/v1/admin/players/ro_1/ban', {method: 'POST',
             headers: {'Authorization': 'Bearer ' + sessionStorage.getItem('podium.console.key'),
                       'Content-Type': 'application/json'}, body: '{"reason": "x"}'})).status"""
    )
    assert status == 403
    for method, path in (("GET", "ro_1/export"), ("DELETE", "ro_1")):
        refused = httpx.request(
            method,
            f"{server.url}/v1/admin/players/{path}",
            headers={"Authorization": f"Bearer {server.ops_key}"},
        )
        assert refused.status_code == 403, (method, path)
    assert httpx.get(f"{server.url}/v1/boards/week/players/ro_1").status_code == 200
