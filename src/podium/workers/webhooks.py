"""The webhooks role: reward and moderation events (``domain/events.py``), written by the
store in the transaction that made them, POSTed to every ``[[webhooks]]`` endpoint that
subscribes to them, at least once.

One runner turns new events into deliveries (one per event and endpoint), and fails those
to endpoints no longer configured. Every endpoint has a runner of its own, with a client
(and its connections) of its own: it claims that endpoint's deliveries that are due (held
for an attempt's deadline and a margin, so that a process that dies mid-attempt leaves them
to another after that), POSTs each, signed as Standard Webhooks sign (``webhook-id`` the
event's id, the same on every retry, which receivers dedupe on; ``webhook-timestamp``;
``webhook-signature``, an HMAC-SHA256 of the three), and settles it: a 2xx is delivered;
anything else, no answer within ``timeout_s`` or none at all is tried again after a growing
wait with jitter, until the endpoint's ``retry_for_s`` is past, then failed.

``timeout_s`` is a deadline for the whole attempt (connecting, sending, the answer), not a
wait per read, so an answer trickled a byte at a time ends with it; and of an answer only
its status and the first ``ANSWER_BYTES`` of a failure's body are read, then the connection
is closed, whatever the endpoint sends. Nothing here touches the record path, and no
runner waits on another's endpoint: a slow or dead endpoint only delays its own events.
Several processes may run the role: the claims never overlap (``ports/webhooks.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial

import httpx
from standardwebhooks import Webhook

from podium import metrics
from podium.config.webhooks import WebhookTable
from podium.domain import events
from podium.ports import Clock, Due, WebhookEvents
from podium.util.aio import gather_all
from podium.util.redact import redact_text, redact_url
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.webhooks")

BATCH = 50  # events fanned out by one step
AT_ONCE = 10  # attempts at once to one endpoint (and connections to it)
PERIOD_S = 0.5  # the pause after a step that found less than a batch
LEASE_MARGIN_S = 30.0  # past an attempt's deadline, before a claim may be taken again
ERROR_CHARS = 300  # of an answer's body or an error, kept with the delivery
ANSWER_BYTES = 4096  # of a failed answer's body, read (enough for ERROR_CHARS); the rest never
GONE = "the endpoint is no longer configured"


class _HiddenUrls(logging.Filter):
    """httpx logs every request's URL at INFO (``HTTP Request: POST https://...``), an
    endpoint's password and token with it: shown as ``redact_url`` shows them instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_url(str(a)) if isinstance(a, httpx.URL) else a for a in record.args
            )
        return True


def _hide_urls_in_httpx_log() -> None:
    httpx_log = logging.getLogger("httpx")
    if not any(isinstance(f, _HiddenUrls) for f in httpx_log.filters):
        httpx_log.addFilter(_HiddenUrls())


class Deliverer:
    def __init__(
        self, webhooks: Sequence[WebhookTable], store: WebhookEvents, clock: Clock
    ) -> None:
        _hide_urls_in_httpx_log()
        self.store = store
        self.clock = clock
        self.endpoints: Mapping[str, WebhookTable] = {w.url: w for w in webhooks}
        self.signers = {w.url: Webhook(w.secret) for w in webhooks}
        # A client, so a pool of connections, per endpoint: a slow one never takes the
        # connections another's attempts wait for. Redirects are not followed: a signed body
        # goes only where it was configured to. httpx's own timeout is per read or write;
        # the attempt's deadline is ``attempt``'s.
        self.clients = {
            w.url: httpx.AsyncClient(
                follow_redirects=False,
                timeout=w.timeout_s,
                limits=httpx.Limits(max_connections=AT_ONCE, max_keepalive_connections=AT_ONCE),
            )
            for w in webhooks
        }
        routes: dict[str, list[str]] = {}
        for w in webhooks:
            for name in w.events:
                routes.setdefault(name, []).append(w.url)
        self.routes = routes
        # An event older than every endpoint's retry horizon would only be failed: none is
        # made a delivery (a webhook added today is not sent last month's events).
        self.horizon_s = max((w.retry_for_s for w in webhooks), default=0.0)

    async def fan_out(self) -> int:
        """New events into deliveries, and the deliveries to endpoints taken out of the
        settings since failed (nowhere to send them; the pruner may then drop their events)."""
        now = self.clock.now()
        fanned = await self.store.fan_out(self.routes, now - self.horizon_s, now, BATCH)
        gone = await self.store.claim_deliveries(
            now, now + LEASE_MARGIN_S, BATCH, other_than=list(self.endpoints)
        )
        await gather_all(self._settle(d, None, GONE, None) for d in gone)
        return max(fanned, len(gone))

    async def deliver(self, url: str) -> int:
        """One endpoint's due deliveries, up to ``AT_ONCE`` of them at once."""
        endpoint = self.endpoints[url]
        now = self.clock.now()
        lease_until = now + endpoint.timeout_s + LEASE_MARGIN_S
        due = await self.store.claim_deliveries(now, lease_until, AT_ONCE, endpoint=url)
        await gather_all(self.attempt(d) for d in due)
        return len(due)

    async def attempt(self, due: Due) -> None:
        """One POST of one delivery, within the endpoint's deadline, and its outcome
        settled in the store."""
        endpoint = self.endpoints[due.endpoint]  # claimed by its endpoint's runner
        body = events.body(due.event_type, due.at, due.data)
        sent_at = datetime.fromtimestamp(self.clock.now(), UTC)
        headers = {
            "content-type": "application/json",
            "user-agent": "podium-webhooks",
            # The body is read raw (a bounded prefix): a compressed one would be unreadable,
            # and inflating it is unbounded.
            "accept-encoding": "identity",
            "webhook-id": due.event_id,
            "webhook-timestamp": str(int(sent_at.timestamp())),
            "webhook-signature": self.signers[due.endpoint].sign(due.event_id, sent_at, body),
        }
        client = self.clients[due.endpoint]
        status: int | None = None
        head = bytearray()
        error = f"no answer within {endpoint.timeout_s:g} s"
        try:
            async with asyncio.timeout(endpoint.timeout_s):
                async with client.stream(
                    "POST", due.endpoint, content=body.encode(), headers=headers
                ) as answer:
                    status = answer.status_code
                    if not answer.is_success:  # why, for the admin: its first bytes only
                        async for chunk in answer.aiter_raw():
                            head += chunk
                            if len(head) >= ANSWER_BYTES:
                                break
                # Leaving the stream with the body unread closes the connection: the rest
                # of the answer is never read.
        except (TimeoutError, httpx.TimeoutException):
            pass  # past the deadline: the status, if it came, and what came of the body
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            if status is None:
                error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if status is not None and 200 <= status < 300:
            await self._settle(due, status, None, endpoint, delivered=True)
            return
        if status is not None:
            text = bytes(head[:ANSWER_BYTES]).decode("utf-8", "replace")
            error = f"answered {status}: {text}"
        # An endpoint's password or token never goes into what the admin sees: the error or
        # the answer's body may name the URL.
        await self._settle(due, status, redact_text(error, due.endpoint)[:ERROR_CHARS], endpoint)

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
                redact_url(due.endpoint),
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
    fan_out = Runner("webhooks", deliverer.fan_out, idle_sleep_s=PERIOD_S, full=BATCH)
    deliver = [
        Runner(
            "webhook-delivery", partial(deliverer.deliver, url), idle_sleep_s=PERIOD_S, full=AT_ONCE
        )
        for url in deliverer.endpoints
    ]
    return [fan_out, *deliver]
