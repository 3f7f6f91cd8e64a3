"""The API end to end, over both configurations: embedded (SQLite + in-process index +
outbox) and production (Postgres + Redis + outbox)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from podium.api.app import create_app
from podium.config import Settings, parse
from podium.service import Podium
from tests.conftest import REDIS_URL


@dataclass
class Api:
    client: httpx.AsyncClient
    podium: Podium
    game_key: str
    admin_key: str
    # endedAt of each match id sent so far: sending a match again without naming endedAt is
    # a true retry (same content), even when the clock has moved to the next second.
    ended: dict[str, float] = field(default_factory=dict)

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.game_key}"}

    async def submit(
        self,
        match_id: str,
        results: list[tuple[str, int]],
        *,
        mode: str = "default",
        ended_at: float | None = None,
        duration: int = 300,
        key: str | None = None,
    ) -> httpx.Response:
        body = {
            "mode": mode,
            "endedAt": time.strftime(
                "%Y-%m-%dT%H:%M:%SZ",
                time.gmtime(ended_at or self.ended.setdefault(match_id, time.time())),
            ),
            "durationSeconds": duration,
            "results": [{"playerId": p, "points": pts} for p, pts in results],
        }
        return await self.client.post(
            f"/v1/matches/{match_id}/results", json=body, headers=self.auth(key)
        )

    async def until(self, check: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Poll an async check until it returns something truthy: the board is updated by a
        background updater, at least once and soon, not within the request."""
        deadline = time.monotonic() + timeout
        while True:
            out = await check()
            if out or time.monotonic() > deadline:
                return out
            await asyncio.sleep(0.02)

    async def settle(self) -> None:
        """Wait until the updater has applied every committed change (it acks, and the
        outbox row goes, only after the index write)."""

        async def empty() -> bool:
            pending, _ = await self.podium.store.outbox_backlog(time.time())
            return pending == 0

        # generous: after an outage the updater may be in its (capped, 5 s) backoff
        assert await self.until(empty, timeout=15), "the updater did not drain the outbox"

    async def page(self, board: str = "week", **params: Any) -> dict[str, Any]:
        # Bypass the one-second page cache so tests see the index as it is now.
        self.podium.reads.clear_cache()
        r = await self.client.get(f"/v1/boards/{board}", params=params)
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]


def settings_for(
    kind: str, sqlite_url: str, postgres_url: str | None, prefix: str | None, **extra: Any
) -> Settings:
    raw: dict[str, Any] = {
        "server": {"read_rate_per_s": 0, **extra.pop("server", {})},
        "workers": {"idle_sleep_s": 0.005},
        **extra,
    }
    if kind == "embedded":
        raw["store"] = {"url": sqlite_url}
    else:
        raw["store"] = {"url": postgres_url}
        raw["index"] = {"url": REDIS_URL, "prefix": prefix, **raw.get("index", {})}
    return parse(raw)


@pytest.fixture(params=["embedded", "production"])
def config_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend_urls(config_kind: str, request: pytest.FixtureRequest) -> tuple[str | None, str | None]:
    """(postgres url, redis prefix) for production; (None, None) for embedded. A sync
    fixture, so that it may ask for the async service fixtures only when needed."""
    if config_kind == "production":
        return request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_prefix")
    return None, None


@pytest.fixture
async def make_api(
    config_kind: str, backend_urls: tuple[str | None, str | None], sqlite_url: str
) -> AsyncIterator[Callable[..., Any]]:
    """A factory: ``await make_api(**settings)`` gives a running app on this configuration."""
    postgres_url, prefix = backend_urls
    stack: list[Any] = []

    async def make(**extra: Any) -> Api:
        settings = settings_for(config_kind, sqlite_url, postgres_url, prefix, **extra)
        app = create_app(settings)
        ctx = app.router.lifespan_context(app)
        await ctx.__aenter__()
        stack.append(ctx)
        podium: Podium = app.state.podium
        _, game = await podium.create_key("gs", ["default"], False)
        _, admin = await podium.create_key("admin", [], True)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://podium")
        stack.append(client)
        return Api(client, podium, game, admin)

    yield make
    for item in reversed(stack):
        if isinstance(item, httpx.AsyncClient):
            await item.aclose()
        else:
            await item.__aexit__(None, None, None)


@pytest.fixture
async def api(make_api: Callable[..., Any]) -> Api:
    return await make_api()  # type: ignore[no-any-return]
