"""The partition tests' game servers' client (``partitions.Recorded``) on a mock transport:
at most its pool's worth of requests in httpx's pool at once, the others waiting their turn
at most the pool timeout, then failing as httpx's ``PoolTimeout``, recorded. No fleet: it
runs anywhere."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.integration.partitions import History, Recorded


async def test_at_most_the_pool_is_in_flight_and_a_late_turn_is_a_pool_timeout() -> None:
    inside = 0
    most = 0
    answer = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        try:
            await answer.wait()
        finally:
            inside -= 1
        return httpx.Response(200, json={"ok": True})

    history = History()
    transport = Recorded("api1", history, pool=2, inner=httpx.MockTransport(handler))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as c:
        held = [asyncio.create_task(c.get("/v1/matches/m1/results")) for _ in range(2)]
        while inside < 2:
            await asyncio.sleep(0)
        # Both places taken, and their answers held until the late one has given up.
        with pytest.raises(httpx.PoolTimeout):
            await c.get("/v1/matches/m2/results", timeout=httpx.Timeout(5.0, pool=0.01))
        waiting = asyncio.create_task(c.get("/v1/matches/m3/results"))
        await asyncio.sleep(0.01)
        assert inside == 2 and not waiting.done()
        answer.set()
        got = await asyncio.gather(*held, waiting)
    assert [r.status_code for r in got] == [200, 200, 200]
    assert most == 2
    assert sorted(t.outcome for t in history.tries) == ["200", "200", "200", "PoolTimeout"]
