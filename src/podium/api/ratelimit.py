"""The HTTP side of the read limits: who the client is behind a trusted proxy, the read
handlers' spending of a token (``ports/ratelimit.py``), and the cap on matches in flight.

The buckets live in this process (``index/memory/ratelimit.py``) or, for a fleet, in Redis
(``index/redis/ratelimit.py``); ``bootstrap.read_limiter`` picks one (``server.read_limiter``).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from fastapi import Request

from podium.errors import Overloaded
from podium.ports.ratelimit import Buckets

MAX_HOPS = 20  # forwarded addresses looked at, right to left

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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
