"""One JetStream pull consumer, asked for messages one request at a time.

nats-py's own ``fetch`` waits (a lingering request) when there is nothing to take; the log's
``fetch`` must answer at once, so each request here is ``no_wait``: the server delivers what
it has, up to the batch, then ends the request with a status (404 nothing at all, 408 fewer
than asked). Messages are delivered with their own subject, not the inbox's, so each
request has an inbox of its own, dropped when it ends: what reaches it late (a consumer that
changed leader, a request that went unanswered) is never taken for the next request's, and
its leases run out. On a cluster a new consumer has no leader for a moment: ``ensure``
waits for one.
"""

from __future__ import annotations

import asyncio
import json
import logging

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from podium.errors import InternalError, LogUnavailable
from podium.log.nats.errors import PULL_DONE, PULL_NOT_NOW, translated

log = logging.getLogger("podium.log")

LEADER_WAIT_S = 5.0  # how long a new consumer may take to elect its first leader


class Pull:
    """A pull consumer by name, made (or updated) from ``config`` before its first use."""

    def __init__(
        self, nc: Client, js: JetStreamContext, stream: str, config: ConsumerConfig, timeout: float
    ) -> None:
        self._nc = nc
        self._js = js
        self._stream = stream
        self._config = config
        self._timeout = timeout
        self.name = config.durable_name or config.name or ""
        self._lock = asyncio.Lock()
        self._sub: Subscription | None = None
        self._ready = False

    async def ensure(self) -> None:
        """Make the consumer, or bring its settings (``ack_wait``) up to date; a durable
        one already there keeps its place in the stream."""
        if self._ready:
            return
        with translated(f"create consumer {self.name or '(ephemeral)'}"):
            info = await self._js.add_consumer(self._stream, self._config)
            self.name = info.name
            # On a cluster the consumer is made before it has a leader, and a request sent
            # to it meanwhile goes unanswered: wait for one, a little.
            for _ in range(int(LEADER_WAIT_S / 0.05)):
                if info.cluster is None or info.cluster.leader:
                    break
                await asyncio.sleep(0.05)
                info = await self._js.consumer_info(self._stream, self.name)
        self._ready = True

    async def next(self, batch: int) -> list[Msg]:
        """Up to ``batch`` messages the consumer can deliver now, leased to this caller. A
        request lost to a change of leader is asked once more, of the new one."""
        try:
            return await self._next(batch)
        except LogUnavailable as e:
            log.info("%s; asking again", e)
            return await self._next(batch)

    async def _next(self, batch: int) -> list[Msg]:
        await self.ensure()
        async with self._lock:
            with translated(f"fetch from {self.name}"):
                # An inbox per request: a message that reached the last one after its
                # request ended (a late answer from a consumer that changed leader) must
                # not be taken for this request's, whose lease it does not share.
                await self._drop_inbox()
                sub = self._sub = await self._nc.subscribe(self._nc.new_inbox())
                request = json.dumps({"batch": batch, "no_wait": True}).encode()
                subject = f"$JS.API.CONSUMER.MSG.NEXT.{self._stream}.{self.name}"
                await self._nc.publish(subject, request, reply=sub.subject)
                return await self._take(sub, batch)

    async def _take(self, sub: Subscription, batch: int) -> list[Msg]:
        got: list[Msg] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while len(got) < batch:
            try:
                msg = await sub.next_msg(timeout=max(0.001, deadline - loop.time()))
            except nats.errors.TimeoutError:
                # No end to the request: the consumer is gone, or the server is. Start over
                # with another inbox, and make sure of the consumer first.
                await self._drop()
                if got:
                    return got  # leased to us already: apply them
                what = f"NATS JetStream: no answer from consumer {self.name}"
                raise LogUnavailable(what) from None
            status = msg.headers.get("Status") if msg.headers else None
            if status is None:
                got.append(msg)
            elif status in PULL_DONE:  # the request ended
                break
            elif status == "100":
                continue  # a heartbeat
            elif status in PULL_NOT_NOW:
                await self._drop()
                if got:
                    return got
                desc = msg.headers.get("Description", "") if msg.headers else ""
                raise LogUnavailable(f"NATS JetStream: consumer {self.name}: {status} {desc}")
            else:
                raise InternalError(f"NATS JetStream: consumer {self.name} answered {status}")
        return got

    async def _drop(self) -> None:
        self._ready = False
        await self._drop_inbox()

    async def _drop_inbox(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except nats.errors.Error as e:  # the connection is down: the inbox goes with it
                log.debug("unsubscribe %s: %s", sub.subject, e)

    async def delete(self) -> None:
        """Delete the consumer, if it was ever made (an ephemeral one has no name before)."""
        await self._drop()
        if self.name:
            with translated(f"delete consumer {self.name}"):
                await self._js.delete_consumer(self._stream, self.name)
