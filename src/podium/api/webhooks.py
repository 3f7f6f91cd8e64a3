"""The admin's routes of webhooks: the endpoints configured (``GET /v1/admin/webhooks``),
their deliveries (``GET /v1/admin/webhooks/deliveries``), and a failed one tried again
(``POST /v1/admin/webhooks/deliveries/{eventId}/retry``).

Its bodies are defined here, beside the route, since no other route uses them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

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


class EndpointOut(BaseModel):
    url: str = Field(description="its password and secret query values shown as ***")
    events: list[str]
    retryForSeconds: float = Field(description="how long a delivery is retried before it fails")


class EndpointsOut(BaseModel):
    endpoints: list[EndpointOut]


@router.get("/v1/admin/webhooks", response_model=EndpointsOut, responses=responses(401, 403))
async def list_endpoints(request: Request) -> EndpointsOut:
    """The endpoints of the settings' ``[[webhooks]]`` tables, without their secrets."""
    return EndpointsOut(
        endpoints=[
            EndpointOut(url=e.url, events=list(e.events), retryForSeconds=e.retry_for_s)
            for e in _podium(request).webhooks.endpoints()
        ]
    )


class RetryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str | None = Field(
        None,
        min_length=1,
        max_length=2048,
        description="the delivery's endpoint, as the list shows it; absent: every endpoint",
    )


class RetriedOut(BaseModel):
    eventId: str
    endpoint: str | None = None
    retried: int = Field(description="deliveries made due now")


EventId = Annotated[
    str,
    Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$", description="a delivery's eventId"),
]


@router.post(
    "/v1/admin/webhooks/deliveries/{eventId}/retry",
    response_model=RetriedOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 404, 413, 422, 503),
)
async def retry_delivery(request: Request, eventId: EventId, body: RetryIn) -> RetriedOut:
    """A failed delivery tried again at once: pending, due now, its attempts counted on;
    without an endpoint, each failed delivery of the event. 404 when there is none."""
    n = await _podium(request).webhooks.retry(eventId, body.endpoint)
    return RetriedOut(eventId=eventId, endpoint=body.endpoint, retried=n)
