"""Boards split by country, read one group at a time where the other reads already could:
the live stream of one group (its own broadcaster, never mixed with another group's, under
the same stream caps), the admin's review of one group, and the list of a board's groups
with their players, which the board page offers to pick from."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from podium import metrics
from podium.serve.app import create_app
from tests.integration.conftest import KINDS_WITH_SPLIT, Api, Backends, settings_for
from tests.integration.test_web import RawStream

pytestmark = pytest.mark.asyncio

BOARDS = [
    {"name": "nations", "window": "week", "group_by": "country"},
    {"name": "week", "window": "week"},
]
STREAMS_PER_CLIENT = 2


@pytest.fixture
async def served(
    config_kind: str, backend_urls: Backends, sqlite_url: str
) -> AsyncIterator[tuple[Any, Api]]:
    """The app itself (a stream is read as raw ASGI) and a client of it."""
    postgres_url, prefix, shards = backend_urls
    settings = settings_for(
        config_kind,
        sqlite_url,
        postgres_url,
        prefix,
        shards=shards,
        boards=BOARDS,
        server={"max_streams_per_client": STREAMS_PER_CLIENT},
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        podium = app.state.podium
        _, game = await podium.keys.create("gs", ["default"], False)
        _, admin = await podium.keys.create("admin", [], True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as client:
            yield app, Api(client, app.state.backends, game, admin)


async def _countries(api: Api, **countries: str | None) -> None:
    h = api.auth(api.admin_key)
    for player, country in countries.items():
        r = await api.client.put(
            f"/v1/players/{player}/profile", json={"country": country}, headers=h
        )
        assert r.status_code == 204, r.text


def _rows(page: dict[str, Any]) -> list[tuple[str, int]]:
    return [(e["playerId"], e["points"]) for e in page["entries"]]


async def _until_rows(stream: RawStream, rows: list[tuple[str, int]]) -> dict[str, Any]:
    """The stream's events until one shows exactly ``rows`` (generous: the broadcaster
    reads once a second, behind the updater)."""
    deadline = time.monotonic() + 15
    while True:
        frame = await stream.event(timeout=max(0.1, deadline - time.monotonic()))
        if _rows(frame) == rows:
            return frame


async def test_a_group_streams_its_own_board(served: tuple[Any, Api]) -> None:
    app, api = served
    hub = app.state.streams
    hub.heartbeat_s = 0.05
    await _countries(api, a="FR", b="DE", c="FR")
    assert (await api.submit("m1", [("a", 30), ("b", 50)])).status_code == 200
    await api.settle()

    fr = RawStream(app, "/v1/boards/nations/stream?group=FR")
    de = RawStream(app, "/v1/boards/nations/stream?group=DE")
    for s in (fr, de):
        start = await asyncio.wait_for(s.sent.get(), 5)
        assert start["status"] == 200, start
    first_fr, first_de = await fr.event(timeout=5), await de.event(timeout=5)
    assert first_fr["window"].endswith("@FR") and _rows(first_fr) == [("a", 30)]
    assert first_de["window"].endswith("@DE") and _rows(first_de) == [("b", 50)]
    assert hub.broadcaster("nations", "FR").subscribers == 1
    assert hub.broadcaster("nations", "DE").subscribers == 1
    # The gauge stays by board: every group's streams together.
    assert metrics.STREAM_CLIENTS.labels("nations")._value.get() == 2

    # The caps count streams whatever their group: a third one from this client is refused.
    third = RawStream(app, "/v1/boards/nations/stream?group=ZZ")
    refused = await asyncio.wait_for(third.sent.get(), 5)
    assert refused["status"] == 429, refused
    await asyncio.wait_for(third.task, 5)

    # A result recorded now reaches its group's stream, and only that one.
    assert (await api.submit("m2", [("c", 40)])).status_code == 200
    moved = await _until_rows(fr, [("c", 40), ("a", 30)])
    assert moved["window"] == first_fr["window"]
    await api.settle()
    for _ in range(5):  # the other group's board did not change: heartbeats only
        assert not (await de.chunk()).startswith(b"data: ")

    for s in (fr, de):
        s.hang_up.set()
        await asyncio.wait_for(s.task, 5)
    assert not hub.broadcaster("nations", "FR").running
    assert not hub.broadcaster("nations", "DE").running
    assert metrics.STREAM_CLIENTS.labels("nations")._value.get() == 0
    # Both slots are free again.
    again = RawStream(app, "/v1/boards/nations/stream?group=DE")
    assert (await asyncio.wait_for(again.sent.get(), 5))["status"] == 200
    again.hang_up.set()
    await asyncio.wait_for(again.task, 5)


async def test_a_stream_names_a_group_exactly_where_the_board_has_groups(
    served: tuple[Any, Api],
) -> None:
    app, _ = served
    for path, says in (
        ("/v1/boards/nations/stream", "name a group"),
        ("/v1/boards/week/stream?group=FR", "not split into groups"),
        ("/v1/boards/nations/stream?group=fr", "group"),
    ):
        # Read raw: a stream wrongly opened would never end for a test client.
        s = RawStream(app, path)
        start = await asyncio.wait_for(s.sent.get(), 5)
        assert start["status"] == 422, (path, start)
        assert dict(start["headers"])[b"content-type"].startswith(b"application/problem+json")
        assert says in json.loads(await s.chunk())["detail"], path
        s.hang_up.set()
        await asyncio.wait_for(s.task, 5)


async def test_the_review_of_one_group(served: tuple[Any, Api]) -> None:
    _, api = served
    h = api.auth(api.admin_key)
    await _countries(api, a="FR", b="DE", c="FR")
    assert (await api.submit("m1", [("a", 30), ("b", 50), ("c", 10)])).status_code == 200
    await api.settle()
    fr = {"board": "nations", "group": "FR"}
    r = await api.client.get("/v1/admin/review", params=fr, headers=h)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["board"] == "nations" and body["window"].endswith("@FR")
    assert [(e["playerId"], e["points"]) for e in body["top"]] == [("a", 30), ("c", 10)]
    de = await api.client.get(
        "/v1/admin/review", params={"board": "nations", "group": "DE", "top": 5}, headers=h
    )
    assert de.status_code == 200, de.text
    assert [e["playerId"] for e in de.json()["top"]] == ["b"]
    # The same window by its grouped id says the same.
    window = body["window"]
    by_id = await api.client.get(
        "/v1/admin/review", params={"board": "nations", "window": window}, headers=h
    )
    assert by_id.status_code == 200 and by_id.json()["top"] == body["top"]

    for params, says in (
        ({"board": "nations"}, "name a group"),
        ({"board": "week", "group": "FR"}, "not split into groups"),
        ({"board": "nations", "group": "France"}, "group"),
    ):
        r = await api.client.get("/v1/admin/review", params=params, headers=h)
        assert r.status_code == 422, (params, r.text)
        assert says in r.json()["detail"], r.json()
    # Still the admin's: a game server's key is refused.
    r = await api.client.get(
        "/v1/admin/review", params={"board": "nations", "group": "FR"}, headers=api.auth()
    )
    assert r.status_code == 403


async def _groups(api: Api, board: str = "nations", **params: str) -> httpx.Response:
    api.podium.groups.forget()  # past the few seconds the answer is held for everyone
    return await api.client.get(f"/v1/boards/{board}/groups", params=params)


@pytest.mark.parametrize("config_kind", KINDS_WITH_SPLIT, indirect=True)
async def test_a_board_lists_its_groups_with_their_players(served: tuple[Any, Api]) -> None:
    _, api = served
    h = api.auth(api.admin_key)
    r = await _groups(api)
    assert r.status_code == 200, r.text
    empty = r.json()
    assert empty["groups"] == [] and "@" not in empty["window"]
    current = empty["window"]

    await _countries(api, a="FR", b="FR", c="DE")
    assert (await api.submit("m1", [("a", 30), ("b", 20), ("c", 50), ("d", 5)])).status_code == 200
    await api.settle()
    body = (await _groups(api)).json()
    assert body["board"] == "nations" and body["window"] == current
    assert body["groups"] == [
        {"group": "FR", "players": 2},
        {"group": "DE", "players": 1},
        {"group": "ZZ", "players": 1},  # d has no country
    ]
    assert (await _groups(api, window=current)).json()["groups"] == body["groups"]

    # c moves to France: France has three, Germany nobody, and is no longer offered.
    await _countries(api, c="FR")
    await api.settle()
    assert (await _groups(api)).json()["groups"] == [
        {"group": "FR", "players": 3},
        {"group": "ZZ", "players": 1},
    ]
    # A ban takes a player off their group's board, and out of its count.
    ban = await api.client.post("/v1/admin/players/a/ban", json={"reason": "r"}, headers=h)
    assert ban.status_code == 204
    await api.settle()
    assert (await _groups(api)).json()["groups"][0] == {"group": "FR", "players": 2}

    # A frozen group counts its final standings.
    froze = await api.client.post(
        f"/v1/admin/boards/nations/windows/{current}@ZZ/freeze", headers=h
    )
    assert froze.status_code == 200, froze.text
    zz = next(g for g in (await _groups(api)).json()["groups"] if g["group"] == "ZZ")
    assert zz["players"] == froze.json()["players"] == 1

    # An earlier window the board has no results in: no groups.
    week = api.podium.boards.board("nations").rule.window_at(int(time.time()))
    assert week is not None
    before = api.podium.boards.board("nations").rule.window_at(week.start - 1)
    assert before is not None
    r = await _groups(api, window=before.id)
    assert r.status_code == 200 and r.json() == {**r.json(), "window": before.id, "groups": []}

    for board, params, status, says in (
        ("week", {}, 422, "not split into groups"),
        ("nope", {}, 404, "nope"),
        ("nations", {"window": f"{current}@FR"}, 422, "names a group"),
        ("nations", {"window": "2026-10-28"}, 422, ""),
        ("nations", {"window": "x" * 20}, 422, ""),
    ):
        r = await _groups(api, board, **params)
        assert r.status_code == status, (board, params, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert says in r.json()["detail"], r.json()
