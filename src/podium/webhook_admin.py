"""The admin's view of webhook deliveries (``GET /v1/admin/webhooks/deliveries``): what was
sent where, how it was answered, how often it was tried and when it is tried next; oldest
first, a page at a time, by state. Knows the port, never an adapter."""

from __future__ import annotations

import re
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
        after = _decode(cursor)
        rows = await self.store.deliveries(state, after, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1] if rows else None
        return DeliveryPage(rows, _encode(last) if more and last else None)


# A cursor: the place of the last delivery of a page in the list's order (when it was made,
# its event id, its endpoint), written so that every string of its pattern (``CURSOR``, which
# the API publishes) is a place: the time as Python writes a float, the two ids in hex. Any
# such place resumes the list after it, whatever the state filter.
CURSOR = r"^[0-9]{1,20}(\.[0-9]{1,20})?_([0-9a-f]{2}){1,256}_([0-9a-f]{2}){1,1024}$"


def _encode(d: Delivery) -> str:
    return f"{d.first_at!r}_{d.event_id.encode().hex()}_{d.endpoint.encode().hex()}"


def _decode(cursor: str | None) -> tuple[float, str, str] | None:
    if cursor is None:
        return None
    if re.fullmatch(CURSOR, cursor) is None:
        raise InvalidInput("cursor: not a cursor this API gave (pass `next` as it is)")
    first, event_id, endpoint = cursor.split("_")
    return float(first), _text(event_id), _text(endpoint)


def _text(hex_utf8: str) -> str:
    return bytes.fromhex(hex_utf8).decode("utf-8", "replace")
