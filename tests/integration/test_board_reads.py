"""The reads clients ask of a board beyond a page by offset, end to end: cursor pages that
resume beside a row while the board moves (forward and back, with their ranks), what a
cursor of another board, group or window, or of one that ended, gets; a rank with uneven
ranges around it; players looked up by id. On the embedded and production configurations,
and the cursor walk on the split one too (pages from the aggregator's snapshot)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.conftest import KINDS_WITH_SPLIT, Api

pytestmark = pytest.mark.asyncio


def problem(r: Any, status: int, *says: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    for words in says:
        assert words in body["detail"], body["detail"]
    return body  # type: ignore[no-any-return]


def ranked(page: dict[str, Any]) -> list[tuple[int, str]]:
    return [(e["rank"], e["playerId"]) for e in page["entries"]]


async def _twelve(api: Api) -> None:
    """p00 .. p11 with 100 .. 111 points: p11 first."""
    for i in range(12):
        assert (await api.submit(f"m{i}", [(f"p{i:02d}", 100 + i)])).status_code == 200
    await api.settle()


@pytest.mark.parametrize("config_kind", KINDS_WITH_SPLIT, indirect=True)
async def test_cursor_pages_resume_by_place_while_the_board_moves(api: Api) -> None:
    await _twelve(api)
    first = await api.page("week", limit=5)
    assert ranked(first) == [(1, "p11"), (2, "p10"), (3, "p09"), (4, "p08"), (5, "p07")]
    assert "prev" not in first and first["next"]
    # The board moves between pages: a newcomer comes in second, p09 (already seen) takes
    # the top, and p05 (not seen yet) leaves, banned.
    await api.submit("new", [("new", 1000)])
    await api.submit("m-up", [("p09", 1000)])  # a sum: 1109
    ban = await api.client.post(
        "/v1/admin/players/p05/ban", json={"reason": "test"}, headers=api.auth(api.admin_key)
    )
    assert ban.status_code == 204
    await api.settle()
    # By offset, page two would show p07 again (everyone moved down one) and skip nobody
    # only by luck; by cursor it resumes behind p07, with the ranks of now.
    second = await api.page("week", limit=5, cursor=first["next"])
    assert ranked(second) == [(7, "p06"), (8, "p04"), (9, "p03"), (10, "p02"), (11, "p01")]
    third = await api.page("week", limit=5, cursor=second["next"])
    assert ranked(third) == [(12, "p00")]
    assert "next" not in third  # the end of the board
    # And back, with the ranks right on the way (the rows ahead of p00, then of p06).
    back = await api.page("week", limit=5, cursor=third["prev"])
    assert ranked(back) == ranked(second)
    back = await api.page("week", limit=5, cursor=back["prev"])
    assert ranked(back) == [(2, "new"), (3, "p11"), (4, "p10"), (5, "p08"), (6, "p07")]
    top = await api.page("week", limit=5, cursor=back["prev"])
    assert ranked(top) == [(1, "p09")] and "prev" not in top
    assert ranked(await api.page("week", limit=5, cursor=top["next"])) == ranked(back)
    # A plain page by offset answers cursors too: prev from an offset page.
    mid = await api.page("week", offset=3, limit=2)
    assert ranked(mid) == [(4, "p10"), (5, "p08")]
    assert ranked(await api.page("week", limit=3, cursor=mid["prev"])) == [
        (1, "p09"),
        (2, "new"),
        (3, "p11"),
    ]


async def test_cursors_of_elsewhere_and_malformed_ones_are_refused(make_api: Any) -> None:
    api: Api = await make_api(
        boards=[
            {"name": "week", "window": "week"},
            {"name": "day", "window": "day", "freeze_after_s": 3 * 86400},
        ]
    )
    yesterday = time.time() - 86400
    day_id = time.strftime("%Y-%m-%d", time.gmtime(yesterday))
    for i, p in enumerate(["a", "b", "c"]):
        await api.submit(f"old{i}", [(p, 10 - i)], ended_at=yesterday)
    await api.submit("now", [("a", 5), ("b", 4)])
    await api.settle()
    week = await api.page("week", limit=1)
    past = await api.page("day", window=day_id, limit=1)
    assert ranked(past) == [(1, "a")] and past["next"]
    get = api.client.get
    problem(await get("/v1/boards/day", params={"cursor": week["next"]}), 422, "board week")
    # The day has ended: its cursor does not resume today's board...
    r = await get("/v1/boards/day", params={"cursor": past["next"], "limit": 1})
    problem(r, 422, f"window {day_id}", "ended", f"?window={day_id}")
    # ...but resumes the day it came from, by name.
    r = await get("/v1/boards/day", params={"cursor": past["next"], "limit": 1, "window": day_id})
    assert r.status_code == 200 and ranked(r.json()) == [(2, "b")]
    # Once that day is frozen, the same cursor pages its final standings.
    frozen = await api.client.post(
        f"/v1/admin/boards/day/windows/{day_id}/freeze", headers=api.auth(api.admin_key)
    )
    assert frozen.status_code == 200, frozen.text
    api.podium.reads.clear_cache()
    final = (await get("/v1/boards/day", params={"cursor": past["next"], "window": day_id})).json()
    assert ranked(final) == [(2, "b"), (3, "c")] and "next" not in final
    back = await get("/v1/boards/day", params={"cursor": final["prev"], "window": day_id})
    assert ranked(back.json()) == [(1, "a")]
    # Malformed: not base64, base64 of nothing podium wrote, or a cursor beside an offset.
    problem(await get("/v1/boards/week", params={"cursor": "not a cursor!"}), 422, "cursor")
    problem(await get("/v1/boards/week", params={"cursor": "bm90IGpzb24"}), 422, "malformed")
    problem(await get("/v1/boards/week", params={"cursor": "e30"}), 422, "malformed")  # {}
    r = await get("/v1/boards/week", params={"cursor": week["next"], "offset": 2})
    problem(r, 422, "not both")
    # Another window of the same board, named: not the one the cursor pages.
    r = await get("/v1/boards/day", params={"cursor": past["next"], "window": "2020-01-01"})
    problem(r, 422, f"window {day_id}", "not 2020-01-01")


async def test_a_cursor_of_another_group_is_refused(make_api: Any) -> None:
    api: Api = await make_api(
        boards=[{"name": "week", "window": "week", "group_by": "country", "modes": ["default"]}]
    )
    h = api.auth(api.admin_key)
    for p, country in [("fr1", "FR"), ("fr2", "FR"), ("de1", "DE")]:
        r = await api.client.put(f"/v1/players/{p}/profile", json={"country": country}, headers=h)
        assert r.status_code == 204
    await api.submit("m", [("fr1", 5), ("fr2", 4), ("de1", 3)])
    await api.settle()
    fr = await api.page("week", group="FR", limit=1)
    assert ranked(fr) == [(1, "fr1")]
    r = await api.client.get("/v1/boards/week", params={"group": "DE", "cursor": fr["next"]})
    problem(r, 422, "group FR", "not DE")
    again = await api.page("week", group="FR", limit=1, cursor=fr["next"])
    assert ranked(again) == [(2, "fr2")]


async def test_uneven_ranges_around_a_rank(api: Api) -> None:
    await _twelve(api)
    get = api.client.get

    async def around(**params: Any) -> list[tuple[int, str]]:
        r = await get("/v1/boards/week/players/p05", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["rank"] == 7 and body["exact"] is True
        return [(n["rank"], n["playerId"]) for n in body["neighbors"]]

    assert await around(above=3, below=1) == [
        (4, "p08"),
        (5, "p07"),
        (6, "p06"),
        (7, "p05"),
        (8, "p04"),
    ]
    assert await around(above=0, below=2) == [(7, "p05"), (8, "p04"), (9, "p03")]
    # neighbors sets both sides, above or below overrides one of them
    assert await around(neighbors=1, below=3) == [
        (6, "p06"),
        (7, "p05"),
        (8, "p04"),
        (9, "p03"),
        (10, "p02"),
    ]
    assert await around(neighbors=1) == [(6, "p06"), (7, "p05"), (8, "p04")]
    top = (await get("/v1/boards/week/players/p11", params={"above": 5, "below": 1})).json()
    assert [n["playerId"] for n in top["neighbors"]] == ["p11", "p10"]
    problem(await get("/v1/boards/week/players/p05", params={"above": 51}), 422, "above")
    problem(await get("/v1/boards/week/players/p05", params={"below": -1}), 422, "below")


async def test_players_looked_up_by_id(api: Api) -> None:
    await _twelve(api)
    r = await api.client.put(
        "/v1/players/p05/profile", json={"name": "Vex"}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204
    await api.settle()
    get = api.client.get
    r = await get("/v1/boards/week/players", params={"ids": "p00,ghost,p05,p11,p05"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["board"] == "week" and body["absent"] == ["ghost"]
    assert [(p["playerId"], p["rank"], p["points"], p["exact"]) for p in body["players"]] == [
        ("p11", 1, 111, True),
        ("p05", 7, 105, True),
        ("p00", 12, 100, True),
    ]
    assert body["players"][1]["name"] == "Vex" and "name" not in body["players"][0]
    nobody = (await get("/v1/boards/week/players", params={"ids": "x,y"})).json()
    assert nobody["players"] == [] and nobody["absent"] == ["x", "y"]
    ids = ",".join(f"q{i}" for i in range(101))
    problem(await get("/v1/boards/week/players", params={"ids": ids}), 422, "ids")
    problem(await get("/v1/boards/week/players", params={"ids": "a,,b"}), 422, "ids")
    problem(await get("/v1/boards/week/players", params={"ids": "a,b c"}), 422, "ids")
    problem(await get("/v1/boards/week/players"), 422, "ids")
    problem(await get("/v1/boards/nope/players", params={"ids": "a"}), 404)


async def test_the_new_reads_are_in_the_openapi_document(api: Api) -> None:
    doc = (await api.client.get("/openapi.json")).json()
    page = doc["paths"]["/v1/boards/{board}"]["get"]
    assert "cursor" in {p["name"] for p in page["parameters"]}
    assert {"next", "prev"} <= set(doc["components"]["schemas"]["PageOut"]["properties"])
    rank = doc["paths"]["/v1/boards/{board}/players/{playerId}"]["get"]
    assert {"above", "below", "neighbors"} <= {p["name"] for p in rank["parameters"]}
    lookup = doc["paths"]["/v1/boards/{board}/players"]["get"]
    assert {"404", "422", "429", "503"} <= set(lookup["responses"])
    assert "application/problem+json" in lookup["responses"]["422"]["content"]
