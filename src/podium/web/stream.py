"""Live board pages over Server-Sent Events: one broadcaster per board feeds every stream.

A browser that keeps a board open must not cost the index a read per second per viewer.
So each board (each group of a board split into groups: one broadcaster per board and
group, so that two groups' streams never mix) has at most one ``Broadcaster``: a task that
reads the top page through the service once a second and hands the encoded frame to every
subscribed stream through a small per-stream queue. It starts with the first subscriber
and stops with the last. A slow stream (its socket not draining) finds its queue full; the
oldest waiting frame is dropped for the newest, so it skips intermediate pages and nobody
else waits for it.

The broadcaster follows the board's current window: at a rollover the next frame names
the new window, and open pages switch with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from podium import metrics
from podium.api.encode import page_body
from podium.errors import PodiumError, RateLimited, Unavailable
from podium.service.views import Page

log = logging.getLogger("podium.web")

QUEUE_FRAMES = 2  # per stream: the frame being written plus the newest one


class Pages(Protocol):
    """Where the frames come from: the read use case's pages (``reads.Reads``)."""

    async def page(
        self, board: str, window_id: str | None, offset: int, limit: int, group: str | None
    ) -> Page: ...


def encode(page: Page, tick: float) -> bytes:
    """One SSE event: the page as ``GET /v1/boards/{board}`` returns it, plus ``tickAt``,
    the broadcaster's read time, so a client can tell how fresh the frame is."""
    body = {**page_body(page), "tickAt": round(tick, 3)}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


class Broadcaster:
    def __init__(
        self,
        pages: Pages,
        board: str,
        *,
        group: str | None = None,
        interval_s: float,
        limit: int,
        cache_s: float = 0.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.board = board
        self.group = group  # on a board split into groups, the group it reads
        self._pages = pages
        self._interval = interval_s
        self._cache_s = cache_s
        self._now = now
        self._limit = limit
        self._subscribers: set[asyncio.Queue[bytes]] = set()
        self._task: asyncio.Task[None] | None = None
        self._last: bytes | None = None  # the newest frame, for a stream that joins later
        self._last_page: tuple[str, list[Any]] | None = None
        self._failing = False

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def holds(self, queue: asyncio.Queue[bytes]) -> bool:
        return queue in self._subscribers

    def subscribe(self) -> asyncio.Queue[bytes]:
        queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_FRAMES)
        if self._last is not None:
            queue.put_nowait(self._last)  # a new viewer sees the board at once
        self._subscribers.add(queue)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"stream:{self.name}")
        return queue

    @property
    def name(self) -> str:
        """The board, and its group if it reads one: for task names and the log."""
        return self.board if self.group is None else f"{self.board}@{self.group}"

    def unsubscribe(self, queue: asyncio.Queue[bytes]) -> None:
        self._subscribers.discard(queue)
        if not self._subscribers:
            self._stop()

    def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        # Forget the last frame: a broadcaster started again later reads afresh rather
        # than greeting its first viewer with a page that may be minutes old.
        self._last = self._last_page = None

    async def close(self) -> None:
        task = self._task
        self._stop()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def publish(self, frame: bytes) -> None:
        self._last = frame
        for queue in self._subscribers:
            if queue.full():
                queue.get_nowait()  # drop the oldest waiting frame, never block
            queue.put_nowait(frame)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while True:
            as_of = await self.tick()
            # Fixed-rate ticks: a slow read delays one frame, not every later one.
            next_tick = max(next_tick + self._interval, loop.time())
            if as_of is not None:
                # The service holds a page for cache_s from its as_of; a read before that
                # would return the same page again, and this board would skip a second.
                expires = as_of + self._cache_s - self._now()
                next_tick = max(next_tick, loop.time() + expires + 0.001)
            await asyncio.sleep(next_tick - loop.time())

    async def tick(self) -> float | None:
        """Read the top page and publish it if it changed; returns the page's as_of."""
        tick = time.time()
        try:
            page = await self._pages.page(self.board, None, 0, self._limit, self.group)
        except Exception as e:
            # An outage (or the board losing its open window) must not end the task that
            # every open stream depends on: streams keep their last frame, the next tick
            # tries again, and the log says so once per outage, not once a second.
            if not self._failing:
                self._failing = True
                if isinstance(e, PodiumError):
                    log.warning("stream %s: reading the top page failed: %s", self.name, e)
                else:
                    log.exception("stream %s: reading the top page failed", self.name)
            return None
        if self._failing:
            self._failing = False
            log.info("stream %s: reading the top page again", self.name)
        current = (page.window, page.entries)
        if current != self._last_page:  # else nothing moved: only heartbeats go out
            self._last_page = current
            self.publish(encode(page, tick))
        return page.as_of


