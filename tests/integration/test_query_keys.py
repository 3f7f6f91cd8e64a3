"""A query key given twice (issue 33): ``?limit=1&limit=2`` was read as the last one,
silently. No parameter of the API takes several values (a list is one value, comma-separated:
``?ids=a,b``), so a key twice is a 422 naming it, on every route, the hot reads and the plain
results answered ahead of the middlewares included; and it changes nothing."""

from __future__ import annotations

import typing

import pytest
from fastapi.routing import APIRoute

from podium.api import protocol
from tests.integration.conftest import Api
from tests.integration.test_api import problem
from tests.integration.test_probe_http import _now

pytestmark = pytest.mark.asyncio


def _twice(body: dict[str, typing.Any], key: str) -> None:
    assert f'"{key}"' in body["detail"] and "more than once" in body["detail"], body
    assert body["errors"] == [{"field": f"query.{key}", "message": body["errors"][0]["message"]}]


async def _on_the_board(api: Api) -> None:
    """Players a and b on the week board, so that every read below could be answered."""
    assert (await api.submit("m1", [("a", 5), ("b", 3)])).status_code == 200

    async def both() -> bool:
        r = await api.client.get("/v1/boards/week/players?ids=a,b")
        return r.status_code == 200 and not r.json()["absent"]

    await api.until(both)


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/v1/boards/week/players/a?neighbors=1&neighbors=2", "neighbors"),  # the hot rank
        ("/v1/boards/week?limit=1&limit=2", "limit"),  # the hot page
        ("/v1/boards/week?offset=0&limit=5&offset=1", "offset"),
        ("/v1/boards/week/players?ids=a&ids=b", "ids"),
        ("/v1/boards/week/players/a?neighbors=1&%6Eeighbors=2", "neighbors"),  # encoded
        ("/v1/boards/week/distribution?buckets=5&buckets", "buckets"),  # a blank one too
        ("/v1/boards/week/windows?limit=1&limit=1", "limit"),  # the same value twice
        ("/v1/boards/week/players/a/friends?window=2020-W01&window=2020-W02", "window"),
        ("/v1/tournaments?state=live&state=ended", "state"),
        ("/v1/boards?x=1&x=2", "x"),  # a key no route reads: twice is as wrong
    ],
)
async def test_a_query_key_given_twice_is_a_422_naming_it(api: Api, path: str, key: str) -> None:
    await _on_the_board(api)
    r = await api.client.get(path)
    _twice(problem(r, 422), key)


async def test_each_key_once_is_answered_as_before(api: Api) -> None:
    await _on_the_board(api)
    r = await api.client.get("/v1/boards/week?limit=1&offset=1")  # hot, two keys
    assert r.status_code == 200 and [e["playerId"] for e in r.json()["entries"]] == ["b"]
    r = await api.client.get("/v1/boards/week/players/a?neighbors=1")
    assert r.status_code == 200 and r.json()["rank"] == 1


async def test_results_with_a_query_key_twice_are_refused_and_record_nothing(api: Api) -> None:
    """The plain results, answered ahead of the middlewares (api/hot.py): held to the rule
    all the same."""
    body = {"mode": "default", "endedAt": _now(), "durationSeconds": 300}
    body["results"] = [{"playerId": "a", "points": 5}]
    r = await api.client.post("/v1/matches/m1/results?dry=1&dry=2", json=body, headers=api.auth())
    _twice(problem(r, 422), "dry")
    assert await api.backends.store.results_of("m1", ["a"]) == {}
    r = await api.submit("m1", [("a", 5)])
    assert r.status_code == 200, r.text


async def test_no_route_takes_a_query_parameter_several_times(api: Api) -> None:
    """What makes the rule whole: no route reads a query parameter as a list but those
    ``protocol.REPEATABLE`` names (none)."""
    app = api.client._transport.app  # type: ignore[attr-defined]
    many = set()
    for route in app.routes:
        if isinstance(route, APIRoute):
            for param in route.dependant.query_params:
                origin = typing.get_origin(param.field_info.annotation)
                if origin in (list, tuple, set, frozenset) or param.name in protocol.REPEATABLE:
                    many.add(param.name)
    assert many == set(protocol.REPEATABLE)
