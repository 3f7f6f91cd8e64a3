"""The API end to end, over the configurations: embedded (SQLite + in-process index +
outbox) and production (Postgres + Redis + outbox) for every module; and, for the modules
that name it in ``CONFIG_KINDS``, split (a Postgres home and two shard databases, the Redis
index in four shards, the outbox as the log)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx
import pytest

from podium import bootstrap
from podium.config.settings import Settings, parse
from podium.serve.app import create_app
from podium.service.wiring import Service
from podium.workers import aggregator
from tests.conftest import REDIS_URL
from tests.contract.conftest import postgres_databases  # noqa: F401 (a fixture)

# The kinds every module runs on. "split" is left out by default: each split test makes
# three databases and migrates them, and the split store has its own suites (test_split*,
# the store contract); a module whose tests go through the store (recording, retries,
# bans, profiles, freezes, the record path's errors) opts in with a module-level
# ``CONFIG_KINDS = KINDS_WITH_SPLIT``.
KINDS = ("embedded", "production")
KINDS_WITH_SPLIT = (*KINDS, "split")
SPLIT_INDEX_SHARDS = 4


@dataclass
class Api:
    client: httpx.AsyncClient
    backends: bootstrap.Backends  # the service and its ports, for tests that look behind it
    game_key: str
    admin_key: str
    # endedAt of each match id sent so far: sending a match again without naming endedAt is
    # a true retry (same content), even when the clock has moved to the next second.
    ended: dict[str, float] = field(default_factory=dict)
    # On a split index: the steps of the aggregators in this test (None elsewhere).
    aggregated: AggregatorSteps | None = None

    @property
    def podium(self) -> Service:
        return self.backends.podium

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
            pending, _ = await self.backends.store.outbox_backlog(time.time())
            return pending == 0

        # generous: after an outage the updater may be in its (capped, 5 s) backoff
        assert await self.until(empty, timeout=15), "the updater did not drain the outbox"
        await self.fresh()

    async def fresh(self) -> None:
        """On a split index, wait for an aggregator snapshot made after now and read it
        (not one held from before): a split board's pages and top ranks come from it, and
        lag every write (a ban too) by up to a cycle. Nothing to wait for elsewhere."""
        if self.aggregated is not None:
            await self.aggregated.after(time.monotonic())
            self.podium.reads.clear_cache()

    async def page(self, board: str = "week", **params: Any) -> dict[str, Any]:
        # Bypass the one-second page cache so tests see the index as it is now.
        self.podium.reads.clear_cache()
        r = await self.client.get(f"/v1/boards/{board}", params=params)
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]


class AggregatorSteps:
    """Counts the aggregator's cycles on a split index, so that a test waits for a snapshot
    made after its writes instead of sleeping past the aggregator's period."""

    PERIOD_S = 0.02  # the aggregator's period in these tests (1 s in production)

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.last_start = float("-inf")  # when the last completed step of a leader began
        monkeypatch.setattr(aggregator, "PERIOD_S", self.PERIOD_S)
        step = aggregator.Aggregator.step

        async def counted(agg: aggregator.Aggregator) -> int:
            started = time.monotonic()
            published = await step(agg)
            if agg.fence is not None:  # the leader's step: it published every live window
                self.last_start = max(self.last_start, started)
            return published

        monkeypatch.setattr(aggregator.Aggregator, "step", counted)

    async def after(self, t: float, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self.last_start < t:
            assert time.monotonic() < deadline, "no aggregator step since the writes"
            await asyncio.sleep(self.PERIOD_S / 2)


def settings_for(
    kind: str,
    sqlite_url: str,
    postgres_url: str | None,
    prefix: str | None,
    *,
    shards: Sequence[str] = (),
    **extra: Any,
) -> Settings:
    """``postgres_url`` is the database (production) or the home (split, with ``shards``
    the databases that hold the players)."""
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
    if kind == "split":
        assert shards, "a split store needs its shard databases"
        raw["store"]["shards"] = list(shards)
        # Pools of about one Postgres database's worth over its three: at the default 10 +
        # 10 each, one split process could take 60 of the machine's 100 connections, which
        # the other test workers share.
        raw["store"].update(pool_size=4, read_pool_size=3)
        raw["index"].setdefault("shards", SPLIT_INDEX_SHARDS)
    return parse(raw)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that asks for ``config_kind`` on its module's ``CONFIG_KINDS``,
    unless the module has a ``config_kind`` fixture of its own or the test parametrizes it
    itself."""
    if "config_kind" not in metafunc.fixturenames or hasattr(metafunc.module, "config_kind"):
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if isinstance(names, str):
            names = names.replace(" ", "").split(",")
        if "config_kind" in names:
            return
    kinds = getattr(metafunc.module, "CONFIG_KINDS", KINDS)
    metafunc.parametrize("config_kind", kinds, indirect=True)


@pytest.fixture
def config_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Backends(NamedTuple):
    """Where a test's configuration keeps its data: the Postgres database (production) or
    home (split), the Redis prefix, and on split the shard databases. All None (and no
    shards) on embedded."""

    postgres_url: str | None
    prefix: str | None
    shards: tuple[str, ...] = ()


@pytest.fixture
async def split_databases(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> list[str]:
    """Three fresh databases (the home, then the two shards), made at once and dropped
    after the test."""
    return await postgres_databases(3)


@pytest.fixture
def backend_urls(config_kind: str, request: pytest.FixtureRequest) -> Backends:
    """The test's own databases and prefix. A sync fixture, so that it may ask for the
    async service fixtures only when its configuration needs them."""
    if config_kind == "production":
        return Backends(
            request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_prefix")
        )
    if config_kind == "split":
        home, *shards = request.getfixturevalue("split_databases")
        return Backends(home, request.getfixturevalue("redis_prefix"), tuple(shards))
    return Backends(None, None)


@pytest.fixture
async def make_api(
    config_kind: str,
    backend_urls: Backends,
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Callable[..., Any]]:
    """A factory: ``await make_api(**settings)`` gives a running app on this configuration."""
    postgres_url, prefix, shards = backend_urls
    stack: list[Any] = []
    steps = AggregatorSteps(monkeypatch) if config_kind == "split" else None

    async def make(**extra: Any) -> Api:
        settings = settings_for(
            config_kind, sqlite_url, postgres_url, prefix, shards=shards, **extra
        )
        return await started_api(settings, stack, aggregated=steps)

    yield make
    await close_all(stack)


def two_player_match(rng: random.Random, players: Sequence[str]) -> dict[str, Any]:
    """A match body of two players drawn from ``players``, ended now, as the tests of real
    processes send them."""
    a, b = rng.sample(list(players), 2)
    return {
        "mode": "default",
        "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "durationSeconds": 60,
        "results": [
            {"playerId": a, "points": rng.randint(1, 100)},
            {"playerId": b, "points": rng.randint(1, 100)},
        ],
    }


async def started_api(settings: Settings, stack: list[Any], **api: Any) -> Api:
    """The app on these settings, started, with a game server's key and an admin's, and a
    client of it; what it opened goes on ``stack``, for ``close_all``."""
    app = create_app(settings)
    ctx = app.router.lifespan_context(app)
    await ctx.__aenter__()
    stack.append(ctx)
    podium: Service = app.state.podium
    _, game = await podium.keys.create("gs", ["default"], False)
    _, admin = await podium.keys.create("admin", [], True)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://podium")
    stack.append(client)
    return Api(client, app.state.backends, game, admin, **api)


async def close_all(stack: list[Any]) -> None:
    """What ``started_api`` opened, last first."""
    for item in reversed(stack):
        if isinstance(item, httpx.AsyncClient):
            await item.aclose()
        else:
            await item.__aexit__(None, None, None)


@pytest.fixture
async def api(make_api: Callable[..., Any]) -> Api:
    return await make_api()  # type: ignore[no-any-return]
