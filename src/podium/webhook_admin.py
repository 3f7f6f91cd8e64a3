"""The admin's view of webhook deliveries (``GET /v1/admin/webhooks/deliveries``): what was
sent where, how it was answered, how often it was tried and when it is tried next; oldest
first, a page at a time, by state. Knows the port, never an adapter."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from podium.domain.events import STATES
from podium.errors import InvalidInput
from podium.ports import Delivery, WebhookEvents


@dataclass(frozen=True, slots=True)
class DeliveryPage:
    deliveries: list[Delivery]
    next: str | None  # the cursor of the next page, None on the last


class WebhookAdmin:
    def __init__(self, store: WebhookEvents) -> None:
        self.store = store

    async def deliveries(self, state: str | None, cursor: str | None, limit: int) -> DeliveryPage:
        if state is not None and state not in STATES:
            raise InvalidInput(f"state: expected {' | '.join(STATES)}, got {state!r}")
        after = _decode(cursor, state)
        rows = await self.store.deliveries(state, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1] if rows else None
        return DeliveryPage(rows, _encode(state, last) if more and last else None)


# A cursor: the place of the last delivery of a page in the list's order (when its first
# attempt was made, its event, its endpoint), for one state filter only.


def _encode(state: str | None, d: Delivery) -> str:
    raw = json.dumps([state, d.first_at, d.event_id, d.endpoint], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(cursor: str | None, state: str | None) -> tuple[float, str, str] | None:
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        s, first, event_id, endpoint = json.loads(raw)
        if not (
            isinstance(first, int | float)
            and not isinstance(first, bool)
            and isinstance(event_id, str)
            and isinstance(endpoint, str)
        ):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error):
        raise InvalidInput("cursor: not a cursor this API gave (pass `next` as it is)") from None
    if s != state:
        raise InvalidInput(f"cursor: it pages deliveries of state {s}, not {state}")
    return float(first), event_id, endpoint
