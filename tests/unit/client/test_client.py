"""podium.client against an httpx.MockTransport: what submit retries, how long it waits,
what it raises at once, and that every try sends the same bytes. No server, no real sleep:
the clients take the sleep they wait with."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from podium.client import (
    AsyncClient,
    Client,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    PodiumClientError,
    ProblemError,
    RateLimited,
    RetryPolicy,
    TransportFailed,
    Unauthorized,
    Unavailable,
)

ENDED = "2026-10-28T19:04:11Z"
OK = {"matchId": "m1", "players": [{"playerId": "p1", "totals": {"week": 140, "day": 140}}]}


def _problem(status: int, title: str, detail: str, **headers: str) -> httpx.Response:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    return httpx.Response(
        status, json=body, headers={"content-type": "application/problem+json", **headers}
    )


class Server:
    """Answers in turn from ``script`` (a response, or an exception to raise), recording
    every request it was sent."""

    def __init__(self, *script: httpx.Response | Exception) -> None:
        self.script = list(script)
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def _client(server: Server, waits: list[float], **policy: Any) -> Client:
    return Client(
        "http://podium.test",
        "k-secret",
        transport=httpx.MockTransport(server),
        retry=RetryPolicy(**policy),
        sleep=waits.append,
        rng=random.Random(1),
    )


def _submit(c: Client) -> Any:
    return c.submit("m1", [("p1", 140), ("p2", 95)], duration_seconds=300, ended_at=ENDED)


def test_a_503_then_200_is_two_tries_of_the_same_body() -> None:
    server = Server(
        _problem(503, "Unavailable", "the score store is unavailable"), httpx.Response(200, json=OK)
    )
    waits: list[float] = []
    recorded = _submit(_client(server, waits))
    assert recorded.totals("p1") == {"week": 140, "day": 140}
    assert len(server.seen) == 2
    first, second = server.seen
    assert first.content == second.content
    assert first.url == second.url == "http://podium.test/v1/matches/m1/results"
    assert first.headers["authorization"] == "Bearer k-secret"
    assert json.loads(first.content) == {
        "mode": "default",
        "endedAt": ENDED,
        "durationSeconds": 300,
        "results": [{"playerId": "p1", "points": 140}, {"playerId": "p2", "points": 95}],
    }
    assert len(waits) == 1 and 0.2 <= waits[0] <= 0.3  # the first backoff, with its jitter


def test_a_429_waits_at_least_its_retry_after() -> None:
    server = Server(
        _problem(429, "Too many requests", "p1 is over the hourly cap", **{"Retry-After": "7"}),
        httpx.Response(200, json=OK),
    )
    waits: list[float] = []
    _submit(_client(server, waits))
    assert len(server.seen) == 2
    assert len(waits) == 1 and waits[0] >= 7


def test_a_retry_after_is_capped() -> None:
    server = Server(
        _problem(503, "Unavailable", "overloaded", **{"Retry-After": "3600"}),
        httpx.Response(200, json=OK),
    )
    waits: list[float] = []
    _submit(_client(server, waits, max_retry_after=10, jitter=0))
    assert waits == [10]


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, Unauthorized), (403, Forbidden), (404, NotFound), (409, Conflict), (422, Invalid)],
)
def test_a_4xx_other_than_429_is_raised_at_once(status: int, kind: type[ProblemError]) -> None:
    server = Server(_problem(status, "Refused", f"refused with {status}"))
    waits: list[float] = []
    with pytest.raises(kind) as raised:
        _submit(_client(server, waits))
    assert (raised.value.status, raised.value.detail) == (status, f"refused with {status}")
    assert raised.value.title == "Refused"
    assert len(server.seen) == 1 and waits == []


def test_a_422_names_the_fields() -> None:
    body = {
        "type": "about:blank",
        "title": "Invalid input",
        "status": 422,
        "detail": "results.0.points: must be an integer",
        "errors": [{"field": "results.0.points", "message": "must be an integer"}],
    }
    server = Server(httpx.Response(422, json=body))
    with pytest.raises(Invalid) as raised:
        _submit(_client(server, []))
    assert raised.value.errors == ({"field": "results.0.points", "message": "must be an integer"},)


def test_a_timeout_is_retried_then_a_500_is_not() -> None:
    server = Server(
        httpx.ReadTimeout("timed out"),
        httpx.ConnectError("refused"),
        _problem(500, "Internal error", "an unexpected error occurred; it has been logged"),
    )
    waits: list[float] = []
    with pytest.raises(ProblemError) as raised:
        _submit(_client(server, waits))
    assert raised.value.status == 500
    assert len(server.seen) == 3 and len(waits) == 2
    assert waits[1] > waits[0]  # exponential: 0.2 then 0.4, each with up to half again


def test_the_tries_run_out() -> None:
    server = Server(*[httpx.ReadTimeout("timed out") for _ in range(3)])
    waits: list[float] = []
    with pytest.raises(TransportFailed) as raised:
        _submit(_client(server, waits, attempts=3))
    assert isinstance(raised.value.__cause__, httpx.ReadTimeout)
    assert len(server.seen) == 3 and len(waits) == 2


def test_reads_are_tried_once_and_raise_typed() -> None:
    server = Server(
        _problem(503, "Unavailable", "the rank index is unavailable", **{"Retry-After": "1"})
    )
    with pytest.raises(Unavailable) as raised:
        _client(server, []).rank("week", "p1")
    assert raised.value.retry_after == 1
    assert len(server.seen) == 1


def test_a_proxy_page_still_gives_its_status() -> None:
    server = Server(
        httpx.Response(502, text="<html>Bad gateway</html>"), httpx.Response(200, json=OK)
    )
    waits: list[float] = []
    _submit(_client(server, waits))  # a load balancer's 502: the process behind it went away
    assert len(server.seen) == 2
    server = Server(httpx.Response(429, text="slow down"))
    with pytest.raises(RateLimited) as raised:
        _client(server, [], attempts=1).boards()
    assert raised.value.detail == "slow down"


def test_reads_send_their_parameters_and_read_the_answer() -> None:
    page = {
        "board": "week",
        "window": "2026-W44",
        "asOf": "2026-10-28T19:04:12Z",
        "entries": [{"rank": 1, "playerId": "p1", "points": 140, "name": "Vex"}],
        "next": "abc",
    }
    server = Server(httpx.Response(200, json=page))
    got = _client(server, []).page("week", limit=10, window="2026-W44", cursor="xyz")
    assert dict(server.seen[0].url.params) == {"limit": "10", "window": "2026-W44", "cursor": "xyz"}
    assert got.entries[0].name == "Vex" and got.next == "abc" and got.prev is None
    assert got.as_of.year == 2026 and got.as_of.utcoffset() is not None
    lookup = {
        "board": "week",
        "window": "2026-W44",
        "asOf": page["asOf"],
        "players": [],
        "absent": ["a", "b"],
    }
    server = Server(httpx.Response(200, json=lookup))
    assert _client(server, []).lookup("week", ["a", "b"]).absent == ("a", "b")
    assert server.seen[0].url.params["ids"] == "a,b"


def test_the_async_client_retries_alike() -> None:
    server = Server(
        _problem(429, "Too many requests", "over the cap", **{"Retry-After": "2"}),
        httpx.ReadTimeout("timed out"),
        httpx.Response(200, json=OK),
    )
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def main() -> Any:
        async with AsyncClient(
            "http://podium.test",
            "k-secret",
            transport=httpx.MockTransport(server),
            sleep=sleep,
            rng=random.Random(1),
        ) as c:
            return await c.submit("m1", [("p1", 140)], duration_seconds=300, ended_at=ENDED)

    recorded = asyncio.run(main())
    assert recorded.match_id == "m1"
    assert len(server.seen) == 3 and len({r.content for r in server.seen}) == 1
    assert waits[0] >= 2 and len(waits) == 2


@pytest.mark.parametrize(
    "make",
    [lambda: RetryPolicy(attempts=0), lambda: RetryPolicy(initial=-1)],
)
def test_a_policy_out_of_range_is_refused(make: Callable[[], RetryPolicy]) -> None:
    with pytest.raises(ValueError):
        make()


def test_groups_and_distribution_are_read() -> None:
    groups = {
        "board": "nations",
        "window": "2026-W44",
        "asOf": "2026-10-28T19:04:12Z",
        "groups": [{"group": "FR", "players": 1204}, {"group": "ZZ", "players": 31}],
    }
    dist = {
        "board": "week",
        "window": "2026-W44",
        "asOf": "2026-10-28T19:04:12Z",
        "players": 3,
        "exact": False,
        "buckets": [{"low": 0, "high": 100, "count": 3}],
    }
    server = Server(httpx.Response(200, json=groups), httpx.Response(200, json=dist))
    c = _client(server, [])
    got = c.groups("nations", window="2026-W44")
    assert [(g.group, g.players) for g in got.groups] == [("FR", 1204), ("ZZ", 31)]
    assert server.seen[0].url.path == "/v1/boards/nations/groups"
    d = c.distribution("week", buckets=1)
    assert (d.players, d.exact, d.buckets[0].count) == (3, False, 3)
    assert server.seen[1].url.params["buckets"] == "1"


def test_an_answer_the_client_cannot_read_is_said_so() -> None:
    server = Server(httpx.Response(200, text="<html>a captive portal</html>"))
    with pytest.raises(PodiumClientError, match="cannot read"):
        _client(server, []).boards()
