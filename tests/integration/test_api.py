"""The HTTP API of docs/architecture.md §3.2, end to end, on every configuration (the split
store too)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podium.domain.models import Scope
from podium.errors import ConfigError
from tests.conftest import stored_results
from tests.integration.conftest import KINDS, KINDS_WITH_SPLIT, Api

CONFIG_KINDS = KINDS_WITH_SPLIT

pytestmark = pytest.mark.asyncio


def problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["detail"]
    return body  # type: ignore[no-any-return]


async def on_board(api: Api, player: str, board: str = "week") -> dict[str, Any] | None:
    r = await api.client.get(f"/v1/boards/{board}/players/{player}")
    return r.json() if r.status_code == 200 else None


async def test_result_reaches_every_board_with_totals(api: Api) -> None:
    r = await api.submit("m1", [("p_5521", 140), ("p_0193", 95)])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["matchId"] == "m1"
    assert body["players"] == [
        {"playerId": "p_5521", "totals": {"season": 140, "week": 140, "day": 140}},
        {"playerId": "p_0193", "totals": {"season": 95, "week": 95, "day": 95}},
    ]
    r = await api.submit("m2", [("p_5521", 10)])
    assert r.json()["players"][0]["totals"] == {"season": 150, "week": 150, "day": 150}
    await api.settle()
    page = await api.page("week")
    assert [(e["rank"], e["playerId"], e["points"]) for e in page["entries"]] == [
        (1, "p_5521", 150),
        (2, "p_0193", 95),
    ]
    assert page["board"] == "week" and page["window"].startswith(time.strftime("%G-W"))


async def test_retry_is_safe_and_other_content_conflicts(api: Api) -> None:
    first = await api.submit("m1", [("a", 50), ("b", 40)])
    again = await api.submit("m1", [("a", 50), ("b", 40)])
    assert again.status_code == 200
    assert again.json() == first.json()
    problem(await api.submit("m1", [("a", 51)]), 409)
    problem(await api.submit("m1", [("a", 50), ("b", 41)]), 409)
    await api.settle()
    assert (await on_board(api, "a"))["points"] == 50  # type: ignore[index]
    assert (await on_board(api, "b"))["points"] == 40  # type: ignore[index]


async def test_credentials(api: Api) -> None:
    r = await api.client.post("/v1/matches/m1/results", json={})
    problem(r, 401)
    problem(await api.submit("m1", [("a", 1)], key="pdm_nope_nope"), 401)
    _, other = await api.podium.keys.create("other", ["default"], False)
    _, ranked = await api.podium.keys.create("ranked-only", ["default"], False)
    assert (await api.submit("m1", [("a", 1)])).status_code == 200
    body = problem(await api.submit("m1", [("a", 1)], key=other), 403)
    assert "another game server" in body["detail"]
    # admin-only routes refuse a game-server key
    r = await api.client.put("/v1/players/a/profile", json={"name": "A"}, headers=api.auth())
    problem(r, 403)
    del ranked


async def test_mode_scope(make_api: Any) -> None:
    api: Api = await make_api(modes=[{"name": "default"}, {"name": "ranked", "max_points": 10}])
    _, only_ranked = await api.podium.keys.create("r", ["ranked"], False)
    problem(await api.submit("m1", [("a", 1)], key=only_ranked), 403)
    assert (await api.submit("m1", [("a", 1)], key=only_ranked, mode="ranked")).status_code == 200
    problem(await api.submit("m2", [("a", 11)], key=only_ranked, mode="ranked"), 422)


# Refused before the store is asked: nothing the split store could do otherwise.
@pytest.mark.parametrize("config_kind", KINDS)
@pytest.mark.parametrize(
    ("results", "extra", "needle"),
    [
        ([], {}, "results"),
        ([("a", 1), ("a", 2)], {}, "twice"),
        ([("a", -1)], {}, "outside"),
        ([("a", 1_000_001)], {}, "outside"),
        ([("bad id!", 1)], {}, "playerId"),
        ([("a", 1)], {"mode": "nope"}, "unknown mode"),
        ([("a", 1)], {"duration": 999_999}, "durationSeconds"),
        ([("a", 1)], {"ended_at": time.time() + 3600}, "future"),
        ([("a", 1)], {"ended_at": time.time() - 400 * 86400}, "before every open window"),
    ],
)
async def test_invalid_results_change_nothing(
    api: Api, results: Any, extra: Any, needle: str
) -> None:
    body = problem(await api.submit("m1", results, **extra), 422)
    assert needle in body["detail"]
    assert await stored_results(api.backends.store, "m1", ["a"]) == {}


@pytest.mark.parametrize("config_kind", KINDS)  # refused before the store, as above
async def test_malformed_bodies(api: Api) -> None:
    url = "/v1/matches/m1/results"
    h = api.auth()
    good = {
        "mode": "default",
        "endedAt": "2026-01-01T00:00:00Z",
        "durationSeconds": 1,
        "results": [{"playerId": "a", "points": 1}],
    }
    for bad in (
        {**good, "extra": 1},
        {**good, "endedAt": "2026-01-01T00:00:00"},  # no time zone
        {**good, "results": [{"playerId": "a", "points": 1.5}]},
        {**good, "results": [{"playerId": "a", "points": "1"}]},
        {**good, "results": [{"playerId": f"p{i}", "points": 1} for i in range(101)]},
    ):
        problem(await api.client.post(url, json=bad, headers=h), 422)
    problem(
        await api.client.post(
            url, content=b"{not json", headers={**h, "content-type": "application/json"}
        ),
        422,
    )
    problem(
        await api.client.post(
            url, content=b"x" * 70_000, headers={**h, "content-type": "application/json"}
        ),
        413,
    )
    problem(await api.client.post("/v1/matches/bad%20id/results", json=good, headers=h), 422)


async def test_hourly_cap(make_api: Any) -> None:
    api: Api = await make_api(modes=[{"name": "default", "max_results_per_player_per_hour": 2}])
    assert (await api.submit("m1", [("a", 1)])).status_code == 200
    assert (await api.submit("m2", [("a", 1), ("b", 1)])).status_code == 200
    r = await api.submit("m3", [("b", 1), ("a", 1)])
    problem(r, 429)
    assert int(r.headers["retry-after"]) > 0
    assert (
        await stored_results(api.backends.store, "m3", ["a", "b"]) == {}
    )  # b was not written either
    assert (await api.submit("m2", [("a", 1), ("b", 1)])).status_code == 200  # a retry never counts


async def test_reads(api: Api) -> None:
    for i in range(12):
        assert (await api.submit(f"m{i}", [(f"p{i:02d}", 100 + i)])).status_code == 200
    await api.settle()
    await api.client.put(
        "/v1/players/p05/profile",
        json={"name": "Vex", "avatar": "https://x/y.png"},
        headers=api.auth(api.admin_key),
    )
    page = await api.page("week", offset=2, limit=3)
    assert [(e["rank"], e["playerId"]) for e in page["entries"]] == [
        (3, "p09"),
        (4, "p08"),
        (5, "p07"),
    ]
    r = await api.client.get("/v1/boards/week")
    assert r.headers["cache-control"] == "public, max-age=1"
    me = (await api.client.get("/v1/boards/week/players/p05", params={"neighbors": 1})).json()
    assert me["rank"] == 7 and me["exact"] is True and me["points"] == 105
    assert [(n["rank"], n["playerId"]) for n in me["neighbors"]] == [
        (6, "p06"),
        (7, "p05"),
        (8, "p04"),
    ]
    assert me["neighbors"][1]["name"] == "Vex" and me["neighbors"][1]["avatar"] == "https://x/y.png"
    top = (await api.client.get("/v1/boards/week/players/p11")).json()
    assert [n["playerId"] for n in top["neighbors"]] == ["p11", "p10", "p09"]
    problem(await api.client.get("/v1/boards/nope"), 404)
    problem(await api.client.get("/v1/boards/week/players/ghost"), 404)
    problem(await api.client.get("/v1/boards/week", params={"offset": 10_000}), 422)
    problem(await api.client.get("/v1/boards/week", params={"limit": 101}), 422)
    problem(await api.client.get("/v1/boards/week", params={"window": "2026-W99"}), 422)
    boards = (await api.client.get("/v1/boards")).json()["boards"]
    assert [b["name"] for b in boards] == ["season", "week", "day"]


async def test_friends_board(api: Api) -> None:
    await api.submit("m1", [("me", 50), ("f1", 70), ("f2", 10), ("x", 1000)])
    h = api.auth(api.admin_key)
    assert (
        await api.client.put(
            "/v1/players/me/friends", json={"friends": ["f1", "f2", "ghost"]}, headers=h
        )
    ).status_code == 204
    await api.settle()
    body = (await api.client.get("/v1/boards/week/players/me/friends")).json()
    # x (1000 points) is first on the board but not a friend: friends rank among themselves
    assert [(e["rank"], e["playerId"], e["globalRank"]) for e in body["entries"]] == [
        (1, "f1", 2),
        (2, "me", 3),
        (3, "f2", 4),
    ]
    too_many = {"friends": [f"p{i}" for i in range(1001)]}
    problem(await api.client.put("/v1/players/me/friends", json=too_many, headers=h), 422)


async def test_windows_come_from_ended_at(make_api: Any) -> None:
    api: Api = await make_api(
        boards=[
            {"name": "season", "window": "season"},
            {"name": "day", "window": "day", "freeze_after_s": 3 * 86400},
            {"name": "week", "window": "week", "freeze_after_s": 0},
        ]
    )
    yesterday = time.time() - 86400
    day_id = time.strftime("%Y-%m-%d", time.gmtime(yesterday))
    this_week = time.strftime("%G-W%V", time.gmtime())
    r = await api.submit("old", [("a", 5)], ended_at=yesterday)
    totals = r.json()["players"][0]["totals"]
    assert totals["day"] == 5 and totals["season"] == 5
    # the week holding yesterday is closed with no grace unless yesterday is in this week
    assert ("week" in totals) == (time.strftime("%G-W%V", time.gmtime(yesterday)) == this_week)
    await api.settle()
    past = await api.page("day", window=day_id)
    assert past["window"] == day_id and [e["playerId"] for e in past["entries"]] == ["a"]
    assert (await api.page("day"))["entries"] == []  # today's day board is empty
    problem(await api.submit("older", [("a", 5)], ended_at=time.time() - 400 * 86400), 422)


async def test_ban_removes_and_replay_does_not_restore(api: Api) -> None:
    await api.submit("m1", [("cheat", 900), ("fair", 100)])
    await api.settle()
    assert (await on_board(api, "cheat"))["rank"] == 1  # type: ignore[index]
    h = api.auth(api.admin_key)
    problem(await api.client.post("/v1/admin/players/cheat/ban", json={}, headers=h), 422)
    assert (
        await api.client.post("/v1/admin/players/cheat/ban", json={"reason": "aimbot"}, headers=h)
    ).status_code == 204
    # at once, on a split board too (where the aggregator's last snapshot still has them)
    assert await on_board(api, "cheat") is None
    assert [e["playerId"] for e in (await api.page("week"))["entries"]] == ["fair"]
    # a new result is recorded (totals stay in the store for appeals) but never shown
    assert (await api.submit("m2", [("cheat", 5)])).json()["players"][0]["totals"]["week"] == 905
    # replay every change of the cheater, as a redelivery after the ban would
    await api.backends.store.requeue_player("cheat", time.time())
    await api.settle()
    assert await on_board(api, "cheat") is None
    assert (await api.page("week"))["entries"][0]["playerId"] == "fair"
    assert (await api.client.delete("/v1/admin/players/cheat/ban", headers=h)).status_code == 204
    await api.settle()
    restored = await on_board(api, "cheat")
    assert restored is not None and restored["points"] == 905 and restored["rank"] == 1
    problem(await api.client.delete("/v1/admin/players/cheat/ban", headers=h), 404)


async def test_ops_endpoints(api: Api) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    assert (await api.client.get("/readyz")).json() == {"status": "ready"}
    await api.submit("m1", [("a", 1)])
    _, ops_key = await api.podium.keys.create("ops", [], scope=Scope.OPS)
    assert (await api.client.get("/metrics")).status_code == 401
    metrics = (await api.client.get("/metrics", headers=api.auth(ops_key))).text
    assert (
        "podium_results_accepted_total" in metrics
        and "podium_commit_to_board_seconds_bucket" in metrics
    )
    spec = (await api.client.get("/openapi.json")).json()
    assert "/v1/matches/{matchId}/results" in spec["paths"]


async def test_distribution(api: Api) -> None:
    problem(await api.client.get("/v1/boards/nope/distribution"), 404)
    empty = (await api.client.get("/v1/boards/week/distribution")).json()
    assert empty["players"] == 0 and empty["buckets"] == []
    points = [0, 1, 5, 9, 9, 10, 19, 20]
    await api.submit("m1", [(f"p{i}", p) for i, p in enumerate(points)])
    await api.settle()
    d = (await api.client.get("/v1/boards/week/distribution", params={"buckets": 3})).json()
    assert d["players"] == len(points)
    assert [(b["low"], b["high"], b["count"]) for b in d["buckets"]] == [
        (0, 6, 3),
        (7, 13, 3),
        (14, 20, 2),
    ]


async def _this_week_seconds(needed: int) -> float:
    """A time at least ``needed`` seconds before now and in the current ISO week (waiting, in
    the first seconds of a week): the previous week may already be frozen."""
    now = datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = midnight - timedelta(days=now.weekday())
    into = (now - monday).total_seconds()
    if into < needed + 1:
        await asyncio.sleep(needed + 1 - into)
    return max(time.time() - 3600, monday.timestamp())


async def test_review_lists_flagged_results_and_the_top(make_api: Any) -> None:
    api: Api = await make_api(modes=[{"name": "default", "max_points": 1000}])
    base = await _this_week_seconds(10)
    for i in range(5):
        await api.submit(f"warm{i}", [("sus", 100), ("fair", 90)], ended_at=base + i)
    r = await api.submit("big", [("sus", 900), ("fair", 95)], ended_at=base + 10)
    assert r.status_code == 200  # flagged, not refused
    await api.settle()
    h = api.auth(api.admin_key)
    problem(
        await api.client.get("/v1/admin/review", params={"board": "week"}, headers=api.auth()), 403
    )
    problem(await api.client.get("/v1/admin/review", params={"board": "nope"}, headers=h), 404)
    body = (await api.client.get("/v1/admin/review", params={"board": "week"}, headers=h)).json()
    assert [(f["playerId"], f["matchId"], f["points"]) for f in body["flagged"]] == [
        ("sus", "big", 900)
    ]
    assert body["flagged"][0]["reason"].startswith("jump")
    assert [(e["playerId"], e["flagged"]) for e in body["top"]] == [("sus", 1), ("fair", 0)]
    # a retry of the flagged match is not flagged twice
    await api.submit("big", [("sus", 900), ("fair", 95)], ended_at=base + 10)
    again = (await api.client.get("/v1/admin/review", params={"board": "week"}, headers=h)).json()
    assert len(again["flagged"]) == 1


async def test_a_process_may_serve_reads_or_writes_only(make_api: Any, config_kind: str) -> None:
    """``server.api``: two processes on one store and index, one for each kind of caller."""
    if config_kind == "embedded":  # the in-process index cannot be shared
        with pytest.raises(ConfigError, match=r"server\.api: .* redis://"):
            await make_api(server={"api": "read"})
        return
    writer: Api = await make_api(server={"api": "write"})
    reader: Api = await make_api(server={"api": "read"})
    assert (await writer.submit("m1", [("p1", 10)])).status_code == 200
    await writer.settle()
    rank = await reader.client.get("/v1/boards/week/players/p1")
    assert rank.status_code == 200 and rank.json()["points"] == 10
    assert (await reader.client.get("/")).status_code == 200  # the browser pages too
    # each refuses the other's routes, as routes it does not have
    problem(await reader.submit("m2", [("p1", 5)], key=writer.game_key), 404)
    problem(await writer.client.get("/v1/boards/week/players/p1"), 404)
    ban = await reader.client.delete(
        "/v1/admin/players/p1/ban", headers=reader.auth(reader.admin_key)
    )
    problem(ban, 404)
    for api in (writer, reader):
        _, ops_key = await api.podium.keys.create("ops", [], scope=Scope.OPS)
        assert (await api.client.get("/healthz")).status_code == 200
        assert (await api.client.get("/metrics", headers=api.auth(ops_key))).status_code == 200
