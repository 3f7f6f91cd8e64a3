"""The admin's routes the console reads before it acts: players found by id or name, one
player's file (profile, ban and reason, latest results with flags and metadata), the webhook
endpoints, and a failed delivery tried again. Only an admin key; problem+json otherwise."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.conftest import KINDS_WITH_SPLIT, Api
from tests.integration.test_api import problem
from tests.integration.test_webhooks import all_deliveries, hook, wait_for
from tests.moments import earlier_today
from tests.ports import free_port

CONFIG_KINDS = KINDS_WITH_SPLIT
HOSTILE = '<img src=x onerror="alert(1)">'


async def _get(api: Api, path: str, key: str | None = None, **params: Any) -> Any:
    return await api.client.get(path, params=params, headers=api.auth(key or api.admin_key))


async def _profile(api: Api, pid: str, name: str) -> None:
    r = await api.client.put(
        f"/v1/players/{pid}/profile", json={"name": name}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204, r.text


async def test_players_are_found_by_id_or_name(api: Api) -> None:
    await _profile(api, "p_001", "Vex")
    await _profile(api, "p_002", HOSTILE)
    await _profile(api, "q_1", "vexed")
    r = await _get(api, "/v1/admin/players", q="VEX")
    assert r.status_code == 200, r.text
    assert r.json()["players"] == [
        {"playerId": "p_001", "name": "Vex"},
        {"playerId": "q_1", "name": "vexed"},
    ]
    r = await _get(api, "/v1/admin/players", q="p_00", limit=1)
    assert r.json()["players"] == [{"playerId": "p_001", "name": "Vex"}]
    r = await _get(api, "/v1/admin/players", q="onerror")
    assert r.json()["players"] == [{"playerId": "p_002", "name": HOSTILE}]  # as it is, as text
    assert (await _get(api, "/v1/admin/players", q="zzz")).json() == {"players": []}
    problem(await _get(api, "/v1/admin/players", q=""), 422)
    problem(await _get(api, "/v1/admin/players", q="a\x00b"), 422)
    problem(await _get(api, "/v1/admin/players", q="x" * 65), 422)
    problem(await _get(api, "/v1/admin/players"), 422)


async def test_a_players_file_has_the_ban_and_flagged_results_with_metadata(api: Api) -> None:
    t = time.time()
    body = {
        "mode": "default",
        "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)),
        "durationSeconds": 300,
        "results": [{"playerId": "p1", "points": 40, "metadata": {"car": HOSTILE}}],
    }
    r = await api.client.post("/v1/matches/m1/results", json=body, headers=api.auth())
    assert r.status_code == 200, r.text
    r = await api.client.post(
        "/v1/admin/players/p1/ban",
        json={"reason": "aimbot </script>"},
        headers=api.auth(api.admin_key),
    )
    assert r.status_code in (202, 204), r.text
    f = (await _get(api, "/v1/admin/players/p1")).json()
    assert f["playerId"] == "p1" and f["banned"] is True
    assert f["ban"]["reason"] == "aimbot </script>" and f["ban"]["bannedAt"].endswith("Z")
    [res] = f["results"]
    assert (res["matchId"], res["mode"], res["points"]) == ("m1", "default", 40)
    assert res["metadata"] == {"car": HOSTILE} and "flag" not in res
    assert res["durationSeconds"] == 300
    # Unbanned: the file says so, the reason gone with the ban.
    r = await api.client.delete("/v1/admin/players/p1/ban", headers=api.auth(api.admin_key))
    assert r.status_code in (202, 204), r.text
    f = (await _get(api, "/v1/admin/players/p1", results=0)).json()
    assert f["banned"] is False and "ban" not in f and f["results"] == []
    problem(await _get(api, "/v1/admin/players/nobody"), 404)
    problem(await _get(api, "/v1/admin/players/p1", results=201), 422)


async def test_an_accepted_flag_leaves_the_review_queue_and_keeps_counting(api: Api) -> None:
    for i, at in enumerate(earlier_today(5)):  # the history the jump rule needs, then a jump
        r = await api.submit(f"h{i}", [("p1", 10)], ended_at=at)
        assert r.status_code == 200, r.text
    r = await api.submit("jump", [("p1", 900_000)])
    assert r.status_code == 200, r.text
    await api.settle()
    review = (await _get(api, "/v1/admin/review", board="week")).json()
    assert [f["matchId"] for f in review["flagged"]] == ["jump"]
    points = (await api.client.get("/v1/boards/week/players/p1")).json()["points"]
    admin = api.auth(api.admin_key)
    path = "/v1/admin/players/p1/results/jump/accept"
    problem(await api.client.post(path, headers=api.auth()), 403)
    r = await api.client.post(path, headers=admin)
    assert r.status_code == 200, r.text
    accepted = r.json()
    assert (accepted["playerId"], accepted["matchId"]) == ("p1", "jump")
    again = await api.client.post(path, headers=admin)
    assert again.json() == accepted  # the first acceptance stays
    review = (await _get(api, "/v1/admin/review", board="week")).json()
    assert review["flagged"] == [] and review["top"][0]["flagged"] == 0
    # Still counted, as it was; the file keeps the flag's reason and says it was accepted.
    assert (await api.client.get("/v1/boards/week/players/p1")).json()["points"] == points
    [res, *_] = (await _get(api, "/v1/admin/players/p1")).json()["results"]
    assert res["matchId"] == "jump" and res["flag"].startswith("jump")
    assert res["acceptedAt"] == accepted["acceptedAt"]
    problem(await api.client.post("/v1/admin/players/p1/results/h0/accept", headers=admin), 404)
    problem(await api.client.post("/v1/admin/players/p1/results/none/accept", headers=admin), 404)


async def test_a_rejected_flag_takes_its_points_off_every_board_once(api: Api) -> None:
    *history, jumped, rival = earlier_today(7)
    for i, at in enumerate(history):  # the history the jump rule needs, then a jump
        r = await api.submit(f"h{i}", [("p1", 10)], ended_at=at)
        assert r.status_code == 200, r.text
    r = await api.submit("jump", [("p1", 900_000)], ended_at=jumped)
    assert r.status_code == 200, r.text
    r = await api.submit("rival", [("p2", 1000)], ended_at=rival)
    assert r.status_code == 200, r.text
    await api.settle()
    boards = [b["name"] for b in (await api.client.get("/v1/boards")).json()["boards"]]
    before = {b: (await api.client.get(f"/v1/boards/{b}/players/p1")).json() for b in boards}
    assert all(v["points"] >= 900_000 and v["rank"] == 1 for v in before.values()), before
    admin = api.auth(api.admin_key)
    path = "/v1/admin/players/p1/results/jump/reject"
    problem(await api.client.post(path), 401)
    problem(await api.client.post(path, headers=api.auth()), 403)
    r = await api.client.post("/v1/admin/keys", json={"name": "o", "scope": "ops"}, headers=admin)
    problem(await api.client.post(path, headers=api.auth(r.json()["secret"])), 403)
    # Said first, and nothing changed by saying it.
    r = await api.client.get(path, headers=admin)
    assert r.status_code == 200, r.text
    preview = r.json()
    assert (preview["points"], preview["rejectedAt"]) == (900_000, None)
    windows = {c["board"]: (c["before"], c["after"]) for c in preview["recounts"]}
    assert {b: windows[b] for b in boards} == {
        b: (before[b]["points"], before[b]["points"] - 900_000) for b in boards
    }
    problem(await api.client.get(path, headers=api.auth()), 403)
    assert (await api.client.get(path, headers=admin)).json() == preview
    r = await api.client.post(path, headers=admin)
    assert r.status_code == 200, r.text
    rejected = r.json()
    after = (await api.client.get(path, headers=admin)).json()
    assert (after["rejectedAt"], after["recounts"]) == (rejected["rejectedAt"], [])
    assert (rejected["playerId"], rejected["matchId"], rejected["points"]) == (
        "p1",
        "jump",
        900_000,
    )
    again = await api.client.post(path, headers=admin)
    assert again.status_code == 200 and again.json() == rejected  # the same, nothing more
    await api.settle()
    for b in boards:  # lowered on every board, below the rival, and as the store holds it
        api.podium.reads.clear_cache()
        now = (await api.client.get(f"/v1/boards/{b}/players/p1")).json()
        assert (now["points"], now["rank"]) == (before[b]["points"] - 900_000, 2), (b, now)
    standings = {s.board: s.tally.total for s in await api.backends.store.player_standings("p1")}
    assert all(standings[b] == before[b]["points"] - 900_000 for b in boards), standings
    # Out of the review queue, kept in the file; it cannot be accepted now.
    review = (await _get(api, "/v1/admin/review", board="week")).json()
    assert review["flagged"] == []
    [res, *_] = (await _get(api, "/v1/admin/players/p1")).json()["results"]
    assert res["matchId"] == "jump" and res["rejectedAt"] == rejected["rejectedAt"]
    problem(await api.client.post(path.replace("reject", "accept"), headers=admin), 409)
    # What cannot be rejected: nothing there, not flagged; each changes nothing.
    problem(await api.client.post("/v1/admin/players/p1/results/none/reject", headers=admin), 404)
    problem(await api.client.get("/v1/admin/players/p1/results/none/reject", headers=admin), 404)
    problem(await api.client.get("/v1/admin/players/p1/results/h0/reject", headers=admin), 409)
    refused = problem(
        await api.client.post("/v1/admin/players/p1/results/h0/reject", headers=admin), 409
    )
    assert "not flagged" in refused["detail"]
    problem(await api.client.post("/v1/admin/players/p%20/results/h0/reject", headers=admin), 422)
    assert {
        s.board: s.tally.total for s in await api.backends.store.player_standings("p1")
    } == standings


async def test_an_accepted_flag_cannot_be_rejected(api: Api) -> None:
    for i, at in enumerate(earlier_today(5)):
        assert (await api.submit(f"h{i}", [("p1", 10)], ended_at=at)).status_code == 200
    assert (await api.submit("jump", [("p1", 900_000)])).status_code == 200
    admin = api.auth(api.admin_key)
    r = await api.client.post("/v1/admin/players/p1/results/jump/accept", headers=admin)
    assert r.status_code == 200, r.text
    refused = problem(
        await api.client.post("/v1/admin/players/p1/results/jump/reject", headers=admin), 409
    )
    assert "accepted" in refused["detail"]
    await api.settle()
    assert (await api.client.get("/v1/boards/week/players/p1")).json()["points"] == 900_050


async def test_a_tournaments_entrants_are_listed_a_page_at_a_time(api: Api) -> None:
    now = time.time()
    stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    body = {"id": "cup", "title": "Cup", "modes": ["default"], "joinRequired": True}
    body |= {"startsAt": stamp(now - 60), "endsAt": stamp(now + 3600)}
    admin = api.auth(api.admin_key)
    r = await api.client.post("/v1/admin/tournaments", json=body, headers=admin)
    assert r.status_code == 201, r.text
    for p in ("p_b", "p_a", "p_c"):
        r = await api.client.post(
            "/v1/tournaments/cup/entrants", json={"playerId": p}, headers=api.auth()
        )
        assert r.status_code == 201, r.text
    first = (await _get(api, "/v1/admin/tournaments/cup/entrants", limit=2)).json()
    assert [e["playerId"] for e in first["entrants"]] == ["p_a", "p_b"]
    assert first["tournament"] == "cup" and first["next"] == "p_b"
    assert first["entrants"][0]["joinedAt"].endswith("Z")
    last = (await _get(api, "/v1/admin/tournaments/cup/entrants", after="p_b")).json()
    assert [e["playerId"] for e in last["entrants"]] == ["p_c"] and "next" not in last
    problem(await _get(api, "/v1/admin/tournaments/nothing/entrants"), 404)
    problem(await _get(api, "/v1/admin/tournaments/cup/entrants", limit=0), 422)
    problem(await _get(api, "/v1/admin/tournaments/cup/entrants", after="a\x01"), 422)


async def test_a_league_windows_cohorts_are_listed_with_the_leagues_rules(
    make_api: Any,
) -> None:
    league = {"name": "day", "window": "day", "cohort_size": 2, "tiers": ["bronze", "gold"]}
    league |= {"promote": 1, "demote": 1}
    api: Api = await make_api(boards=[{"name": "week", "window": "week"}, league])
    for i, p in enumerate(["p_1", "p_2", "p_3"]):  # three players: two cohorts at least
        r = await api.submit(f"m{i}", [(p, 10 + i)])
        assert r.status_code == 200, r.text
    out = (await _get(api, "/v1/admin/boards/day/cohorts")).json()
    assert (out["board"], out["cohortSize"], out["tiers"]) == ("day", 2, ["bronze", "gold"])
    assert (out["promote"], out["demote"]) == (1, 1) and "next" not in out
    cohorts = out["cohorts"]
    assert len(cohorts) >= 2 and sum(c["members"] for c in cohorts) == 3
    assert all(c["tier"] == "bronze" and 1 <= c["members"] <= 2 for c in cohorts)
    assert [c["cohortId"] for c in cohorts] == sorted(c["cohortId"] for c in cohorts)
    assert all(c["cohortId"].startswith(out["window"]) for c in out["cohorts"])
    first = (await _get(api, "/v1/admin/boards/day/cohorts", limit=1)).json()
    assert first["cohorts"] == out["cohorts"][:1] and first["next"] == out["cohorts"][0]["cohortId"]
    rest = (await _get(api, "/v1/admin/boards/day/cohorts", after=first["next"])).json()
    assert rest["cohorts"] == out["cohorts"][1:]
    problem(await _get(api, "/v1/admin/boards/week/cohorts"), 404)  # not a league
    problem(await _get(api, "/v1/admin/boards/nothing/cohorts"), 404)
    problem(await _get(api, "/v1/admin/boards/day/cohorts", window="x"), 422)
    problem(await api.client.get("/v1/admin/boards/day/cohorts", headers=api.auth()), 403)


@pytest.mark.parametrize("config_kind", ["embedded"], indirect=True)
async def test_only_an_admin_key_reads_them(api: Api) -> None:
    r = await api.client.post(
        "/v1/admin/keys", json={"name": "ops", "scope": "ops"}, headers=api.auth(api.admin_key)
    )
    ops = r.json()["secret"]
    paths = ("/v1/admin/players?q=p", "/v1/admin/players/p1", "/v1/admin/webhooks")
    for path in (*paths, "/v1/admin/tournaments/cup/entrants"):
        problem(await api.client.get(path), 401)
        for key in (api.game_key, ops):
            refused = problem(await api.client.get(path, headers=api.auth(key)), 403)
            assert "admin credential" in refused["detail"]
    retry = "/v1/admin/webhooks/deliveries/evt_1/retry"
    problem(await api.client.post(retry, json={"endpoint": "x"}, headers=api.auth(ops)), 403)


@pytest.mark.slow
@pytest.mark.parametrize("config_kind", ["embedded", "production"], indirect=True)
async def test_a_failed_delivery_is_tried_again_on_demand(make_api: Any) -> None:
    # Nothing listens there: every attempt is refused; the horizon is a second.
    url = f"http://user:pw@127.0.0.1:{free_port()}/nowhere"
    shown = f"http://user:***@127.0.0.1:{url.rsplit(':', 1)[1]}"
    api: Api = await make_api(webhooks=[hook(url, retry_for_s=1.0, retry_first_s=0.05)])
    endpoints = (await _get(api, "/v1/admin/webhooks")).json()["endpoints"]
    assert endpoints == [
        {
            "url": shown,
            "events": ["window.frozen", "player.banned", "player.flagged"],
            "retryForSeconds": 1.0,
        }
    ]
    r = await api.client.post(
        "/v1/admin/players/p1/ban", json={"reason": "spam"}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204, r.text

    async def failed() -> list[dict[str, Any]]:
        return await all_deliveries(api, state="failed")

    [d] = await wait_for(failed, timeout=30)
    assert d["endpoint"] == shown
    retry = f"/v1/admin/webhooks/deliveries/{d['eventId']}/retry"
    auth = api.auth(api.admin_key)
    # The endpoint as listed; never the url with its password (the admin never saw it).
    problem(await api.client.post(retry, json={"endpoint": url}, headers=auth), 404)
    problem(await api.client.post(retry, json={"endpoint": ""}, headers=auth), 422)
    problem(await api.client.post(retry, json={"url": shown}, headers=auth), 422)
    r = await api.client.post(retry, json={"endpoint": shown}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json() == {"eventId": d["eventId"], "endpoint": shown, "retried": 1}

    async def tried_again() -> list[dict[str, Any]]:
        return [x for x in await failed() if x["attempts"] > d["attempts"]]

    # Past its horizon, one more attempt fails it again, counted on.
    [again] = await wait_for(tried_again, timeout=30)
    assert again["eventId"] == d["eventId"]
    # Without an endpoint: each failed delivery of the event.
    r = await api.client.post(retry, json={}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json() == {"eventId": d["eventId"], "retried": 1}
    problem(
        await api.client.post(
            "/v1/admin/webhooks/deliveries/evt_none/retry", json={"endpoint": shown}, headers=auth
        ),
        404,
    )
