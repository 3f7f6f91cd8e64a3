"""Boards split by country (``group_by = "country"``), on every configuration: one board per
country, and a player who moves is counted once, in the new country, never back in the old."""

from __future__ import annotations

import time
from typing import Any

from podium.ports import BoardKey
from tests.integration.conftest import KINDS_WITH_SPLIT, Api

CONFIG_KINDS = KINDS_WITH_SPLIT

BOARDS = [
    {"name": "nations", "window": "week", "group_by": "country"},
    {"name": "week", "window": "week"},
]


async def _country(api: Api, player: str, country: str | None) -> None:
    h = api.auth(api.admin_key)
    r = await api.client.put(f"/v1/players/{player}/profile", json={"country": country}, headers=h)
    assert r.status_code == 204, r.text


def _rows(page: dict[str, Any]) -> list[tuple[int, str, int]]:
    return [(e["rank"], e["playerId"], e["points"]) for e in page["entries"]]


async def test_one_board_per_country_and_moves_count_once(make_api: Any) -> None:
    api: Api = await make_api(boards=BOARDS)
    for p, c in (("a", "FR"), ("b", "FR"), ("c", "DE")):
        await _country(api, p, c)
    r = await api.submit("m1", [("a", 30), ("b", 20), ("c", 50), ("d", 5)])
    assert r.json()["players"][2]["totals"] == {"nations": 50, "week": 50}
    await api.settle()
    assert _rows(await api.page("nations", group="FR")) == [(1, "a", 30), (2, "b", 20)]
    assert _rows(await api.page("nations", group="DE")) == [(1, "c", 50)]
    assert _rows(await api.page("nations", group="ZZ")) == [(1, "d", 5)]  # no country yet
    r = await api.client.get("/v1/boards/nations")
    assert r.status_code == 422 and "group" in r.json()["detail"]
    assert (await api.client.get("/v1/boards/week", params={"group": "FR"})).status_code == 422
    me = (await api.client.get("/v1/boards/nations/players/c")).json()  # group from the profile
    assert me["rank"] == 1 and me["window"].endswith("@DE")
    listed = (await api.client.get("/v1/boards")).json()["boards"]
    assert [b.get("groupBy") for b in listed] == ["country", None]

    # c moves to France: the whole total moves, once, and the old group lets go
    await _country(api, "c", "FR")
    await api.settle()
    assert _rows(await api.page("nations", group="FR")) == [
        (1, "c", 50),
        (2, "a", 30),
        (3, "b", 20),
    ]
    assert _rows(await api.page("nations", group="DE")) == []
    assert _rows(await api.page("week")) == [(1, "c", 50), (2, "a", 30), (3, "b", 20), (4, "d", 5)]
    # a late change of c's old group, replayed now, does not put c back in Germany
    week = api.podium.boards.board("nations").rule.window_at(int(time.time()))
    assert week is not None
    de = BoardKey("nations", f"{week.id}@DE")
    assert (
        await api.backends.index.write(
            de, [("c", 50 << 20)], descending=True, expire_at=None, versions=[1]
        )
        == 0
    )
    assert _rows(await api.page("nations", group="DE")) == []
    # new results count in the new group
    r = await api.submit("m2", [("c", 7)])
    assert r.json()["players"][0]["totals"] == {"nations": 57, "week": 57}
    await api.settle()
    assert _rows(await api.page("nations", group="FR"))[0] == (1, "c", 57)
    # a profile change that leaves the country out keeps it
    h = api.auth(api.admin_key)
    await api.client.put("/v1/players/c/profile", json={"name": "Cee"}, headers=h)
    await api.settle()
    first = (await api.page("nations", group="FR"))["entries"][0]
    assert first["playerId"] == "c" and first["name"] == "Cee"
    bad = await api.client.put("/v1/players/c/profile", json={"country": "France"}, headers=h)
    assert bad.status_code == 422


async def test_moving_back_and_forth_and_a_ban(make_api: Any) -> None:
    api: Api = await make_api(boards=BOARDS)
    await _country(api, "x", "SE")
    await api.submit("m1", [("x", 10)])
    for c in ("NO", "SE", "NO", None, "FI"):
        await _country(api, "x", c)
    await api.settle()
    for group, expected in (("SE", []), ("NO", []), ("ZZ", []), ("FI", [(1, "x", 10)])):
        assert _rows(await api.page("nations", group=group)) == expected, group
    h = api.auth(api.admin_key)
    assert (
        await api.client.post("/v1/admin/players/x/ban", json={"reason": "r"}, headers=h)
    ).status_code == 204
    await api.settle()
    assert _rows(await api.page("nations", group="FI")) == []
    await api.client.delete("/v1/admin/players/x/ban", headers=h)
    await api.settle()
    assert _rows(await api.page("nations", group="FI")) == [(1, "x", 10)]
