"""End to end with each change log: results sent through the API reach the board (the log on
NATS JetStream, as on the outbox), and a replay by time mends a board whose index lost
writes (a Redis failover): after it the board equals the store again, and a second replay
changes nothing. A replay whose updater gave a batch up (it outlasted its lease while the
index was down) still applies it before it ends.

Configurations: the embedded one (SQLite, the in-process index) and the production one
(Postgres, Redis), each with the outbox as the log, with the machine's NATS (a stream of
the test's own, deleted afterwards) and with the machine's Kafka (topics of its own,
deleted afterwards).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from podium.bootstrap import Backends
from podium.errors import IndexUnavailable
from podium.ports import BoardKey, RankIndex
from podium.serve.app import create_app
from podium.workers import replay
from tests.integration.conftest import Api, settings_for
from tests.kafka_cluster import delete_topic, need_kafka, topic_name
from tests.nats_cluster import delete_stream, need_nats, stream_name

CONFIGS = [
    ("embedded", "outbox"),
    ("production", "outbox"),
    ("embedded", "nats"),
    ("production", "nats"),
    ("embedded", "kafka"),
    ("production", "kafka"),
]


@pytest.fixture(params=CONFIGS, ids=[f"{k}-{log}" for k, log in CONFIGS])
def config(request: pytest.FixtureRequest) -> tuple[str, str, str | None, str | None]:
    """(configuration, log, postgres url, redis prefix); a sync fixture, so that it may ask
    for the async service fixtures only when needed."""
    kind, log_kind = request.param
    if kind == "production":
        pg, prefix = (
            request.getfixturevalue("postgres_url"),
            request.getfixturevalue("redis_prefix"),
        )
        return kind, log_kind, pg, prefix
    return kind, log_kind, None, None


@pytest.fixture
async def app_api(
    config: tuple[str, str, str | None, str | None], sqlite_url: str
) -> AsyncIterator[tuple[Api, Backends]]:
    kind, log_kind, postgres_url, prefix = config
    extra: dict[str, Any] = {}
    stream = stream_name()
    nats_url = None
    if log_kind == "nats":
        nats_url = need_nats()
        extra["log"] = {"url": nats_url, "stream": stream, "partitions": 4}
    kafka = None
    if log_kind == "kafka":
        kafka, topic = need_kafka(), topic_name()
        extra["log"] = {
            "url": f"kafka://{kafka}",
            "partitions": 4,
            "kafka": {"topic": topic, "events_topic": f"{topic}-events", "group": f"{topic}-u"},
        }
    settings = settings_for(kind, sqlite_url, postgres_url, prefix, **extra)
    app = create_app(settings)
    ctx = app.router.lifespan_context(app)
    await ctx.__aenter__()
    try:
        podium = app.state.podium
        _, game = await podium.keys.create("gs", ["default"], False)
        _, admin = await podium.keys.create("admin", [], True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as client:
            yield Api(client, app.state.backends, game, admin), app.state.backends
    finally:
        await ctx.__aexit__(None, None, None)
        if nats_url is not None:
            await delete_stream([nats_url], stream)
        if kafka is not None:
            for t in (topic, f"{topic}-events"):
                await asyncio.to_thread(delete_topic, kafka, t)


async def stored_board(b: Backends, board: str, window: str) -> dict[str, int]:
    out: dict[str, int] = {}
    async for batch in b.store.standings(board, window):
        out |= {s.player_id: s.tally.total for s in batch}
    return out


async def shown_board(api: Api, board: str) -> tuple[str, dict[str, int]]:
    page = await api.page(board, limit=100)
    return page["window"], {e["playerId"]: e["points"] for e in page["entries"]}


async def test_results_reach_the_board_and_a_replay_mends_lost_writes(
    app_api: tuple[Api, Backends],
) -> None:
    api, b = app_api
    for m in range(6):
        r = await api.submit(f"m{m}", [(f"p{i}", 10 * m + i) for i in range(m % 3, 8)])
        assert r.status_code == 200, r.text
    window, _ = await shown_board(api, "week")
    stored = await stored_board(b, "week", window)
    assert len(stored) == 8

    async def shown_is_stored() -> bool:
        return (await shown_board(api, "week"))[1] == stored

    # through the relay and the updater, whichever the log
    assert await api.until(shown_is_stored, timeout=15), "the results did not reach the board"

    # A failover loses the latest writes: three players are missing, two show older totals.
    key = BoardKey("week", window)
    spec = next(s for s in b.settings.boards if s.name == "week")
    w = spec.rule.window_at(int(time.time()))
    assert w is not None and w.id == window
    kept = {p: t for p, t in stored.items() if p not in ("p1", "p4", "p6")}
    kept |= {"p0": 1, "p7": 2}
    await b.index.replace(
        key, [(p, spec.score(_tally(t), w)) for p, t in kept.items()], expire_at=None
    )
    assert (await shown_board(api, "week"))[1] == kept

    await b.replay(60)
    assert await api.until(shown_is_stored, timeout=15), "the replay did not mend the board"
    await b.replay(60)  # twice is harmless
    assert (await shown_board(api, "week"))[1] == stored
    assert await stored_board(b, "week", window) == stored  # and the record never moved


class _DownAWhile:
    """An index whose writes fail for ``down_s`` from the first one asked of it."""

    def __init__(self, index: RankIndex, down_s: float) -> None:
        self._index = index
        self._down_s = down_s
        self._up_at: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    def _check(self) -> None:
        now = time.monotonic()
        if self._up_at is None:
            self._up_at = now + self._down_s
        if now < self._up_at:
            raise IndexUnavailable("index down a while (the test's)")

    async def write(self, *args: Any, **kw: Any) -> Any:
        self._check()
        return await self._index.write(*args, **kw)

    async def remove(self, *args: Any, **kw: Any) -> Any:
        self._check()
        return await self._index.remove(*args, **kw)


@pytest.mark.parametrize(
    "config",
    [("embedded", "nats"), ("embedded", "kafka")],
    ids=["embedded-nats", "embedded-kafka"],
    indirect=True,
)
async def test_a_replay_applies_a_batch_its_updater_gave_up_when_it_outlasted_its_lease(
    app_api: tuple[Api, Backends], caplog: pytest.LogCaptureFixture
) -> None:
    # The chaos run's board short of a player's result: the mender's replay after a Redis
    # failover fetched its batch, the store was restarting, the batch outlasted its lease
    # and was given up, and the replay ended at its next fetch: JetStream had nothing to
    # deliver yet (the ack wait of the batch given up had not run out), Kafka's replay had
    # read past it.
    api, b = app_api
    for m in range(4):
        r = await api.submit(f"m{m}", [(f"p{i}", 10 * m + i) for i in range(6)])
        assert r.status_code == 200, r.text
    window, _ = await shown_board(api, "week")
    stored = await stored_board(b, "week", window)

    async def shown_is_stored() -> bool:
        return (await shown_board(api, "week"))[1] == stored

    assert await api.until(shown_is_stored, timeout=15), "the results did not reach the board"
    key = BoardKey("week", window)
    await b.index.replace(key, [], expire_at=None)  # the index lost every write
    assert (await shown_board(api, "week"))[1] == {}

    # The replay's updater holds its batch a lease of 0.3 s, the log's own lease is 10 s:
    # the batch is given up long before the log would deliver it again by itself.
    lease = dataclasses.replace(b.settings.workers, lease_s=0.3)
    needs = dataclasses.replace(
        b.needs(),
        settings=dataclasses.replace(b.settings, workers=lease),
        index=_DownAWhile(b.index, down_s=0.5),
    )
    with caplog.at_level(logging.WARNING, logger="podium.updater"):
        applied = await replay.replay(needs, 60)
    assert any("given up unwritten" in r.getMessage() for r in caplog.records), (
        "the replay's updater never gave its batch up: the test did not test it"
    )
    assert applied >= len(stored)
    assert (await shown_board(api, "week"))[1] == stored


def _tally(total: int) -> Any:
    from podium.domain.boards import Tally

    return Tally(total, int(time.time()) - 5, 1)
