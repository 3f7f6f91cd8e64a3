"""The network fails between parts of a fleet that each keep running: links cut one way or
both, on hosts of the test's own (``tests/netns.py``), under a workload of game servers that
retry; a checker over the history and the final state (``partitions.py``) proves that
nothing acknowledged was lost or counted twice, that no try was answered 500, and how long
the fleet took to converge after the heal. Each scenario runs on the store's outbox and on a
JetStream stream.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from tests.integration import partitions
from tests.integration.partitions import Game, NetFleet
from tests.netns import need

RATE = 20.0  # matches a second, all game servers together
SENDERS = 4
BURST = 8  # matches sent to the API process at once just before its cut: some mid-commit


@pytest.fixture
async def fleet(request: pytest.FixtureRequest) -> AsyncIterator[NetFleet]:
    need()
    nf = await partitions.start(request.param)
    try:
        yield nf
    except BaseException:
        nf.fleet.dump()
        raise
    finally:
        nf.stop()


async def _until(what: str, check: object, deadline_s: float = partitions.DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("both", [True, False], ids=["both-ways", "answers-lost"])
@pytest.mark.parametrize("fleet", ["outbox", "nats"], indirect=True)
async def test_an_api_cut_from_the_store_mid_stream_loses_and_doubles_nothing(
    fleet: NetFleet, both: bool
) -> None:
    """API process 1 is cut from Postgres while matches stream in. Both ways: its requests
    hang (their game servers time out and send the match again, to the other process).
    Answers lost (Postgres cannot send to it; what it sends still arrives): every statement
    it sends is carried out, commits included, and none is answered, so each of its matches
    is in part or wholly stored while its game server is told nothing, and sends it again.
    After the heal it answers again. Every acknowledged result is stored and on the board
    exactly once, and no try is answered 500."""
    game = Game(fleet.apis, fleet.key, RATE)
    senders = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    try:
        await game.acknowledged(20, "api1")
        api1, db = fleet.hosts["api1"], fleet.hosts["db"]
        burst = game.burst("api1", BURST)
        flying = game.history.in_flight
        await _until("the burst in flight on api1", lambda: flying["api1"] >= BURST)
        if both:
            fleet.net.cut(api1, db)
        else:
            fleet.net.cut(db, api1, both=False)
        cut = time.monotonic()  # once the filter holds: a try sent after this cannot commit
        tries = game.history.tries

        def api1_failed_since_cut() -> bool:
            return any(t.api == "api1" and t.sent >= cut and t.outcome != "200" for t in tries)

        await _until("a try on the cut API process failed", api1_failed_since_cut)
        await game.acknowledged(20, "api2")  # the other process takes the matches meanwhile
        fleet.net.heal(api1, db)
        fleet.net.heal(db, api1)
        healed = time.monotonic()
        await burst
        await game.acknowledged(10, "api1")  # and the cut one again after the heal
        back = min(
            t.answered for t in tries if t.api == "api1" and t.sent >= healed and t.outcome == "200"
        )
    finally:
        game.stop.set()
        await asyncio.gather(*senders)
    verdict = await partitions.check(fleet, game)
    during = Counter(
        t.outcome for t in game.history.tries if t.api == "api1" and cut <= t.sent < healed
    )
    in_flight = [
        t
        for t in game.history.tries
        if t.api == "api1" and t.sent < cut < t.answered and t.outcome != "200"
    ]
    print(
        f"{game.history.sent} matches; cut {healed - cut:.1f} s; api1's tries during the cut: "
        f"{dict(during)}; {len(in_flight)} in flight at the cut not answered 200; api1 "
        f"answered 200 again {back - healed:.1f} s after the heal; the board equal to the "
        f"store {verdict.board_caught_up_s:.1f} s after the load stopped"
    )
    assert verdict.ok, verdict
    assert "500" not in during
