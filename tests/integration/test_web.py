"""The browser side over HTTP: pages and assets, the ops figures, the live stream (driven
as raw ASGI, since a test client would wait for an endless body), and the demo."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from podium import metrics
from podium.domain.models import PlayerResult, Scope
from podium.serve.app import create_app
from podium.serve.demo import Simulator
from podium.service.wiring import Service
from tests.integration.conftest import Api, settings_for

pytestmark = pytest.mark.asyncio


@pytest.fixture
def config_kind() -> str:
    return "embedded"  # nothing here depends on the backend


async def test_pages_and_assets_are_served(api: Api) -> None:
    for path, kind in [
        ("/", "text/html"),
        ("/ops", "text/html"),
        ("/static/app.js", "javascript"),
        ("/static/ops.js", "javascript"),
        ("/static/style.css", "text/css"),
        ("/static/avatars/0.svg", "image/svg+xml"),
    ]:
        r = await api.client.get(path)
        assert r.status_code == 200, path
        assert kind in r.headers["content-type"], (path, r.headers["content-type"])
    assert "<table" in (await api.client.get("/")).text
    assert (await api.client.get("/static/nope.js")).status_code == 404


async def test_ops_figures_need_an_ops_key(api: Api) -> None:
    _, ops_key = await api.podium.keys.create("ops", [], scope=Scope.OPS)
    assert (await api.client.get("/v1/admin/ops")).status_code == 401
    assert (await api.client.get("/v1/admin/ops", headers=api.auth())).status_code == 403
    admin = await api.client.get("/v1/admin/ops", headers=api.auth(api.admin_key))
    assert admin.status_code == 403
    assert (await api.submit("m1", [("a", 10), ("b", 5)])).status_code == 200
    await api.settle()
    r = await api.client.get("/v1/admin/ops", headers=api.auth(ops_key))
    assert r.status_code == 200, r.text
    body = r.json()
    assert abs(body["now"] - time.time()) < 60
    counters = {f["name"]: f for f in body["counters"]}
    gauges = {f["name"]: f for f in body["gauges"]}
    histograms = {f["name"]: f for f in body["histograms"]}
    # Every family of the registry is there, so a metric added later reaches the page.
    every = {m.name for m in metrics.REGISTRY.collect()}
    assert every == set(counters) | set(gauges) | set(histograms)
    accepted = counters["podium_results_accepted"]
    assert accepted["help"] and accepted["series"][0]["value"] >= 2
    assert "podium_outbox_age_seconds" in gauges
    commit = histograms["podium_commit_to_board_seconds"]["series"][0]
    les = [le for le, _ in commit["buckets"]]
    assert les[-1] is None and les[:-1] == sorted(les[:-1])  # null is +Inf, last
    counts = [n for _, n in commit["buckets"]]
    assert counts == sorted(counts) and counts[-1] == commit["count"] >= 2


async def test_a_stream_for_an_unknown_board_is_a_problem(api: Api) -> None:
    r = await api.client.get("/v1/boards/nope/stream")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")


@pytest.fixture
async def app_and_podium(sqlite_url: str) -> AsyncIterator[tuple[Any, Service]]:
    app = create_app(settings_for("embedded", sqlite_url, None, None))
    async with app.router.lifespan_context(app):
        yield app, app.state.podium


class RawStream:
    """One GET on the ASGI app with a receive channel we control, so the test can read an
    endless body chunk by chunk and then hang up like a browser closing its tab. ``path``
    may end in a query string."""

    def __init__(self, app: Any, path: str) -> None:
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.hang_up = asyncio.Event()
        self._asked = False
        path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"podium"), (b"accept", b"text/event-stream")],
            "client": ("127.0.0.1", 40000),
            "server": ("podium", 80),
        }
        self.task = asyncio.create_task(app(scope, self._receive, self.sent.put))

    async def _receive(self) -> dict[str, Any]:
        if not self._asked:
            self._asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.hang_up.wait()
        return {"type": "http.disconnect"}

    async def chunk(self, timeout: float = 3.0) -> bytes:
        msg = await asyncio.wait_for(self.sent.get(), timeout)
        assert msg["type"] == "http.response.body", msg
        return bytes(msg["body"])

    async def event(self, timeout: float = 3.0) -> dict[str, Any]:
        """The next ``data:`` event, skipping comments and the retry line."""
        deadline = time.monotonic() + timeout
        while True:
            raw = await self.chunk(max(0.01, deadline - time.monotonic()))
            if raw.startswith(b"data: "):
                return json.loads(raw[6:])  # type: ignore[no-any-return]


async def test_the_stream_sends_at_once_then_changes_then_heartbeats(
    app_and_podium: tuple[Any, Service],
) -> None:
    app, podium = app_and_podium
    hub = app.state.streams
    hub.heartbeat_s = 0.05
    _, secret = await podium.keys.create("gs", ["default"], False)
    key = await podium.keys.authenticate(secret)

    stream = RawStream(app, "/v1/boards/week/stream")
    start = await asyncio.wait_for(stream.sent.get(), 3)
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"].startswith(b"text/event-stream")
    assert headers[b"cache-control"] == b"no-cache"
    first = await stream.event()
    assert first["board"] == "week" and first["entries"] == []
    assert hub.broadcaster("week").subscribers == 1
    assert metrics.STREAM_CLIENTS.labels("week")._value.get() == 1

    await podium.matches.record(key, "m1", "default", int(time.time()), 300, [PlayerResult("a", 7)])
    moved = await stream.event(timeout=5)
    assert moved["entries"] == [{"rank": 1, "playerId": "a", "points": 7}]
    assert b": keep-alive" in await stream.chunk()  # nothing changes: heartbeats only

    stream.hang_up.set()
    await asyncio.wait_for(stream.task, 3)
    assert not hub.broadcaster("week").running
    assert metrics.STREAM_CLIENTS.labels("week")._value.get() == 0


async def test_the_demo_fills_a_board_with_named_players(
    app_and_podium: tuple[Any, Service],
) -> None:
    app, podium = app_and_podium
    sim = Simulator(podium, players=30, matches_per_s=50, seed=7)
    task = asyncio.create_task(sim.run())
    try:
        deadline = time.monotonic() + 10
        page = await podium.reads.page("week", None, 0, 100)
        while len(page.entries) < 20 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            podium.reads.clear_cache()
            page = await podium.reads.page("week", None, 0, 100)
    finally:
        task.cancel()
        (outcome,) = await asyncio.gather(task, return_exceptions=True)
    if not isinstance(outcome, asyncio.CancelledError):
        raise AssertionError("the simulator stopped by itself") from outcome
    assert len(page.entries) >= 20
    assert all(
        e.name and e.avatar and e.avatar.startswith("/static/avatars/") for e in page.entries
    )
    assert await app.state.backends.store.friends(page.entries[0].player_id)
    # The avatars it hands out exist.
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x")
    async with client:
        for e in page.entries[:5]:
            assert (await client.get(e.avatar or "")).status_code == 200
