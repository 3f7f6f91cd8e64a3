"""The store's port for reward and moderation events (``domain/events.py``): the events each
change wrote in its own transaction, turned into deliveries, claimed, settled and listed.

Events are written by the stores' own writes (a freeze, a ban, a flagged result), never
through this port; the webhooks role (``workers/webhooks.py``), the admin's list of
deliveries, the pruner (old events out) and, when NATS is the log, the relay
(``EventStream``: events onto the stream, ``log/nats/relay.py``) are its only callers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Due:
    """A delivery claimed for one attempt: the event, the endpoint, and which attempt this
    is (``attempts``, counted at the claim: the fence ``settle`` checks). ``source`` names
    the database it lives on, for a store of several."""

    event_id: str
    endpoint: str
    event_type: str
    at: float
    data: str
    attempts: int
    first_at: float
    source: str = ""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery as the admin lists it."""

    event_id: str
    event_type: str
    endpoint: str
    state: str
    attempts: int
    first_at: float
    next_at: float | None  # None once delivered or failed
    last_status: int | None
    last_error: str | None
    delivered_at: float | None


@dataclass(frozen=True, slots=True)
class Event:
    """A ready event, as the relay publishes it: its id, type, time and stored data."""

    event_id: str
    event_type: str
    at: float
    data: str


class EventStream(Protocol):
    """One database's events on their way to the change log's stream (NATS), at least
    once: read, published, then marked, by the relay that holds the database's lease."""

    async def unpublished_events(self, limit: int) -> list[Event]:
        """Up to ``limit`` ready events (a freeze's once its sha256 is in) not marked
        published yet, oldest first."""
        ...

    async def mark_published(self, event_ids: Sequence[str]) -> None:
        """These events are on the stream: not read by ``unpublished_events`` again."""
        ...


class WebhookEvents(EventStream, Protocol):
    async def fan_out(
        self, routes: Mapping[str, Sequence[str]], since: float, now: float, limit: int
    ) -> int:
        """Up to ``limit`` events not fanned out yet, each made a pending delivery for every
        endpoint ``routes`` subscribes to its type (``routes``: type to endpoint urls), due
        now; an event from before ``since`` gets none (it is past the retry horizon). How
        many events were fanned out. Safe with several callers at once."""
        ...

    async def claim_deliveries(
        self,
        now: float,
        lease_until: float,
        limit: int,
        *,
        endpoint: str | None = None,
        other_than: Sequence[str] = (),
    ) -> list[Due]:
        """Up to ``limit`` pending deliveries due by ``now``, each counted an attempt and
        held until ``lease_until`` (not claimed again before then, unless settled), oldest
        due first. Two callers at once never claim the same one. ``endpoint``: only the
        deliveries to it (each endpoint is claimed for apart, so that a slow one holds back
        only its own); ``other_than``: only those to none of these endpoints (the ones no
        longer configured)."""
        ...

    async def settle(
        self,
        due: Due,
        now: float,
        *,
        status: int | None,
        error: str | None,
        retry_at: float | None,
        delivered: bool,
    ) -> None:
        """An attempt's outcome: delivered; or failed, to be tried at ``retry_at`` (None:
        given up). Ignored if the delivery was claimed again since (its lease ran out)."""
        ...

    async def deliveries(
        self, state: str | None, after: tuple[float, str, str] | None, limit: int
    ) -> list[Delivery]:
        """Up to ``limit`` deliveries (in ``state``, or any), oldest first, from the first
        after ``after`` (``(first_at, event_id, endpoint)`` of the last one seen)."""
        ...

    async def retry_delivery(self, event_id: str, endpoint: str, now: float) -> bool:
        """A failed delivery made pending again, due at ``now``: the delivery worker tries
        it once more (its attempts counted on; past the endpoint's retry horizon a failure
        settles it as failed again). False when there is no such delivery or it is not
        failed (pending ones are tried anyway, delivered ones are done)."""
        ...

    async def prune_events(
        self, before: float, limit: int, *, fanned: bool, published: bool
    ) -> int:
        """Up to ``limit`` events from before ``before`` deleted, with their deliveries:
        only those done with: no delivery pending (each delivered or failed), and with
        ``fanned`` made deliveries of already (webhooks are configured), with ``published``
        on the stream already (NATS is the log). How many events went. Safe with several
        callers at once."""
        ...
