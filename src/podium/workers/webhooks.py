"""The webhooks role: reward and moderation events (``domain/events.py``), written by the
store in the transaction that made them, POSTed to every ``[[webhooks]]`` endpoint that
subscribes to them, at least once.

Each step turns new events into deliveries (one per event and endpoint), claims the
deliveries that are due (held for an attempt's timeout and a margin, so that a process
that dies mid-attempt leaves them to another after that), POSTs each, signed as Standard
Webhooks sign (``webhook-id`` the event's id, the same on every retry, which receivers
dedupe on; ``webhook-timestamp``; ``webhook-signature``, an HMAC-SHA256 of the three), and
settles it: a 2xx is delivered; anything else, a timeout or no answer is tried again after
a growing wait with jitter, until the endpoint's ``retry_for_s`` is past, then failed.

Nothing here touches the record path: a slow or dead endpoint only delays its own events.
Several processes may run the role: the claims never overlap (``ports/webhooks.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import httpx
from standardwebhooks import Webhook

from podium import metrics
from podium.domain import events
from podium.ports import Clock, Due, WebhookEvents
from podium.webhook_config import WebhookTable
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.webhooks")

BATCH = 50  # deliveries attempted at once by one step (and events fanned out)
PERIOD_S = 0.5  # the pause after a step that found less than a batch
LEASE_MARGIN_S = 30.0  # past an attempt's timeout, before a claim may be taken again
ERROR_CHARS = 300  # of an answer's body or an error, kept with the delivery


class Deliverer:
    def __init__(
        self,
        webhooks: Sequence[WebhookTable],
        store: WebhookEvents,
        clock: Clock,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.endpoints: Mapping[str, WebhookTable] = {w.url: w for w in webhooks}
        self.signers = {w.url: Webhook(w.secret) for w in webhooks}
        routes: dict[str, list[str]] = {}
        for w in webhooks:
            for name in w.events:
                routes.setdefault(name, []).append(w.url)
        self.routes = routes
        # An event older than every endpoint's retry horizon would only be failed: none is
        # made a delivery (a webhook added today is not sent last month's events).
        self.horizon_s = max((w.retry_for_s for w in webhooks), default=0.0)
        self.lease_s = max((w.timeout_s for w in webhooks), default=0.0) + LEASE_MARGIN_S
        # Redirects are not followed: a signed body goes only where it was configured to.
        self.client = client or httpx.AsyncClient(follow_redirects=False)

    async def step(self) -> int:
        now = self.clock.now()
        fanned = await self.store.fan_out(self.routes, now - self.horizon_s, now, BATCH)
        due = await self.store.claim_deliveries(now, now + self.lease_s, BATCH)
        await asyncio.gather(*(self.attempt(d) for d in due))
        return max(fanned, len(due))

    async def attempt(self, due: Due) -> None:
        """One POST of one delivery, and its outcome settled in the store."""
        endpoint = self.endpoints.get(due.endpoint)
        if endpoint is None:  # taken out of the settings since: nowhere to send it
            await self._settle(due, None, "the endpoint is no longer configured", None)
            return
        body = events.body(due.event_type, due.at, due.data)
        sent_at = datetime.fromtimestamp(self.clock.now(), UTC)
        headers = {
            "content-type": "application/json",
            "user-agent": "podium-webhooks",
            "webhook-id": due.event_id,
            "webhook-timestamp": str(int(sent_at.timestamp())),
            "webhook-signature": self.signers[due.endpoint].sign(due.event_id, sent_at, body),
        }
        status: int | None = None
        try:
            answer = await self.client.post(
                due.endpoint, content=body.encode(), headers=headers, timeout=endpoint.timeout_s
            )
        except httpx.TimeoutException:
            error = f"no answer within {endpoint.timeout_s:g} s"
        except httpx.HTTPError as e:
            error = f"{type(e).__name__}: {e}"[:ERROR_CHARS] or type(e).__name__
        else:
            status = answer.status_code
            if answer.is_success:
                await self._settle(due, status, None, endpoint, delivered=True)
                return
            error = f"answered {status}: {answer.text[:ERROR_CHARS]}"
        await self._settle(due, status, error, endpoint)

    async def _settle(
        self,
        due: Due,
        status: int | None,
        error: str | None,
        endpoint: WebhookTable | None,
        *,
        delivered: bool = False,
    ) -> None:
        now = self.clock.now()
        retry_at = None
        if not delivered and endpoint is not None:
            retry_at = events.next_attempt(endpoint.retry, due.attempts, due.first_at, now)
        outcome = "delivered" if delivered else "retried" if retry_at else "failed"
        metrics.WEBHOOK_DELIVERIES.labels(outcome).inc()
        if outcome == "failed":
            log.warning(
                "webhook %s to %s failed after %d attempts: %s",
                due.event_id,
                due.endpoint,
                due.attempts,
                error,
            )
        await self.store.settle(
            due, now, status=status, error=error, retry_at=retry_at, delivered=delivered
        )


def not_needed(n: Needs) -> str | None:
    return None if n.settings.webhooks else "no [[webhooks]] configured"


def runners(n: Needs) -> list[Runner]:
    deliverer = Deliverer(n.settings.webhooks, n.store, n.clock)
    return [Runner("webhooks", deliverer.step, idle_sleep_s=PERIOD_S, full=BATCH)]
