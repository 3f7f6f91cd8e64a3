"""The stream broadcaster: one reader per board (per group, on a board split into groups),
however many streams; lazily started, stopped with the last stream; a slow stream skips
frames and holds nobody up."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from podium.errors import IndexUnavailable
from podium.service.views import Entry, Page
from podium.web.stream import QUEUE_FRAMES, Broadcaster, Hub

pytestmark = pytest.mark.asyncio

TICK = 0.02


class FakePodium:
    """Just ``page``: returns whatever ``entries`` holds now, counting the reads."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.window = "2026-W48"
        self.reads = 0
        self.fail: Exception | None = None

    async def page(
        self, board: str, window: str | None, offset: int, limit: int, group: str | None
    ) -> Page:
        assert window is None and offset == 0
        self.reads += 1
        if self.fail is not None:
            raise self.fail
        # A group's board: its window id names the group, and only its players are on it.
        if group is not None:
            mine = [e for e in self.entries if e.player_id.startswith(group)]
            mine = [Entry(i + 1, e.player_id, e.points) for i, e in enumerate(mine[:limit])]
            return Page(board, f"{self.window}@{group}", time.time(), mine)
        return Page(board, self.window, time.time(), list(self.entries[:limit]))

    def score(self, player: str, points: int) -> None:
        self.entries = sorted(
            [e for e in self.entries if e.player_id != player] + [Entry(0, player, points)],
            key=lambda e: -e.points,
        )
        self.entries = [Entry(i + 1, e.player_id, e.points) for i, e in enumerate(self.entries)]


def frame(raw: bytes) -> dict[str, Any]:
    assert raw.startswith(b"data: ") and raw.endswith(b"\n\n")
    return json.loads(raw[6:])  # type: ignore[no-any-return]


async def next_frame(q: asyncio.Queue[bytes], timeout: float = 1.0) -> dict[str, Any]:
    return frame(await asyncio.wait_for(q.get(), timeout))


def hub(podium: FakePodium, interval_s: float = TICK) -> Hub:
    return Hub(podium, interval_s=interval_s, limit=100)  # type: ignore[arg-type]


async def test_first_subscriber_starts_one_reader_and_gets_a_frame_at_once() -> None:
    podium = FakePodium()
    podium.score("a", 10)
    h = hub(podium, interval_s=60)  # so a frame within the timeout below is the first read
    b = h.broadcaster("week")
    assert not b.running
    q = h.subscribe("week")
    assert b.running
    first = await next_frame(q, timeout=5)
    assert first["board"] == "week" and first["window"] == "2026-W48"
    assert first["entries"] == [{"rank": 1, "playerId": "a", "points": 10}]
    assert isinstance(first["tickAt"], float)
    # A later stream gets the newest frame at once, without another read.
    reads = podium.reads
    late = h.subscribe("week")
    assert (await next_frame(late, timeout=0.001))["entries"] == first["entries"]
    assert podium.reads == reads == 1
    await h.close()


async def test_one_read_per_tick_however_many_streams() -> None:
    podium = FakePodium()
    h = hub(podium)
    queues = [h.subscribe("week") for _ in range(500)]
    await asyncio.sleep(TICK * 10)
    # About one read per tick for the board; polling per stream would be 500 a tick.
    assert 1 <= podium.reads < 100
    for q in queues:
        h.unsubscribe("week", q)
    await h.close()


async def test_only_changes_are_sent() -> None:
    podium = FakePodium()
    podium.score("a", 10)
    h = hub(podium)
    q = h.subscribe("week")
    await next_frame(q)
    await asyncio.sleep(TICK * 5)
    assert q.empty(), "an unchanged board sends nothing"
    podium.score("b", 20)
    moved = await next_frame(q)
    assert [e["playerId"] for e in moved["entries"]] == ["b", "a"]
    podium.window = "2026-W49"  # a rollover is a change even with the same entries
    assert (await next_frame(q))["window"] == "2026-W49"
    await h.close()


async def test_a_slow_stream_skips_frames_and_blocks_nobody() -> None:
    podium = FakePodium()
    h = hub(podium)
    slow = h.subscribe("week")  # never read until the end
    fast = h.subscribe("week")
    seen = []
    for points in range(1, 11):
        podium.score("a", points)
        seen.append((await next_frame(fast))["entries"][0]["points"])
    assert seen[-1] == 10 and seen == sorted(seen)
    # The slow one holds at most QUEUE_FRAMES frames, the newest ones.
    assert slow.qsize() <= QUEUE_FRAMES
    held = [frame(slow.get_nowait()) for _ in range(slow.qsize())]
    assert held[-1]["entries"][0]["points"] == 10
    await h.close()


