"""Matches in flight are capped per process: one more is refused at once with 503 and
Retry-After, records nothing, and its retry goes through; past the store's connections,
matches wait their turn (domain/intake.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from podium.config.settings import parse
from podium.errors import ConfigError
from tests.integration.conftest import KINDS_WITH_SPLIT, Api

CONFIG_KINDS = KINDS_WITH_SPLIT


async def test_a_match_past_the_cap_is_refused_and_its_retry_lands(make_api: Any) -> None:
    api: Api = await make_api(server={"max_pending_matches": 2})
    gate = asyncio.Event()
    entered = 0
    record = api.podium.matches.record_all  # what the route calls

    async def held(*args: Any, **kwargs: Any) -> Any:
        nonlocal entered
        entered += 1
        await gate.wait()  # two matches stay in flight until the gate opens
        return await record(*args, **kwargs)

    api.podium.matches.record_all = held  # type: ignore[method-assign]
    first = [asyncio.create_task(api.submit(f"m{i}", [(f"p{i}", 10)])) for i in range(2)]

    async def both_in() -> bool:
        return entered == 2

    assert await api.until(both_in)

    refused = await api.submit("m2", [("p2", 10)])
    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"] == "1"
    assert "retry shortly" in refused.json()["detail"]
    assert entered == 2  # refused before the service saw it

    gate.set()
    assert [r.status_code for r in await asyncio.gather(*first)] == [200, 200]
    retried = await api.submit("m2", [("p2", 10)])
    assert retried.status_code == 200, retried.text
    await api.settle()
    page = await api.page()
    assert {e["playerId"]: e["points"] for e in page["entries"]} == {"p0": 10, "p1": 10, "p2": 10}


async def test_matches_past_the_store_connections_wait_their_turn_in_order(
    make_api: Any,
) -> None:
    """As many matches run at once as the process has store connections; the next wait
    (counted in flight), each runs once a turn ends, in the order they came; one past the
    cap, waiting ones included, is refused at once."""
    api: Api = await make_api(server={"max_pending_matches": 64, "match_wait_ms": 60_000})
    store = api.backends.settings.store
    turns = store.pool_size + store.read_pool_size
    transport = api.client._transport
    assert isinstance(transport, httpx.ASGITransport)
    pending = transport.app.state.pending_matches  # type: ignore[attr-defined]
    # The cap from the pools of this configuration (known once the app is made): two to
    # wait, one to be refused.
    pending.limit = pending.intake.limit = turns + 2
    gate = asyncio.Event()
    entered: list[str] = []
    record = api.podium.matches.record_all  # what the route calls

    async def held(*args: Any, **kwargs: Any) -> Any:
        entered.append(args[1])
        await gate.wait()
        return await record(*args, **kwargs)

    api.podium.matches.record_all = held  # type: ignore[method-assign]
    sent = [asyncio.create_task(api.submit(f"m{i}", [(f"p{i}", 10)])) for i in range(turns)]

    async def running() -> bool:
        return len(entered) == turns

    assert await api.until(running, timeout=30)
    for i in (turns, turns + 1):  # each waits behind the one before
        sent.append(asyncio.create_task(api.submit(f"m{i}", [(f"p{i}", 10)])))

        async def queued(n: int = i - turns + 1) -> bool:
            return bool(pending.intake.waiting == n)

        assert await api.until(queued)
    assert len(entered) == turns and pending.now == turns + 2

    refused = await api.submit("late", [("q", 10)])
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "retry shortly" in refused.json()["detail"]

    gate.set()
    assert [r.status_code for r in await asyncio.gather(*sent)] == [200] * (turns + 2)
    assert entered[turns:] == [f"m{turns}", f"m{turns + 1}"]  # in the order they came
    assert pending.now == 0
    assert (await api.submit("late", [("q", 10)])).status_code == 200


def test_the_cap_must_admit_one() -> None:
    with pytest.raises(ConfigError, match=r"server\.max_pending_matches: must be at least 1"):
        parse({"server": {"max_pending_matches": 0}})


@pytest.mark.parametrize("value", [0, -1, "soon"])
def test_the_wait_for_a_turn_must_be_a_positive_number(value: object) -> None:
    with pytest.raises(ConfigError, match=r"server\.match_wait_ms"):
        parse({"server": {"match_wait_ms": value}})
    assert parse({"server": {"match_wait_ms": 250}}).server.match_wait_ms == 250.0
