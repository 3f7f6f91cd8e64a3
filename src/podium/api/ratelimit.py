"""The HTTP side of the read limits: who the client is behind a trusted proxy, the read
handlers' spending of a token (``ports/ratelimit.py``), and the matches in flight taken in
turns (``domain/intake.py``).

The buckets live in this process (``index/memory/ratelimit.py``) or, for a fleet, in Redis
(``index/redis/ratelimit.py``); ``bootstrap.read_limiter`` picks one (``server.read_limiter``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import NoReturn

from fastapi import Request

from podium import metrics
from podium.domain import intake
from podium.domain.intake import Intake
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
    """The matches this process records, in turns (``domain/intake.py``): at most
    ``turns`` run their store work at once, the others wait their turn in the order they
    came; a match is refused (``Overloaded``: 503 with Retry-After) before it touches the
    store when ``limit`` are in flight, when its turn would come (or came) past ``wait_ms``,
    or when its client left while it waited. The game server retries it (retries are safe:
    a refused match claimed and wrote nothing)."""

    def __init__(
        self,
        limit: int,
        turns: int | None = None,
        wait_ms: float = 1000.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.intake = Intake(limit, limit if turns is None else turns, wait_ms / 1000)
        self._clock = clock
        self._ticket = 0
        # Each waiting match's future, by ticket: the same tickets as the intake's queue.
        # Its result: True, its turn came; False, it waited ``wait_ms`` (the timer's).
        self._turns: dict[int, asyncio.Future[bool]] = {}

    @property
    def now(self) -> int:
        """Matches in flight, waiting ones included: the load gate sheds reads by them
        against ``server.max_pending_matches``, which caps them all, so that every read is
        shed by the time a match is refused full; and a match waiting for a turn is as much
        a result to protect as one in the store."""
        return self.intake.in_flight

    def oldest_s(self) -> float:
        """How long the oldest match in flight has been in flight, from its arrival (0 with
        none): what the load gate sheds every read at (``server.shed_accept_ms``). Waiting
        ones count: a match waiting for its turn is a result already late."""
        return self.intake.oldest_s(self._clock())

    @asynccontextmanager
    async def admit(self, gone: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[None]:
        """The match's turn, held while the body runs; ``gone`` says whether the client
        left (looked at once the turn comes after a wait: a match that runs at once was
        just read whole). Raises ``Overloaded`` instead when the match is turned away."""
        self._ticket += 1
        ticket = self._ticket
        decision = self.intake.arrive(ticket, self._clock())
        if decision == intake.FULL:
            _refuse(
                intake.FULL,
                f"this process is recording {self.intake.in_flight} matches already; retry shortly",
            )
        if decision == intake.LATE:
            _refuse(intake.LATE, self._late_detail())
        if decision == intake.WAIT:
            await self._wait(ticket, gone)
        began = self._clock()
        try:
            yield
        finally:
            self._hand(self.intake.end(ticket, self._clock() - began))

    async def _wait(self, ticket: int, gone: Callable[[], Awaitable[bool]] | None) -> None:
        """Until the match's turn comes, then hold it; or the match refused, its turn (if
        it came) handed on."""
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[bool] = loop.create_future()
        self._turns[ticket] = turn
        timer = loop.call_later(
            max(0.0, self.intake.deadline(ticket) - self._clock()), self._expire, ticket
        )
        try:
            came = await turn
        except asyncio.CancelledError:  # the request ended while it waited
            if ticket in self._turns:  # still waiting: it leaves the queue
                del self._turns[ticket]
                self.intake.withdraw(ticket)
            elif not turn.cancelled() and turn.result():  # its turn came meanwhile: on
                self._hand(self.intake.end(ticket, None))
            # else its wait ran out, or a turn handed to it went on (``_hand``): it has left
            raise
        finally:
            timer.cancel()
        if not came:
            _refuse(intake.LATE, self._late_detail())
        try:
            if self.intake.overdue(ticket, self._clock()):
                # The turn came past the wait (a loop too busy to run the timer in time).
                _refuse(intake.LATE, self._late_detail())
            if gone is not None and await gone():
                _refuse(intake.GONE, "the client left while the match waited for its turn")
        except BaseException:
            self._hand(self.intake.end(ticket, None))
            raise

    def _expire(self, ticket: int) -> None:
        """The timer: a match still waiting ``wait_ms`` after it came leaves the queue (one
        whose request ended meanwhile leaves by its own handler)."""
        turn = self._turns.get(ticket)
        if turn is not None and not turn.done():
            del self._turns[ticket]
            self.intake.withdraw(ticket)
            turn.set_result(False)

    def _hand(self, ticket: int | None) -> None:
        """The turn to ``ticket``, the first that waited (the intake took it off its queue);
        one whose request ended before it could take it leaves, and the turn goes on."""
        while ticket is not None:
            turn = self._turns.pop(ticket)
            if not turn.done():
                turn.set_result(True)
                return
            ticket = self.intake.end(ticket, None)

    def _late_detail(self) -> str:
        return (
            f"this process's store would not take this match within "
            f"{self.intake.wait_s * 1000:.0f} ms (server.match_wait_ms); retry shortly"
        )


def _refuse(reason: str, detail: str) -> NoReturn:
    metrics.MATCHES_TURNED_AWAY.labels(reason).inc()
    raise Overloaded(detail)
