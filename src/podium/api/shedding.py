"""Results before reads: the load gate that sheds reads when this process is saturated.

What is shed, in what order and why is ``domain/admission.py``; this module measures, and
answers. Three parts:

- ``LoadGate`` holds the level in force (0 to 4). A ticker (``ticking``, run in the app's
  lifespan) sleeps ``TICK_S`` on the event loop and measures how late it wakes, smoothed
  over about ``SMOOTH_S``; each tick it reads the matches in flight and how long the oldest
  of them has been recording (``PendingMatches``) and the requests in flight (counted by the
  middleware), and sets the level. So the figures are what the process really sees, and
  the per-request work is only reading one attribute.
- ``ShedReads``, a pure ASGI middleware in front of routing: it counts the requests in
  flight, and while the level is above 0 sorts each ``GET``/``HEAD`` read by its path into a
  class and answers the shed ones itself, without routing them: ``503`` problem+json with
  ``Retry-After: 1``, and the class counted in ``podium_reads_shed_total{route_class}``. A
  429 is a client over its own rate; this is the server's state, hence 503. Every other
  request (results, the admin's calls, health, metrics, the browser pages) passes as is.
- the top page's last copy: the route hands the gate every top page body it serves
  (``keep_page``; the same bytes object while the read side caches the page, so a store
  only once a refill), and while top pages are shed a request for one is answered from it
  (``Age`` says how old; the body's ``asOf`` too) if it is at most ``STALE_S`` old. Only
  where there is no copy is it refused.

The figures can be pinned (``hold``): the seam tests use to make the gate see saturation
without loading the machine, and a drill an operator can run in a shell.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from podium import metrics
from podium.api.problems import PROBLEM
from podium.domain import admission
from podium.domain.admission import FAR, FRIENDS, PAGE, RANK, Level, Limits
from podium.util.caching import Cache

TICK_S = 0.01  # how often the loop's lag is sampled: a hundred times a second costs nothing
SMOOTH_S = 0.1  # the lag's smoothing: a saturated loop shows within a few ticks, a blip fades
STALE_S = 60.0  # a top page older than this misleads more than a 503 does
PAGES_KEPT = 1000  # top page copies kept (board x limit x group x query spelling)

DETAIL = (
    "the server is busy and results come first: this read was shed; retry after Retry-After seconds"
)


def _problem(route_class: str) -> bytes:
    body = {
        "type": "about:blank",
        "title": "Server busy",
        "status": 503,
        "detail": DETAIL,
        "readClass": route_class,
    }
    return json.dumps(body, separators=(",", ":")).encode()


class LoadGate:
    """The shedding level of this process, and what it is measured from."""

    def __init__(
        self,
        limits: Limits,
        pending: Callable[[], int],
        *,
        oldest: Callable[[], float] = lambda: 0.0,
        enabled: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.limits = limits
        self.enabled = enabled
        self.level = 0  # read by every request: the only per-request cost
        # Said at once: the gauge is set only when the level changes, so a gate that starts
        # at 0 where another (an app before it in this process) left it higher would
        # otherwise report that one's level until its own first change.
        metrics.SHED_LEVEL.set(0)
        self.busy = 0  # requests in flight, counted by ShedReads
        self.lag_s = 0.0  # the loop's lag, smoothed
        self._pending = pending
        self._oldest = oldest  # how long the oldest match in flight has been recording
        self._clock = clock
        self._level = Level()
        self._held: tuple[float, int, int, float] | None = None
        self._pages: Cache[tuple[str, bytes], tuple[bytes, float]] = Cache(
            PAGES_KEPT, STALE_S, time.monotonic
        )

    # -- measuring --------------------------------------------------------------------

    def observe(self, late_s: float, elapsed_s: float) -> int:
        """One tick: the timer fired ``late_s`` late, ``elapsed_s`` after the last one.
        Smoothed by time, not by tick, so that a loop stalled for a second weighs a second."""
        weight = 1.0 - math.exp(-elapsed_s / SMOOTH_S)
        self.lag_s += (max(0.0, late_s) - self.lag_s) * weight
        return self.update()

    def update(self) -> int:
        """The level from the figures now (or the pinned ones)."""
        if self._held is not None:
            lag, pending, busy, oldest = self._held
        else:
            lag, pending, busy, oldest = self.lag_s, self._pending(), self.busy, self._oldest()
        wanted = admission.target(lag, pending, busy, self.limits, oldest) if self.enabled else 0
        level = self._level.update(wanted, self._clock(), self.limits.hold_s)
        if level != self.level:
            self.level = level
            metrics.SHED_LEVEL.set(level)
        return level

    def hold(
        self, lag_s: float, pending: int = 0, busy: int | None = None, oldest_s: float = 0.0
    ) -> int:
        """Pin the figures (the tests' seam): the ticker's measures are ignored until
        ``release``. ``busy`` defaults to enough requests in flight to count."""
        self._held = (lag_s, pending, self.limits.min_busy if busy is None else busy, oldest_s)
        return self.update()

    def release(self) -> None:
        self._held = None
        self._level = Level()
        self.update()

    # -- the top page's last copy ------------------------------------------------------

    def keep_page(self, scope: Scope, body: bytes) -> None:
        """The route's answer to a top page, kept to be served stale while pages are shed."""
        key = (scope["path"], scope["query_string"])
        held = self._pages.get(key)
        if held is None or held[0] is not body:
            self._pages.put(key, (body, time.monotonic()))

    def stale_page(self, scope: Scope) -> tuple[bytes, float] | None:
        return self._pages.get((scope["path"], scope["query_string"]))


async def tick(gate: LoadGate, clock: Callable[[], float] = time.perf_counter) -> None:
    """Measure the loop's lag until cancelled. ``perf_counter``, not the loop's clock: on
    uvloop that one moves in whole milliseconds."""
    last = clock()
    while True:
        await asyncio.sleep(TICK_S)
        now = clock()
        gate.observe(now - last - TICK_S, now - last)
        metrics.LOOP_LAG_SECONDS.set(gate.lag_s)
        last = now


@asynccontextmanager
async def ticking(gate: LoadGate) -> AsyncIterator[None]:
    """The ticker for the life of the app (nothing when shedding is off)."""
    if not gate.enabled:
        yield
        return
    task = asyncio.create_task(tick(gate), name="podium-load-gate")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


def _top_page(query: bytes) -> bool:
    """A board page from the top of the live window: no cursor, no past window, offset 0."""
    if not query:
        return True
    for name, value in parse_qsl(query.decode("latin-1")):
        if name in ("cursor", "window") or (name == "offset" and value.strip("0") != ""):
            return False
    return True


def classify(method: str, path: str, query: bytes) -> str | None:
    """The class of a read (``domain/admission.py``), or None for a request never shed."""
    if method not in ("GET", "HEAD"):
        return None
    if path.startswith("/v1/boards/"):
        parts = path[11:].split("/")
        if len(parts) == 1:
            return PAGE if _top_page(query) else FAR
        if parts[1] == "players" and len(parts) == 3:
            return RANK
        if parts[1] == "players" and len(parts) == 4 and parts[3] == "friends":
            return FRIENDS
        return FAR
    if path == "/v1/boards" or (path.startswith("/v1/players/") and path.endswith("/history")):
        return FAR
    return None


class ShedReads:
    """Counts the requests in flight, and sheds reads by class while the gate's level is up."""

    def __init__(self, app: ASGIApp, gate: LoadGate) -> None:
        self.app = app
        self.gate = gate
        self._bodies = {c: _problem(c) for c in admission.LEVELS}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gate = self.gate
        if gate.level and await self._shed(scope, send):
            return
        if scope["path"].endswith("/stream"):  # open for minutes: not work in flight
            await self.app(scope, receive, send)
            return
        gate.busy += 1
        try:
            await self.app(scope, receive, send)
        finally:
            gate.busy -= 1

    async def _shed(self, scope: Scope, send: Send) -> bool:
        """Answers a read this level sheds (True), or lets it through (False)."""
        route_class = classify(scope["method"], scope["path"], scope["query_string"])
        if route_class is None or not admission.sheds(self.gate.level, route_class):
            return False
        head = scope["method"] == "HEAD"
        if route_class == PAGE and (copy := self.gate.stale_page(scope)) is not None:
            body, kept_at = copy
            age = str(int(time.monotonic() - kept_at)).encode()
            metrics.READS_STALE.inc()
            headers = [
                (b"content-type", b"application/json"),
                (b"cache-control", b"no-cache"),
                (b"age", age),
            ]
            await _answer(send, 200, body, head, headers)
            return True
        metrics.READS_SHED.labels(route_class).inc()
        headers = [(b"content-type", PROBLEM.encode()), (b"retry-after", b"1")]
        await _answer(send, 503, self._bodies[route_class], head, headers)
        return True


async def _answer(
    send: Send, status: int, body: bytes, head: bool, headers: list[tuple[bytes, bytes]]
) -> None:
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})
