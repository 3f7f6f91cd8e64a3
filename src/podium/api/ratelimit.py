"""Per-client token buckets for the public read endpoints, who the client is behind a
trusted proxy, and the cap on matches in flight.

The buckets live in this process (``ReadLimiter``) or, for a fleet, in Redis
(``podium.index.ratelimit``); ``bootstrap.read_limiter`` picks one (``server.read_limiter``).
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from fastapi import Request

from podium.errors import Overloaded, RateLimited

MAX_CLIENTS = 100_000  # buckets kept; the least recently seen client is forgotten first
MAX_HOPS = 20  # forwarded addresses looked at, right to left

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Buckets(Protocol):
    """One token bucket per client: ``take`` spends a token or raises ``RateLimited``."""

    kind: str  # "off", "process" or "redis": said by /healthz and the metrics

    async def take(self, client: str) -> None: ...
    async def close(self) -> None: ...


class ReadLimiter:
    """The buckets of this process alone."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate = rate_per_s
        self.burst = float(max(1, burst))
        self.kind = "process" if rate_per_s > 0 else "off"
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    async def take(self, client: str) -> None:
        self.check(client)

    async def close(self) -> None:
        return None

    def check(self, client: str, now: float | None = None) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.pop(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens < 1:
            self._buckets[client] = (tokens, now)
            raise RateLimited(
                "too many reads from this client", retry_after=int((1 - tokens) / self.rate) + 1
            )
        self._buckets[client] = (tokens - 1, now)
        if len(self._buckets) > MAX_CLIENTS:
            self._buckets.popitem(last=False)


def _address(token: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address out of one forwarded hop: ``1.2.3.4``, ``1.2.3.4:5678``, ``[::1]:80``,
    ``::1``; None for anything else (``unknown``, an obfuscated ``_node``)."""
    t = token.strip().strip('"')
    if t.startswith("["):
        t = t[1 : t.find("]")] if "]" in t else ""
    elif t.count(":") == 1:
        t = t.split(":", 1)[0]
    try:
        return ipaddress.ip_address(t)
    except ValueError:
        return None


def _forwarded_for(value: str) -> list[str]:
    """The ``for=`` of each element of a Forwarded header (RFC 7239), in order."""
    out = []
    for element in value.split(","):
        hop = ""
        for pair in element.split(";"):
            name, _, v = pair.partition("=")
            if name.strip().lower() == "for":
                hop = v.strip()
        out.append(hop)
    return out


class ClientAddress:
    """Who a request is from. The peer, unless the peer is a trusted proxy: then the
    right-most address of its X-Forwarded-For (or, without one, its Forwarded) that is not
    itself a trusted proxy. Only the trusted proxies' own hops are believed, so a client
    cannot choose its bucket by sending the header itself."""

    def __init__(self, trusted: Sequence[str]) -> None:
        self.trusted: tuple[Network, ...] = tuple(
            ipaddress.ip_network(n, strict=False) for n in trusted
        )

    def _is_trusted(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return any(address in n for n in self.trusted)

    def __call__(self, request: Request) -> str:
        peer = request.client.host if request.client else "unknown"
        if not self.trusted:
            return peer
        return self.resolve(
            peer, request.headers.get("x-forwarded-for"), request.headers.get("forwarded")
        )

    def resolve(self, peer: str, x_forwarded_for: str | None, forwarded: str | None) -> str:
        address = _address(peer)
        if address is None or not self._is_trusted(address):
            return peer
        if x_forwarded_for:
            hops = x_forwarded_for.split(",")
        elif forwarded:
            hops = _forwarded_for(forwarded)
        else:
            return peer
        for hop in reversed(hops[-MAX_HOPS:]):
            a = _address(hop)
            if a is None:
                # Not an address (unknown, obfuscated, garbage): this hop is the client as
                # far as anyone can say, and is not trusted further.
                return hop.strip().strip('"') or peer
            if not self._is_trusted(a):
                return str(a)
        return peer  # every hop a trusted proxy: the request began inside


async def limit_reads(request: Request) -> None:
    """Awaited first thing in the hot read handlers: as a dependency it costs a second pass
    of FastAPI's dependency solving per request."""
    limiter: Buckets = request.app.state.read_limiter
    if limiter.kind == "off":
        return
    await limiter.take(request.app.state.client_address(request))


async def read_limit(request: Request) -> None:
    await limit_reads(request)


class PendingMatches:
    """Counts the matches this process is recording; past ``limit`` a new one is refused
    before it touches the store, and the game server retries it (retries are safe)."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._ticket = 0
        # When each match in flight began, by ticket, in the order they began: the first is
        # the oldest (a dict keeps insertion order; a finished one is deleted wherever it is).
        self._began: dict[int, float] = {}

    @property
    def now(self) -> int:
        """Matches in flight."""
        return len(self._began)

    @contextmanager
    def admit(self) -> Iterator[None]:
        if self.now >= self.limit:
            raise Overloaded(f"this process is recording {self.now} matches already; retry shortly")
        self._ticket += 1
        ticket = self._ticket
        self._began[ticket] = self._clock()
        try:
            yield
        finally:
            del self._began[ticket]

    def oldest_s(self) -> float:
        """How long the oldest match in flight has been recording (0 with none): what the
        load gate sheds every read at (``server.shed_accept_ms``)."""
        for began in self._began.values():
            return self._clock() - began
        return 0.0
