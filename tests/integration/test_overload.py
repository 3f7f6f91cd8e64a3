"""Matches in flight are capped per process: one more is refused at once with 503 and
Retry-After, records nothing, and its retry goes through."""

from __future__ import annotations

import asyncio
from typing import Any

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


def test_the_cap_must_admit_one() -> None:
    with pytest.raises(ConfigError, match=r"server\.max_pending_matches: must be at least 1"):
        parse({"server": {"max_pending_matches": 0}})
