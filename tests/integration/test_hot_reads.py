"""The hot reads' plain form (api/hot.py) answers what the full routes answer: the same
body and headers for the same read, and the same problem+json for its errors. A value
spelled otherwise (``neighbors=02``) is the full route's, so each pair below is one read
answered both ways."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Api

pytestmark = pytest.mark.asyncio


async def _both(api: Api, path: str, hot: str, full: str) -> tuple[Any, Any]:
    a = await api.client.get(f"{path}?{hot}")
    b = await api.client.get(f"{path}?{full}")
    return a, b


def _same(a: Any, b: Any) -> None:
    assert a.status_code == b.status_code, (a.text, b.text)
    assert a.content == b.content
    headers = ("content-type", "cache-control", "content-length", "retry-after")
    for header in (*headers, "x-content-type-options"):
        assert a.headers.get(header) == b.headers.get(header), header


@pytest.mark.parametrize("config_kind", ["embedded", "production"], indirect=True)
async def test_the_hot_form_answers_as_the_full_route(api: Api) -> None:
    for i in range(8):
        assert (await api.submit(f"m{i}", [(f"p{i}", 100 + i)])).status_code == 200
    await api.settle()
    a, b = await _both(api, "/v1/boards/week/players/p3", "neighbors=2", "neighbors=02")
    assert a.status_code == 200 and a.json()["rank"] == 5 and len(a.json()["neighbors"]) == 5
    _same(a, b)
    a, b = await _both(api, "/v1/boards/week", "limit=3", "limit=03")
    page = a
    assert [e["playerId"] for e in a.json()["entries"]] == ["p7", "p6", "p5"]
    _same(a, b)
    a, b = await _both(api, "/v1/boards/week", "limit=3&offset=3", "limit=3&offset=03")
    _same(a, b)
    # Errors: an unknown player and board (404), an offset past the exact top (422).
    a, b = await _both(api, "/v1/boards/week/players/nobody", "neighbors=1", "neighbors=01")
    assert a.status_code == 404 and a.headers["content-type"].startswith("application/problem+json")
    _same(a, b)
    a, b = await _both(api, "/v1/boards/nope", "limit=1", "limit=01")
    assert a.status_code == 404
    _same(a, b)
    a, b = await _both(api, "/v1/boards/week", "offset=999999", "offset=0999999")
    assert a.status_code == 422
    _same(a, b)
    # HEAD: the headers of the GET, no body.
    head = await api.client.head("/v1/boards/week?limit=3")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["cache-control"] == page.headers["cache-control"]
    assert head.headers["content-length"] == page.headers["content-length"]


async def test_the_hot_form_spends_the_shared_read_limit(make_api: Any) -> None:
    api = await make_api(server={"read_rate_per_s": 0.001, "read_burst": 2})
    got = [(await api.client.get("/v1/boards/week?limit=5")).status_code for _ in range(3)]
    assert got == [200, 200, 429]
    r = await api.client.get("/v1/boards/week/players/p1?neighbors=2")
    assert r.status_code == 429 and r.headers["retry-after"]
    assert r.headers["content-type"].startswith("application/problem+json")
