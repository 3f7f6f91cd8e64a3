"""The admin's route of webhook deliveries: ``GET /v1/admin/webhooks/deliveries``.

Its bodies are defined here, beside the route, since no other route uses them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from podium.api.auth import admin
from podium.api.problems import responses
from podium.domain.windows import to_rfc3339
from podium.ports import Delivery
from podium.service.webhook_admin import CURSOR
from podium.service.wiring import Service

router = APIRouter(tags=["admin"], dependencies=[Depends(admin)])
State = Literal["pending", "delivered", "failed"]


class DeliveryOut(BaseModel):
    eventId: str = Field(description="the webhook-id every attempt was sent under")
    type: str = Field(description="the event: window.frozen, player.banned, player.flagged, ...")
    endpoint: str = Field(description="the url of the [[webhooks]] table it is sent to")
    state: State = Field(
        description="pending (to be tried, again or for the first time), delivered (answered "
        "2xx), failed (given up after the endpoint's retry_for_s)"
    )
    attempts: int
    firstAttemptAt: str = Field(description="when the delivery was made, due at once")
    nextAttemptAt: str | None = Field(None, description="pending only: when it is tried next")
    lastStatus: int | None = Field(None, description="the HTTP status of the last answer")
    lastError: str | None = Field(None, description="why the last attempt failed")
    deliveredAt: str | None = None


class DeliveriesOut(BaseModel):
    deliveries: list[DeliveryOut]
    next: str | None = Field(None, description="the cursor of the next page; absent on the last")


def _time(t: float | None) -> str | None:
    return None if t is None else to_rfc3339(t)


def _out(d: Delivery) -> DeliveryOut:
    return DeliveryOut(
        eventId=d.event_id,
        type=d.event_type,
        endpoint=d.endpoint,
        state=d.state,  # type: ignore[arg-type]  # one of STATES, as the store keeps it
        attempts=d.attempts,
        firstAttemptAt=to_rfc3339(d.first_at),
        nextAttemptAt=_time(d.next_at),
        lastStatus=d.last_status,
        lastError=d.last_error,
        deliveredAt=_time(d.delivered_at),
    )


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


@router.get(
    "/v1/admin/webhooks/deliveries",
    response_model=DeliveriesOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 422, 503),
)
async def list_deliveries(
    request: Request,
    state: Annotated[State | None, Query(description="only deliveries in this state")] = None,
    cursor: Annotated[
        str | None,
        Query(
            pattern=CURSOR,
            max_length=600,
            description="the `next` of the previous page, as it was given",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> DeliveriesOut:
    """Webhook deliveries, oldest first: what was sent where, how it was answered, how
    often it was tried and when it is tried next."""
    page = await _podium(request).webhooks.deliveries(state, cursor, limit)
    return DeliveriesOut(deliveries=[_out(d) for d in page.deliveries], next=page.next)
