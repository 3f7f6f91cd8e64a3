"""Which requests the hot route takes (api/hot.py): the plain form of the rank and top page
reads only; every other spelling goes on to the full routes, which validate it."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.routing import Match

from podium.api.hot import HotRoute


def scope(path: str, query: str = "", method: str = "GET") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "query_string": query.encode()}


def handled(path: str, query: str = "", method: str = "GET") -> tuple[dict[str, str], Any]:
    match, child = HotRoute().matches(scope(path, query, method))
    assert match is Match.FULL
    _, params, q = child["podium.hot"]
    return params, q


def passed(path: str, query: str = "", method: str = "GET") -> bool:
    match, child = HotRoute().matches(scope(path, query, method))
    return match is Match.NONE and child == {}


def test_the_plain_forms_are_taken_with_their_values() -> None:
    assert handled("/v1/boards/week/players/p_01", "neighbors=2") == (
        {"board": "week", "playerId": "p_01"},
        {"neighbors": 2},
    )
    assert handled("/v1/boards/week/players/a.b:c-d") == (
        {"board": "week", "playerId": "a.b:c-d"},
        {},
    )
    assert handled("/v1/boards/week", "limit=100&offset=0") == (
        {"board": "week"},
        {"limit": 100, "offset": 0},
    )
    assert handled("/v1/boards/all-time_2") == ({"board": "all-time_2"}, {})


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/v1/boards/week/players/p1", "neighbors=51"),  # out of range: a 422 there
        ("/v1/boards/week/players/p1", "neighbors=02"),  # another spelling
        ("/v1/boards/week/players/p1", "neighbors=%32"),
        ("/v1/boards/week/players/p1", "neighbors=-1"),
        ("/v1/boards/week/players/p1", "neighbors"),
        ("/v1/boards/week/players/p1", "neighbors=2&neighbors=3"),  # a key twice
        ("/v1/boards/week/players/p1", "above=1"),  # another parameter
        ("/v1/boards/week/players/p1", "window=2026-W01"),
        ("/v1/boards/week/players/p1", "group=FR"),
        ("/v1/boards/week", "limit=0"),
        ("/v1/boards/week", "limit=101"),
        ("/v1/boards/week", "cursor=abc"),
        ("/v1/boards/week", "window=2026-W01"),
        ("/v1/boards/week", "limit=5&"),
        ("/v1/boards/Week", ""),  # not a board's name
        ("/v1/boards/week/", ""),  # the full routes answer a trailing slash
        ("/v1/boards/week/players/-p", ""),  # not a player id
        ("/v1/boards/week/players/p1/friends", ""),
        ("/v1/boards/week/distribution", ""),
        ("/v1/boards", ""),
        ("/v1/players/p1/history", ""),
    ],
)
def test_every_other_form_goes_to_the_full_routes(path: str, query: str) -> None:
    assert passed(path, query)


def test_only_get_is_taken() -> None:
    # HEAD reaches the routes as a GET (protocol.HeadAsGet); other methods are the full
    # routes' to refuse (405 with Allow).
    assert passed("/v1/boards/week", "", "POST")
    assert passed("/v1/boards/week", "", "HEAD")
    assert HotRoute().matches({"type": "websocket", "path": "/v1/boards/week"})[0] is Match.NONE
