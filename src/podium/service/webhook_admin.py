"""The admin's view of webhook deliveries (``GET /v1/admin/webhooks/deliveries``): what was
sent where, how it was answered, how often it was tried and when it is tried next; oldest
first, a page at a time, by state. The endpoints configured, and a failed delivery tried
again. Knows the port, never an adapter.

An endpoint's password and secret query values are never shown: not in its url
(``redact_url``), not in an error that repeats them, not in a page's cursor."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from podium.config.settings import Settings
from podium.domain.events import FAILED, STATES
from podium.errors import InvalidInput, NotFound
from podium.ports import Clock, Delivery, WebhookEvents
from podium.util.redact import redact_text, redact_url


@dataclass(frozen=True, slots=True)
class DeliveryPage:
    deliveries: list[Delivery]
    next: str | None  # the cursor of the next page, None on the last


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str  # as shown: its password and secret query values redacted
    events: tuple[str, ...]
    retry_for_s: float


class WebhookAdmin:
    def __init__(self, store: WebhookEvents, settings: Settings, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock

    def endpoints(self) -> list[Endpoint]:
        """The configured [[webhooks]], as the admin may see them (no secret)."""
        return [
            Endpoint(redact_url(w.url), tuple(w.events), w.retry_for_s)
            for w in self.settings.webhooks
        ]

    async def retry(self, event_id: str, endpoint: str | None) -> int:
        """The failed deliveries of ``event_id`` to ``endpoint`` (its url as the list shows
        it, redacted: the admin never sees a password to send back), or to every endpoint,
        made due now; how many. A 404 when there is none (never made, delivered, or
        pending: tried anyway)."""
        now = self.clock.now()
        done = 0
        for d in await self._failed_of(event_id):
            if endpoint is None or redact_url(d.endpoint) == endpoint:
                done += await self.store.retry_delivery(d.event_id, d.endpoint, now)
        if not done:
            to = "" if endpoint is None else f" to {endpoint}"
            raise NotFound(f"event {event_id} has no failed delivery{to}")
        return done

    async def _failed_of(self, event_id: str) -> list[Delivery]:
        """The failed deliveries of one event. The list is ordered by when each was made,
        not by event: read the failed ones (the few given up on) and look for it there."""
        out: list[Delivery] = []
        after: tuple[float, str, str] | None = None
        while True:
            rows = await self.store.deliveries(FAILED, after, PLACES)
            out += [d for d in rows if d.event_id == event_id]
            if len(rows) < PLACES:
                return out
            last = rows[-1]
            after = (last.first_at, last.event_id, last.endpoint)

    async def deliveries(self, state: str | None, cursor: str | None, limit: int) -> DeliveryPage:
        if state is not None and state not in STATES:
            raise InvalidInput(f"state: expected {' | '.join(STATES)}, got {state!r}")
        after = await self._resume(_decode(cursor))
        rows = await self.store.deliveries(state, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1] if rows else None
        return DeliveryPage(
            [_shown(d) for d in rows], await self._cursor(last) if more and last else None
        )

    # A cursor names the last delivery of a page by its event and the place of its endpoint
    # among the event's deliveries (in the list's order, whatever their state), not by the
    # endpoint's url, which may hold a password. An event's deliveries are made together,
    # once, and deleted together: the place names the same one until the event is gone.

    async def _of_event(self, first_at: float, event_id: str) -> list[str]:
        """The endpoints of an event's deliveries, in the list's order."""
        out: list[str] = []
        after = (first_at, event_id, "")  # before every endpoint: a url is never empty
        while True:
            rows = await self.store.deliveries(None, after, PLACES)
            mine = [d.endpoint for d in rows if (d.first_at, d.event_id) == (first_at, event_id)]
            out += mine
            if len(mine) < PLACES:
                return out
            after = (first_at, event_id, mine[-1])

    async def _cursor(self, last: Delivery) -> str:
        place = (await self._of_event(last.first_at, last.event_id)).index(last.endpoint)
        return f"{last.first_at!r}_{last.event_id.encode().hex()}_{place}"

    async def _resume(self, cursor: tuple[float, str, int] | None) -> tuple[float, str, str] | None:
        if cursor is None:
            return None
        first_at, event_id, place = cursor
        endpoints = await self._of_event(first_at, event_id)
        if not endpoints:  # pruned since: every delivery of it is gone, resume past it
            return (first_at, event_id, "")
        return (first_at, event_id, endpoints[min(place, len(endpoints) - 1)])


def _shown(d: Delivery) -> Delivery:
    error = d.last_error and redact_text(d.last_error, d.endpoint)
    return replace(d, endpoint=redact_url(d.endpoint), last_error=error)


PLACES = 100  # an event's deliveries read at once to find a cursor's place (one an endpoint)
# A cursor: the place of the last delivery of a page in the list's order (when it was made,
# its event id in hex, the place of its endpoint among the event's deliveries), written so
# that every string of its pattern (``CURSOR``, which the API publishes) is a place. Any
# such place resumes the list after it, whatever the state filter.
CURSOR = r"^[0-9]{1,20}(\.[0-9]{1,20})?_([0-9a-f]{2}){1,256}_[0-9]{1,6}$"


def _decode(cursor: str | None) -> tuple[float, str, int] | None:
    if cursor is None:
        return None
    if re.fullmatch(CURSOR, cursor) is None:
        raise InvalidInput("cursor: not a cursor this API gave (pass `next` as it is)")
    first, event_id, place = cursor.split("_")
    return float(first), bytes.fromhex(event_id).decode("utf-8", "replace"), int(place)
