"""The store's outbox, read directly as the change log (the embedded default).

There is nothing to relay: the outbox rows are the log. Updaters claim rows under a lease
(``FOR UPDATE SKIP LOCKED`` on Postgres, ``BEGIN IMMEDIATE`` on SQLite) and delete them once
applied, so several updaters can share the work and a crashed one's rows come back when its
lease runs out. Rows are claimed one by one, never past a high-water mark: sequence ids are
handed out before commit, so a lower id can commit after a higher one has been read. A
message's handle is its row id; in progress and nak set the row's lease to end later, or now.

Per-player order: the store writes one player's rows one transaction at a time (its lock on
the player), so their ids follow their commit order, and a claim takes the lowest free ids
first: a player's row is never claimed while an earlier one of theirs is free to claim.

The outbox is one partition. Splitting it here, by a hash of the player over claimed rows,
would not stay correct: a consumer that claims a row of another partition, only to give it
back, hides it for that moment from the consumer whose partition it is, which may then
claim the same player's next row first, and deliver it before the earlier one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

from podium.domain.models import Message
from podium.errors import Unavailable
from podium.ports import Clock, Outbox

log = logging.getLogger("podium.log")

REQUEUE_BATCH = 500  # players requeued in one transaction by a replay


class OutboxLog:
    def __init__(self, store: Outbox, clock: Clock, lease_s: float = 30.0) -> None:
        self._store = store
        self._clock = clock
        self._lease_s = lease_s
        # What this consumer holds: row id -> when its lease ends, as far as it knows (to
        # give back on close only the rows that are still its own).
        self._held: dict[int, float] = {}

    @property
    def partitions(self) -> int:
        return 1

    async def relay(self, limit: int) -> int:
        return 0  # the outbox is the log

    async def ping(self) -> None:
        return None  # the outbox is the store, which readiness asks by its own name

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        if partition not in (None, 0):
            raise ValueError(f"partition {partition!r}: the outbox log has one partition, 0")
        now = self._clock.now()
        messages = await self._store.claim_changes(limit, self._lease_s, now)
        # Rows whose lease ran out are not this consumer's any more: forget them here, so
        # that what is remembered stays about one batch, whatever was left unsettled.
        self._held = {i: until for i, until in self._held.items() if until > now}
        self._held.update((_row(m), now + self._lease_s) for m in messages)
        return messages

    async def ack(self, messages: Sequence[Message]) -> None:
        ids = _rows(messages)
        await self._store.ack_changes(ids)
        self._forget(ids)

    async def in_progress(self, messages: Sequence[Message]) -> None:
        ids = _rows(messages)
        until = self._clock.now() + self._lease_s
        await self._store.lease_changes(ids, until)
        self._held.update((i, until) for i in ids)

    async def nak(self, messages: Sequence[Message]) -> None:
        ids = _rows(messages)
        await self._store.lease_changes(ids, self._clock.now())
        self._forget(ids)

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        # Acked rows are deleted: a row is settled once no row at or below its id is left.
        return await self._store.acked_through(_rows(messages))

    async def replay(
        self, since: float, keep: Callable[[Message], bool] | None = None
    ) -> OutboxLog:
        # ``keep`` is not used: the rows re-queued are the outbox's own, which every updater
        # applies (the replay's consumer is one more of them), so none can be left out.
        # The outbox keeps no history: what was committed since then is re-read from the
        # record instead, as fresh rows of every such player's current totals, each under
        # the player's lock (requeue_player), so the order per player holds.
        # A batch of players a transaction: one transaction each made a replay of the
        # seconds after a failover cost a round trip per player (20,000 of them after a
        # busy minute: longer than the failover it mends, which left the last writes off
        # the board the whole time), while small batches keep each one's locks brief.
        players = await self._store.players_since(since)
        now = self._clock.now()
        rows = 0
        for i in range(0, len(players), REQUEUE_BATCH):
            rows += await self._store.requeue_players(players[i : i + REQUEUE_BATCH], now)
        log.info("replay since %.0f: %d rows for %d players", since, rows, len(players))
        return OutboxLog(self._store, self._clock, self._lease_s)

    async def close(self) -> None:
        # Give back at once what this consumer still holds (a stopping updater's batch),
        # rather than keep it from the others until its lease runs out. Rows whose lease
        # ran out may be someone else's by now: those are left alone.
        now = self._clock.now()
        mine = [i for i, until in self._held.items() if until > now]
        self._held.clear()
        if mine:
            with contextlib.suppress(Unavailable):  # then the leases run out by themselves
                await self._store.lease_changes(mine, now)
                log.info("gave back %d outbox rows still held at close", len(mine))

    def _forget(self, ids: Sequence[int]) -> None:
        for i in ids:
            self._held.pop(i, None)


def _row(message: Message) -> int:
    """The outbox row id a message was delivered as."""
    if not isinstance(message.handle, int):
        raise TypeError(f"not a message of the outbox log: handle {message.handle!r}")
    return message.handle


def _rows(messages: Sequence[Message]) -> list[int]:
    return [_row(m) for m in messages]
