"""A match's results in their plain form (api/hot.py: ``Content-Type: application/json``
exactly, a body that validates) are answered ahead of the stack, and answered as the full
route answers them: the same status, body and headers for the same request, its errors
included. The full route is reached by the same request with ``; charset=utf-8`` on its
media type, which the plain form leaves to it."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from podium import metrics
from podium.api import hot
from tests.integration.conftest import Api

pytestmark = pytest.mark.asyncio

PLAIN = "application/json"
FULL = "application/json; charset=utf-8"
HEADERS = ("content-type", "content-length", "retry-after", "x-content-type-options")


def _body(results: list[tuple[str, Any]], mode: str = "default") -> dict[str, Any]:
    return {
        "mode": mode,
        "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60)),
        "durationSeconds": 300,
        "results": [{"playerId": p, "points": pts} for p, pts in results],
    }


async def _post(api: Api, match: str, body: Any, kind: str, key: str | None = None) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {**api.auth(key), "content-type": kind}
    return await api.client.post(f"/v1/matches/{match}/results", content=raw, headers=headers)


def _same(a: httpx.Response, b: httpx.Response) -> None:
    assert a.status_code == b.status_code, (a.text, b.text)
    assert a.content == b.content
    for header in HEADERS:
        assert a.headers.get(header) == b.headers.get(header), header


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The match ids the plain form recorded (the full route calls its own binding)."""
    seen: list[str] = []
    record = hot.record_match

    async def counted(request: Any, key: Any, match_id: str, body: Any) -> Any:
        seen.append(match_id)
        return await record(request, key, match_id, body)

    monkeypatch.setattr(hot, "record_match", counted)
    return seen


@pytest.mark.parametrize("config_kind", ["embedded", "production"], indirect=True)
async def test_the_plain_form_answers_as_the_full_route(api: Api, taken: list[str]) -> None:
    accepted = metrics.REGISTRY.get_sample_value("podium_matches_accepted_total") or 0.0
    body = _body([("p1", 30), ("p2", 20)])
    a = await _post(api, "m1", body, PLAIN)
    b = await _post(api, "m1", body, FULL)  # the same match again: the same answer
    assert a.status_code == 200 and a.json()["players"][0]["totals"]
    _same(a, b)
    b = await _post(api, "m2", body, FULL)  # the other way round
    a = await _post(api, "m2", body, PLAIN)
    _same(a, b)
    assert taken == ["m1", "m2"]  # the plain form took the plain requests, and only them
    now = metrics.REGISTRY.get_sample_value("podium_matches_accepted_total") or 0.0
    assert now - accepted == 4
    # A conflict (the same match with other results), an unknown key, a key of another
    # scope: the same problem+json both ways, and nothing recorded.
    other = _body([("p1", 99)])
    _same(await _post(api, "m1", other, PLAIN), await _post(api, "m1", other, FULL))
    refused = await _post(api, "m3", body, PLAIN, key="pk_nobody")
    assert refused.status_code == 401
    _same(refused, await _post(api, "m3", body, FULL, key="pk_nobody"))
    forbidden = await _post(api, "m3", body, PLAIN, key=api.admin_key)
    assert forbidden.status_code == 403
    _same(forbidden, await _post(api, "m3", body, FULL, key=api.admin_key))
    await api.settle()
    page = await api.page()
    assert {e["playerId"]: e["points"] for e in page["entries"]} == {"p1": 60, "p2": 40}


async def test_a_body_the_plain_form_cannot_take_is_the_full_route_s(
    api: Api, taken: list[str]
) -> None:
    cases: list[tuple[bytes, str]] = [
        (b'{"mode": "default", "mode": "ranked"}', "appears more than once"),
        (b"{not json", "JSON"),
        (json.dumps(_body([("p 1", 5)])).encode(), "playerId"),
        (json.dumps({**_body([("p1", 5)]), "extra": 1}).encode(), "extra"),
        (b"", "Field required"),
    ]
    for raw, said in cases:
        r = await _post(api, "m1", raw, PLAIN)
        assert r.status_code == 422, (raw, r.text)
        assert said in r.text, (raw, r.text)
        _same(r, await _post(api, "m1", raw, FULL))
    big = await _post(api, "m1", b" " * (100 * 1024) + b"{}", PLAIN)
    assert big.status_code == 413
    assert taken == []
    assert (await _post(api, "m1", _body([("p1", 5)]), PLAIN)).status_code == 200
    assert taken == ["m1"]
