"""Reward and moderation events on every store (``ports.webhooks``), the same bodies on each:
the events the relay puts on the stream (ready ones only, once marked not again), and old
events pruned only once done with (no delivery pending; made into deliveries, and on the
stream, where the deployment has those), with their deliveries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from podium.domain import events
from podium.domain.boards import BoardSpec
from podium.domain.windows import WindowKind, WindowRule
from podium.ports import ScoreStore
from podium.workers.pruner import DAY_S, EventPruner
from tests.contract import test_store as contract
from tests.contract.test_store import split2_url, split3_url  # noqa: F401 - shared fixtures

T0 = 1_796_000_400
URL = "http://127.0.0.1:9/hook"
DAY = BoardSpec("day", WindowRule(WindowKind.DAY))


@pytest.fixture(params=["sqlite", "postgres", "split2", "split3"])
def kind_and_url(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def store(kind_and_url: tuple[str, str]) -> AsyncIterator[ScoreStore]:
    s = contract.make(*kind_and_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def banned_ids(store: ScoreStore) -> dict[str, str]:
    """The ban events there are, by player."""
    found = await store.unpublished_events(100)
    return {json.loads(e.data)["playerId"]: e.event_id for e in found}


async def test_the_stream_gets_ready_events_once(store: ScoreStore) -> None:
    await store.ban("p1", "aimbot", T0)
    day = DAY.rule.window_at(T0)
    assert day is not None
    assert await store.freeze(DAY, day, 10, T0 + 1)
    found = await store.unpublished_events(100)
    assert [e.event_type for e in found] == [events.PLAYER_BANNED]  # the freeze's waits
    await store.set_archive("day", day.id, "day/x.csv.gz", "ab" * 32)
    found = await store.unpublished_events(100)
    assert [e.event_type for e in found] == [events.PLAYER_BANNED, events.WINDOW_FROZEN]
    frozen = found[1]
    assert frozen.event_id == events.window_frozen_id("day", day.id)
    assert json.loads(frozen.data)["sha256"] == "ab" * 32 and frozen.at == T0 + 1
    assert [e.event_id for e in await store.unpublished_events(1)] == [found[0].event_id]
    await store.mark_published([found[0].event_id])
    assert await store.unpublished_events(100) == [frozen]
    await store.mark_published([frozen.event_id])
    assert await store.unpublished_events(100) == []


async def test_old_events_go_once_done_with_and_only_then(store: ScoreStore) -> None:
    for i, p in enumerate(("old1", "old2", "old3", "new")):
        await store.ban(p, "spam", T0 + (i * 100 if p != "new" else 10_000))
    ids = await banned_ids(store)
    before = T0 + 5_000  # "new" is younger than the retention
    prune = store.prune_events
    # not fanned out yet: owed to the webhooks still
    assert await prune(before, 100, fanned=True, published=False) == 0
    assert await store.fan_out({events.PLAYER_BANNED: [URL]}, 0.0, T0, 100) == 4
    claimed = {d.event_id: d for d in await store.claim_deliveries(T0 + 20_000, T0 + 20_100, 10)}
    assert set(claimed) == set(ids.values())
    # pending: not yet
    assert await prune(before, 100, fanned=True, published=False) == 0
    await store.settle(
        claimed[ids["old1"]], T0, status=204, error=None, retry_at=None, delivered=True
    )
    await store.settle(
        claimed[ids["old2"]], T0, status=500, error="answered 500", retry_at=None, delivered=False
    )  # failed: given up, so done with too
    await store.settle(
        claimed[ids["old3"]],
        T0,
        status=500,
        error="answered 500",
        retry_at=T0 + 60,
        delivered=False,
    )  # to be retried: still owed
    assert await prune(before, 1, fanned=True, published=False) == 1  # a page of one
    assert await prune(before, 100, fanned=True, published=False) == 1
    assert await prune(before, 100, fanned=True, published=False) == 0
    left = {d.event_id for d in await store.deliveries(None, None, 100)}
    assert left == {ids["old3"], ids["new"]}  # the deliveries went with their events
    assert set((await banned_ids(store)).values()) == {ids["old3"], ids["new"]}

    # With NATS as the log an event must be on the stream too; with no webhooks
    # configured, nothing fans events out, and none waits for that.
    await store.ban("lone", "spam", T0 + 200)
    lone = (await banned_ids(store))["lone"]
    assert await prune(before, 100, fanned=False, published=True) == 0
    await store.mark_published([lone])
    assert await prune(before, 100, fanned=False, published=True) == 1
    assert await prune(before, 100, fanned=False, published=True) == 0


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


async def test_the_pruner_takes_every_page_of_old_events(store: ScoreStore) -> None:
    for i in range(5):
        await store.ban(f"p{i}", "spam", T0 + i)
    await store.ban("young", "spam", T0 + 3 * DAY_S)
    # fanned out where no endpoint subscribes: done with, once old enough
    assert await store.fan_out({}, 0.0, T0, 100) == 6
    pruner = EventPruner(store, Clock(T0 + 4 * DAY_S), 2, fanned=True, published=False, page=2)
    assert await pruner.step() == 5
    assert await pruner.step() == 0
    assert list(await banned_ids(store)) == ["young"]


async def test_deliveries_are_claimed_for_one_endpoint_or_for_the_others(
    store: ScoreStore,
) -> None:
    """Each endpoint's deliveries are claimed apart (a slow endpoint holds back only its
    own), and those to endpoints no longer configured by a claim for every other one."""
    slow, fast, gone = "http://slow.test/h", "http://fast.test/h", "http://gone.test/h"
    for p in ("a", "b"):
        await store.ban(p, "spam", T0)
    routes = {events.PLAYER_BANNED: [slow, fast, gone]}
    assert await store.fan_out(routes, 0.0, T0, 100) == 2
    now, lease = T0 + 1, T0 + 60
    mine = await store.claim_deliveries(now, lease, 100, endpoint=fast)
    assert sorted(d.endpoint for d in mine) == [fast, fast]
    assert await store.claim_deliveries(now, lease, 100, endpoint=fast) == []  # held
    others = await store.claim_deliveries(now, lease, 100, other_than=[slow, fast])
    assert sorted(d.endpoint for d in others) == [gone, gone]
    assert await store.claim_deliveries(now, lease, 100, other_than=[slow, fast]) == []
    # the slow endpoint's own are still there, whatever the others' claims took
    rest = await store.claim_deliveries(now, lease, 100)
    assert sorted(d.endpoint for d in rest) == [slow, slow]
