"""GET /v1/boards/{board}/stream on a running server, read as a plain HTTP client would
(no browser needed): a frame at once, changes within a second or so, hang-ups noticed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx

from tests.e2e.conftest import Server


def events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield json.loads(line[6:])


def stream_clients(server: Server, board: str) -> float:
    ops = server.ops("/v1/admin/ops").json()
    family = next(g for g in ops["gauges"] if g["name"] == "podium_stream_clients")
    return sum(s["value"] for s in family["series"] if s["labels"] == {"board": board})


def test_the_stream_sends_a_page_at_once_and_then_each_change(server: Server) -> None:
    with httpx.stream("GET", f"{server.url}/v1/boards/day/stream", timeout=10) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-cache"
        it = events(r)
        first = next(it)  # sent on connect: nothing has changed yet (how soon: benchmarks)
        assert first["board"] == "day" and "entries" in first and "asOf" in first
        assert stream_clients(server, "day") == 1

        server.submit("stream-1", [("st_a", 77)])
        waited = time.monotonic() + 60  # a bound for a loaded machine, not a speed
        for frame in it:  # each change, until the one that brings st_a
            if any(e["playerId"] == "st_a" for e in frame["entries"]):
                break
            assert time.monotonic() < waited, "st_a never reached the stream"
        entry = next(e for e in frame["entries"] if e["playerId"] == "st_a")
        assert entry["points"] >= 77 and entry["rank"] >= 1
        assert abs(frame["tickAt"] - time.time()) < 5

    # The server notices the hang-up and lets the board's broadcaster go.
    deadline = time.monotonic() + 5
    while stream_clients(server, "day") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stream_clients(server, "day") == 0


def test_many_streams_share_one_frame(server: Server) -> None:
    streams = [httpx.stream("GET", f"{server.url}/v1/boards/season/stream") for _ in range(5)]
    opened = [s.__enter__() for s in streams]
    try:
        # One iterator per stream, kept: dropping one would close its connection.
        iterators = [events(r) for r in opened]
        firsts = [next(it) for it in iterators]
        # One broadcaster read them all: the very same frame, tick time included.
        assert len({json.dumps(f, sort_keys=True) for f in firsts}) == 1
        assert stream_clients(server, "season") == 5
    finally:
        for s in streams:
            s.__exit__(None, None, None)


def test_an_unknown_board_has_no_stream(server: Server) -> None:
    r = httpx.get(f"{server.url}/v1/boards/nope/stream")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "nope" in r.json()["detail"]