async def test_the_last_stream_leaving_stops_the_reader() -> None:
    podium = FakePodium()
    h = hub(podium)
    b: Broadcaster = h.broadcaster("week")
    q1, q2 = h.subscribe("week"), h.subscribe("week")
    await next_frame(q1)
    h.unsubscribe("week", q1)
    assert b.running and b.subscribers == 1
    h.unsubscribe("week", q2)
    assert not b.running and b.subscribers == 0
    await asyncio.sleep(TICK * 2)
    reads = podium.reads
    await asyncio.sleep(TICK * 5)
    assert podium.reads == reads, "no reads once nobody watches"
    # Started again later, it reads afresh rather than replaying an old frame.
    podium.score("z", 99)
    q3 = h.subscribe("week")
    assert (await next_frame(q3))["entries"][0]["playerId"] == "z"
    await h.close()
    assert not b.running


async def test_a_failing_read_keeps_the_reader_alive() -> None:
    podium = FakePodium()
    podium.fail = IndexUnavailable("redis is down")
    h = hub(podium)
    q = h.subscribe("week")
    await asyncio.sleep(TICK * 3)
    assert q.empty() and h.broadcaster("week").running
    podium.fail = None
    podium.score("a", 1)
    assert (await next_frame(q))["entries"][0]["playerId"] == "a"
    await h.close()


async def test_boards_have_their_own_readers() -> None:
    podium = FakePodium()
    h = hub(podium)
    week, day = h.subscribe("week"), h.subscribe("day")
    assert (await next_frame(week))["board"] == "week"
    assert (await next_frame(day))["board"] == "day"
    h.unsubscribe("week", week)
    assert not h.broadcaster("week").running and h.broadcaster("day").running
    await h.close()
    assert not h.broadcaster("day").running


async def test_groups_of_a_board_have_their_own_readers() -> None:
    podium = FakePodium()
    podium.score("FR_a", 10)
    podium.score("DE_b", 20)
    h = hub(podium)
    fr, de = h.subscribe("nations", "FR"), h.subscribe("nations", "DE")
    first_fr, first_de = await next_frame(fr), await next_frame(de)
    assert first_fr["window"] == "2026-W48@FR" and first_de["window"] == "2026-W48@DE"
    assert [e["playerId"] for e in first_fr["entries"]] == ["FR_a"]
    assert [e["playerId"] for e in first_de["entries"]] == ["DE_b"]
    assert h.broadcaster("nations", "FR") is not h.broadcaster("nations", "DE")
    # A change on one group's board reaches its streams only.
    podium.score("FR_c", 30)
    moved = await next_frame(fr)
    assert [e["playerId"] for e in moved["entries"]] == ["FR_c", "FR_a"]
    await asyncio.sleep(TICK * 5)
    assert de.empty(), "the other group's board did not change"
    h.unsubscribe("nations", fr, "FR")
    assert not h.broadcaster("nations", "FR").running
    assert h.broadcaster("nations", "DE").running
    h.unsubscribe("nations", de)  # not the group it was subscribed to: nothing happens
    assert h.broadcaster("nations", "DE").subscribers == 1
    h.unsubscribe("nations", de, "DE")
    assert not h.broadcaster("nations", "DE").running
    await h.close()


class CachingPodium(FakePodium):
    """Holds a page for ``cache_s`` from its as_of, as ``Reads.page`` does."""

    def __init__(self, cache_s: float) -> None:
        super().__init__()
        self.cache_s = cache_s
        self.cached: Page | None = None
        self.hits = 0

    async def page(
        self, board: str, window: str | None, offset: int, limit: int, group: str | None
    ) -> Page:
        if self.cached is not None and self.cached.as_of + self.cache_s > time.time():
            self.hits += 1
            return self.cached
        self.cached = await super().page(board, window, offset, limit, group)
        await asyncio.sleep(0.01)  # a read that takes a while, as under load
        return self.cached


async def test_ticks_wait_for_the_cached_page_to_expire() -> None:
    podium = CachingPodium(cache_s=TICK * 2)
    h = Hub(podium, interval_s=TICK * 2, limit=100, cache_s=podium.cache_s)  # type: ignore[arg-type]
    q = h.subscribe("week")
    for points in range(1, 8):
        podium.score("a", points)
        await next_frame(q)
    # Every tick got a fresh page, none the one just read: no second lost to the cache.
    assert podium.hits == 0
    await h.close()
