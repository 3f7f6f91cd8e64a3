"""The relay's half of the JetStream log: committed outbox rows into the stream.

Rows are claimed from one ``Outbox`` (one store database), published each with a
``Nats-Msg-Id`` of its database, its row and its content (``events.message_id``), and acked
in the outbox only once the stream acked every publish. A crash in between publishes them
again, and the stream's duplicate window drops what it stored already.

The relay is the one reader of its database's outbox while it holds that database's lease
(``log/nats/lease.py``), so it claims rows whatever claims they carry: a claim left by a holder
that died must not hide a player's earlier row while their later one is published. It
starts no publish after its stop, the end of its lease less a publish's timeout (at most
a third of a lease); what it had not published by then goes back to the outbox for the next
holder. The lease is renewed as the step goes, before each wave (``keep``), so a step that
outlasts a third of a lease (a slow link) goes on under it rather than stopping after a
wave and claiming the same rows again.

A player's rows are published one after another: the first of every player at once, then
every second, and so on, each wave awaited; a player's chain stops at its first failure and
the rest of its rows go back to the outbox at once. So the stream never holds a player's
later change before an earlier one, whatever fails.

Reward and moderation events (``domain/events.py``) go the same way, on subjects of their
own, ``<stream>.events.<type>`` (``<stream>.events.tournament.ended``): each ready event the
database has not marked published, its body the webhook body (``schemas/webhook-event.v1
.json``) and its ``Nats-Msg-Id`` the event's id, then marked published once the stream
acked it. A crash in between publishes it again: the duplicate window drops it, and past
that window a subscriber dedupes on the id, as a webhook receiver does. Events have no
order to keep: they are published at once, each on its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from nats.js import JetStreamContext

from podium.domain import events
from podium.domain.marks import is_mark_message
from podium.domain.models import Message
from podium.log.events import encode, message_id, partition_of
from podium.log.nats.errors import translated
from podium.ports import Clock, Event, EventStream, Outbox


class Publisher:
    def __init__(
        self, js: JetStreamContext, stream: str, partitions: int, timeout: float, clock: Clock
    ) -> None:
        self._js = js
        self._stream = stream
        self._partitions = partitions
        self._timeout = timeout  # of one publish
        self._clock = clock  # the store's time, of the outbox's claims

    async def relay(
        self,
        outbox: Outbox,
        source: str,
        limit: int,
        lease_s: float,
        keep: Callable[[], Awaitable[float]],
    ) -> int:
        """Move up to ``limit`` rows of ``outbox`` (the database named ``source``) into the
        stream, publishing nothing after the stop ``keep`` says (``time.monotonic()``; it
        renews the lease when due, and is asked before each wave); how many moved."""
        if time.monotonic() >= await keep():
            return 0
        # Only holders of this lease claim rows of this outbox, one step at a time, and
        # each claim below ends a lease after it was made: claiming as of a lease from now,
        # with no lease added, no row is hidden from this holder or the next, whoever made
        # the last claim and however that step ended. The clock is read here, at the claim,
        # not when the step began: a claim made after another's must see its rows.
        claimed_at = self._clock.now()
        rows = await outbox.claim_changes(limit, 0.0, claimed_at + lease_s)
        if not rows:
            return 0
        # Board marks (domain/marks.py) only after every other row of the claim is stored,
        # and only if every one was: published in the same wave as a change, a mark could
        # be stored ahead of it in their partition, and a row given back is published later.
        marks = [m for m in rows if is_mark_message(m)]
        chains: dict[str, list[Message]] = {}
        for m in rows:
            if not is_mark_message(m):
                chains.setdefault(m.player_id, []).append(m)
        sent: list[int] = []
        unsent: list[int] = []
        error: BaseException | None = None
        live = list(chains.values())
        wave = 0
        while live:
            if time.monotonic() >= await keep():  # the lease may end before these are stored
                unsent += [row_of(m) for chain in live for m in chain[wave:]]
                break
            heads = [chain[wave] for chain in live]
            published = (self._publish(m, source) for m in heads)
            outcomes = await asyncio.gather(*published, return_exceptions=True)
            still: list[list[Message]] = []
            for chain, outcome in zip(live, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    # This player's chain stops here: a later change must not be stored
                    # before this one is.
                    error = error or outcome
                    unsent += [row_of(m) for m in chain[wave:]]
                    continue
                sent.append(row_of(chain[wave]))
                if len(chain) > wave + 1:
                    still.append(chain)
            live, wave = still, wave + 1
        if marks and (unsent or error is not None or time.monotonic() >= await keep()):
            unsent += [row_of(m) for m in marks]
        elif marks:
            outcomes = await asyncio.gather(
                *(self._publish(m, source) for m in marks), return_exceptions=True
            )
            for m, outcome in zip(marks, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    error = error or outcome
                    unsent.append(row_of(m))
                else:
                    sent.append(row_of(m))
        if sent:
            await outbox.ack_changes(sent)
        if unsent:
            await outbox.lease_changes(unsent, claimed_at)  # retried at once, not after a lease
        if error is not None:
            raise error
        return len(sent)

    async def publish_events(self, store: EventStream, limit: int, stop_by: float) -> int:
        """Up to ``limit`` of the database's events not on the stream yet, published and
        marked so, none published after ``stop_by``; how many."""
        if time.monotonic() >= stop_by:
            return 0
        found = await store.unpublished_events(limit)
        if not found:
            return 0
        outcomes = await asyncio.gather(
            *(self._publish_event(e) for e in found), return_exceptions=True
        )
        done = [e.event_id for e, o in zip(found, outcomes, strict=True) if o is None]
        await store.mark_published(done)
        for o in outcomes:
            if isinstance(o, BaseException):
                raise o
        return len(done)

    async def _publish_event(self, e: Event) -> None:
        subject = event_subject(self._stream, e.event_type)
        body = events.body(e.event_type, e.at, e.data).encode()
        with translated(f"publish to {subject}"):
            await self._js.publish(
                subject,
                body,
                timeout=self._timeout,
                stream=self._stream,
                headers={"Nats-Msg-Id": e.event_id},
            )

    async def _publish(self, m: Message, source: str) -> None:
        row = row_of(m)
        payload = encode(m, source, row)
        headers = {"Nats-Msg-Id": message_id(payload, source, row)}
        subject = f"{self._stream}.changes.{partition_of(m.player_id, self._partitions)}"
        with translated(f"publish to {subject}"):
            await self._js.publish(
                subject, payload, timeout=self._timeout, stream=self._stream, headers=headers
            )


def event_subject(stream: str, event_type: str) -> str:
    """Where an event of this type goes: ``<stream>.events.window.frozen``, and so on."""
    return f"{stream}.events.{event_type}"


def row_of(m: Message) -> int:
    """The outbox row a claimed change was read from."""
    if not isinstance(m.handle, int):
        raise TypeError(f"not an outbox row: handle {m.handle!r}")
    return m.handle