class Hub:
    """The broadcasters of one process, by board and group (``None`` on a board not split
    into groups)."""

    def __init__(
        self,
        pages: Pages,
        *,
        now: Callable[[], float] = time.time,
        interval_s: float = 1.0,
        limit: int = 100,
        heartbeat_s: float = 15.0,
        cache_s: float = 0.0,
        max_per_client: int = 1_000_000,
        max_streams: int = 1_000_000,
    ) -> None:
        self.heartbeat_s = heartbeat_s
        self.max_per_client = max_per_client
        self.max_streams = max_streams
        self._open: dict[str, int] = {}  # streams open, by client
        self.open = 0
        self._pages = pages
        self._now = now
        self._interval = interval_s
        self._limit = limit
        self._cache_s = cache_s
        self._boards: dict[tuple[str, str | None], Broadcaster] = {}
        self._viewers: dict[str, int] = {}  # streams open, by board, every group together

    def broadcaster(self, board: str, group: str | None = None) -> Broadcaster:
        b = self._boards.get((board, group))
        if b is None:
            b = Broadcaster(
                self._pages,
                board,
                group=group,
                interval_s=self._interval,
                limit=self._limit,
                cache_s=self._cache_s,
                now=self._now,
            )
            self._boards[(board, group)] = b
        return b

    def admit(self, client: str) -> Callable[[], None]:
        """Count one more stream for ``client``, or refuse it: 429 past the client's cap, 503
        past the process's. Returns the release, to call once (more calls do nothing) when
        the stream ends."""
        if self._open.get(client, 0) >= self.max_per_client:
            raise RateLimited(
                f"this client has {self.max_per_client} streams open already", retry_after=5
            )
        if self.open >= self.max_streams:
            raise Unavailable(f"{self.open} streams are open on this process; retry shortly")
        self._open[client] = self._open.get(client, 0) + 1
        self.open += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.open -= 1
            left = self._open.pop(client) - 1
            if left:
                self._open[client] = left

        return release

    def subscribe(self, board: str, group: str | None = None) -> asyncio.Queue[bytes]:
        queue = self.broadcaster(board, group).subscribe()
        self._count(board, +1)
        return queue

    def unsubscribe(
        self, board: str, queue: asyncio.Queue[bytes], group: str | None = None
    ) -> None:
        b = self._boards.get((board, group))
        if b is None or not b.holds(queue):
            return
        b.unsubscribe(queue)
        self._count(board, -1)
        if not b.subscribers:
            # A stopped broadcaster is made again by the next stream: holding one for every
            # group ever watched would keep up to 676 per grouped board for nothing.
            del self._boards[(board, group)]

    def _count(self, board: str, delta: int) -> None:
        """The gauge is by board, as it was before boards had groups: the streams of every
        group of the board, counted here since each broadcaster knows only its own."""
        n = self._viewers.get(board, 0) + delta
        self._viewers[board] = n
        metrics.STREAM_CLIENTS.labels(board).set(n)

    async def close(self) -> None:
        for b in self._boards.values():
            await b.close()
