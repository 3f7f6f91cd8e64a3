"""The matches in flight taken in turns (``PendingMatches``, api/ratelimit.py, over
domain/intake.py): at most ``turns`` at once, the others in the order they came; turned
away before any store work when full, late or gone, each counted by its reason; and the
plain results path hands the route a request that sees its client leave (api/hot.py).

Deterministic: the matches are tasks held on events, the loop is let run by yielding to it
a fixed number of times, and a clock is a number the test moves, but where a test is about
the timer itself (which then has nothing to race)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from podium import metrics
from podium.api import hot
from podium.api import schemas as s
from podium.api.ratelimit import PendingMatches
from podium.api.shedding import LoadGate
from podium.domain.admission import Limits
from podium.domain.intake import GONE, LATE, MIN_SAMPLES, REASONS
from podium.errors import Overloaded

FOREVER_MS = 1e9  # a wait no timer reaches while a test runs


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def turned_away(reason: str) -> float:
    return (
        metrics.REGISTRY.get_sample_value("podium_matches_turned_away_total", {"reason": reason})
        or 0.0
    )


async def run_loop() -> None:
    """Let every task that can go on go on (a fixed number of the loop's turns, no time)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Matches:
    """Matches sent to ``pending``, each a task that, once its turn comes, notes it and
    holds it until the test lets it go."""

    def __init__(self, pending: PendingMatches, clock: Clock | None = None) -> None:
        self.pending = pending
        self.clock = clock
        self.running: list[int] = []  # whose turn it is now
        self.ran: list[int] = []  # whose turn came, in order
        self.go: dict[int, asyncio.Event] = {}
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def send(
        self, n: int, gone: Callable[[], Awaitable[bool]] | None = None, took_s: float = 0.0
    ) -> asyncio.Task[None]:
        self.go[n] = asyncio.Event()

        async def match() -> None:
            async with self.pending.admit(gone):
                self.running.append(n)
                self.ran.append(n)
                await self.go[n].wait()
                if self.clock is not None:
                    self.clock.t += took_s
                self.running.remove(n)

        self.tasks[n] = asyncio.create_task(match())
        return self.tasks[n]

    async def finish(self, n: int) -> None:
        self.go[n].set()
        await self.tasks[n]


def test_each_reason_the_domain_gives_is_on_the_metric_from_the_start() -> None:
    for reason in REASONS:
        assert turned_away(reason) is not None


async def test_at_most_the_turns_run_at_once_and_the_others_in_the_order_they_came() -> None:
    pending = PendingMatches(10, turns=2, wait_ms=FOREVER_MS, clock=Clock())
    m = Matches(pending)
    for n in range(6):
        m.send(n)
    await run_loop()
    assert m.running == [0, 1]
    assert pending.now == 6  # the waiting ones are in flight too
    for done, expected in [(1, [0, 2]), (0, [2, 3]), (3, [2, 4]), (2, [4, 5])]:
        await m.finish(done)
        await run_loop()
        assert m.running == expected
    await m.finish(4)
    await m.finish(5)
    assert m.ran == [0, 1, 2, 3, 4, 5]
    assert pending.now == 0 and pending.intake.running == 0


async def test_past_the_limit_a_match_is_turned_away_full_waiting_ones_counted() -> None:
    pending = PendingMatches(3, turns=1, wait_ms=FOREVER_MS, clock=Clock())
    m = Matches(pending)
    for n in range(3):  # one runs, two wait
        m.send(n)
    await run_loop()
    before = turned_away("full")
    with pytest.raises(Overloaded, match="retry shortly") as refused:
        async with pending.admit():
            pytest.fail("a match past the limit ran")
    assert refused.value.status == 503 and refused.value.retry_after == 1
    assert turned_away("full") == before + 1
    for n in range(3):
        await m.finish(n)
    assert m.ran == [0, 1, 2]
    async with pending.admit():  # room again
        pass


async def test_a_match_whose_turn_the_estimate_puts_past_the_wait_is_turned_away_at_once() -> None:
    clock = Clock()
    pending = PendingMatches(64, turns=1, wait_ms=500, clock=clock)
    m = Matches(pending, clock)
    for n in range(MIN_SAMPLES):  # turns of a second each: the estimate is a second
        m.send(n, took_s=1.0)
        await m.finish(n)
    assert pending.intake.turn.mean_s == pytest.approx(1.0)
    m.send(100)  # runs at once: nothing queued ahead is never late
    m.send(101)  # waits: its turn is the next one's end
    await run_loop()
    assert m.running == [100] and pending.intake.waiting == 1
    before = turned_away(LATE)
    with pytest.raises(Overloaded, match="match_wait_ms"):
        async with pending.admit():  # one turn of a second ahead of it alone, past 0.5 s
            pytest.fail("a late match ran")
    assert turned_away(LATE) == before + 1
    assert pending.now == 2  # it never was in flight
    await m.finish(100)
    await m.finish(101)


async def test_a_match_that_waited_the_wait_is_turned_away_by_its_timer() -> None:
    # The real clock and a wait of 10 ms: the match ahead never ends while it waits, so the
    # timer is what ends its wait, however slow the machine.
    pending = PendingMatches(10, turns=1, wait_ms=10)
    m = Matches(pending)
    m.send(0)
    await run_loop()
    before = turned_away(LATE)
    with pytest.raises(Overloaded, match="match_wait_ms"):
        async with pending.admit():
            pytest.fail("a match that waited past its wait ran")
    assert turned_away(LATE) == before + 1
    assert pending.now == 1 and pending.intake.waiting == 0  # it left the queue
    await m.finish(0)
    assert pending.now == 0 and pending.intake.running == 0


async def test_a_turn_that_comes_past_the_wait_is_handed_on() -> None:
    # The loop too busy to run the timer in time: the turn comes, the wait is past, the
    # match is turned away late and the next one runs.
    # A wait of 100 s on the test's clock: the timers (on the loop's clock) never fire.
    clock = Clock()
    pending = PendingMatches(10, turns=1, wait_ms=100_000, clock=clock)
    m = Matches(pending, clock)
    m.send(0)
    await run_loop()
    m.send(1)  # arrives at 0 s
    await run_loop()
    clock.t = 50.0
    m.send(2)  # arrives at 50 s
    await run_loop()
    before = turned_away(LATE)
    clock.t = 120.0  # 1 has waited past its 100 s, 2 not yet
    await m.finish(0)
    await run_loop()
    with pytest.raises(Overloaded, match="match_wait_ms"):
        await m.tasks[1]
    assert turned_away(LATE) == before + 1
    assert m.running == [2]
    await m.finish(2)
    assert m.ran == [0, 2]
    assert pending.intake.turn.samples == 2  # the turned-away one did no store work


async def test_a_waiting_match_whose_client_left_is_turned_away_gone() -> None:
    pending = PendingMatches(10, turns=1, wait_ms=FOREVER_MS, clock=Clock())
    m = Matches(pending)
    asked: list[int] = []

    def client(n: int, left: bool) -> Callable[[], Awaitable[bool]]:
        async def gone() -> bool:
            asked.append(n)
            return left

        return gone

    m.send(0, client(0, left=True))  # runs at once: just read whole, not asked
    await run_loop()
    m.send(1, client(1, left=True))
    m.send(2, client(2, left=False))
    await run_loop()
    before = turned_away(GONE)
    await m.finish(0)
    await run_loop()
    with pytest.raises(Overloaded, match="client left"):
        await m.tasks[1]
    assert turned_away(GONE) == before + 1
    assert asked == [1, 2]
    assert m.running == [2]  # the turn went on to the next
    await m.finish(2)
    assert m.ran == [0, 2]


async def test_a_match_whose_request_ends_while_it_waits_leaves_the_queue() -> None:
    pending = PendingMatches(10, turns=1, wait_ms=FOREVER_MS, clock=Clock())
    m = Matches(pending)
    for n in range(3):
        m.send(n)
    await run_loop()
    m.tasks[1].cancel()
    await run_loop()
    assert m.tasks[1].cancelled()
    assert pending.now == 2 and pending.intake.waiting == 1
    await m.finish(0)
    await run_loop()
    assert m.running == [2]
    await m.finish(2)
    assert m.ran == [0, 2] and pending.now == 0 and pending.intake.running == 0


async def test_a_turn_handed_to_a_request_that_ended_before_it_ran_goes_on() -> None:
    pending = PendingMatches(10, turns=1, wait_ms=FOREVER_MS, clock=Clock())
    m = Matches(pending)
    go = asyncio.Event()

    async def first() -> None:
        async with pending.admit():
            await go.wait()
        # The turn was just handed to match 1, which has not run yet: it ends now.
        m.tasks[1].cancel()

    holder = asyncio.create_task(first())
    await run_loop()
    m.send(1)
    m.send(2)
    await run_loop()
    go.set()
    await holder
    await run_loop()
    assert m.tasks[1].cancelled()
    assert m.running == [2]
    await m.finish(2)
    assert m.ran == [2] and pending.now == 0 and pending.intake.running == 0


async def test_a_turn_that_ends_as_the_next_request_ends_goes_past_it() -> None:
    # Match 1's request ends, and before its task runs again the turn ahead of it ends: the
    # turn goes past it to match 2, and it leaves the queue once.
    pending = PendingMatches(10, turns=1, wait_ms=FOREVER_MS, clock=Clock())
    m = Matches(pending)
    go = asyncio.Event()

    async def first() -> None:
        async with pending.admit():
            await go.wait()
            m.tasks[1].cancel()

    holder = asyncio.create_task(first())
    await run_loop()
    m.send(1)
    m.send(2)
    await run_loop()
    go.set()
    await holder
    await run_loop()
    assert m.tasks[1].cancelled()
    assert m.running == [2] and pending.now == 1 and pending.intake.waiting == 0
    await m.finish(2)
    assert m.ran == [2] and pending.now == 0 and pending.intake.running == 0


async def test_a_match_that_fails_hands_its_turn_on_and_is_timed() -> None:
    clock = Clock()
    pending = PendingMatches(10, turns=1, wait_ms=FOREVER_MS, clock=clock)
    m = Matches(pending, clock)
    go = asyncio.Event()

    async def failing() -> None:
        async with pending.admit():
            await go.wait()
            clock.t += 2.0
            raise RuntimeError("the store said no")

    task = asyncio.create_task(failing())
    await run_loop()
    m.send(1)
    await run_loop()
    assert m.running == []
    go.set()
    with pytest.raises(RuntimeError):
        await task
    await run_loop()
    assert m.running == [1]
    assert pending.intake.turn.mean_s == 2.0
    await m.finish(1)


async def test_the_oldest_match_counts_from_its_arrival_waiting_or_not() -> None:
    clock = Clock()
    pending = PendingMatches(10, turns=1, wait_ms=FOREVER_MS, clock=clock)
    m = Matches(pending, clock)
    m.send(0)
    await run_loop()
    clock.t = 1.0
    m.send(1)
    await run_loop()
    clock.t = 1.5
    assert pending.oldest_s() == 1.5
    await m.finish(0)
    await run_loop()
    assert pending.oldest_s() == 0.5  # the one that waited, from when it came
    await m.finish(1)
    assert pending.oldest_s() == 0.0


async def test_the_plain_results_path_hands_the_route_a_request_that_sees_its_client_leave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = json.dumps(
        {
            "mode": "default",
            "endedAt": "2026-01-01T00:00:00Z",
            "durationSeconds": 60,
            "results": [{"playerId": "p1", "points": 1}],
        }
    ).encode()
    seen: list[bool] = []

    async def key(request: Any) -> str:
        return "gs"

    async def record(request: Any, key: str, match_id: str, match: s.MatchIn) -> s.MatchOut:
        seen.append(await request.is_disconnected())
        return s.MatchOut(matchId=match_id, players=[])

    monkeypatch.setattr(hot, "game_server", key)
    monkeypatch.setattr(hot, "record_match", record)
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": body, "more_body": False},
        {"type": "http.disconnect"},  # the client left once its body was read
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pytest.fail("the plain form went to the stack")

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/matches/m1/results",
        "query_string": b"",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    gate = LoadGate(Limits.of(5.0, 64), lambda: 0)
    await hot.HotResults(app, gate, max_body=65536)(scope, receive, send)
    assert seen == [True]
    assert sent[0]["status"] == 200
