"""The change log port: between the store's outbox and the board updaters.

The contract (held by ``tests/contract/test_log.py`` against every backend):

**At least once.** Every committed change is delivered until someone acks it. A fetched
message is leased to the consumer that fetched it: nobody else gets it while the lease
holds. If the lease runs out (the consumer crashed, or is too slow) it is delivered again,
to whoever fetches next. So a message may arrive more than once, also after a newer one of
the same player: consumers must apply messages idempotently, which absolute totals and the
index's ``GT``/versioned writes make true (invariant 3 of docs/architecture.md).

**Settling.** Each message is settled through the log that delivered it, by its ``handle``:

- ``ack``: done; never delivered again, even after its lease (a log may send acks without
  waiting for each to be confirmed: one lost in a crash of the log's server before it was
  applied is delivered again after its lease, which at least once allows).
- ``in_progress``: not done yet, still mine; the lease starts again, so a consumer that keeps
  a batch it could not apply yet (an outage) keeps it from everyone else while it retries.
- ``nak``: not done, and not mine any more; delivered again at once, to anyone.

Settling a message whose lease already ran out is best effort: it may have been delivered
again to someone else meanwhile (an ack still removes it; an in_progress or a nak may
change the other holder's lease; either is harmless under at-least-once).

**Order, per player.** Within what one fetch returns, a player's messages come in commit
order (the store makes one player's changes one at a time, the re-send of their totals
after an unban included, so that order is also the order of their values). A
message is delivered for the first time only once every earlier message of its
player has been delivered at least once (or comes before it in the same fetch). Nothing
more: a redelivery (after a lease ran out, or a nak) can bring an older message after a
newer one; two consumers can hold messages of one player at the same time; and a consumer
that fetches again before settling its last fetch can be given later messages of players
it still holds. A consumer that settles every fetch before the next, within its lease and
without nak, thus sees each player's messages in commit order. The board updater does
(it retries a batch it holds before it fetches more), though it does not rely on it.

**Partitions.** A log is split by player into ``partitions`` (numbered from 0): every
message of one player is in the same partition, for good. ``fetch(limit, partition=p)``
delivers messages of partition ``p`` only; ``partition=None`` delivers from all of them.
A partition out of range is a ``ValueError``. The outbox is one partition; JetStream has one
subject (and one durable consumer) per partition, so that each updater can own some of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from podium.domain.models import Message
from podium.ports.store import Outbox
from podium.ports.webhooks import EventStream


class Relayed(Outbox, EventStream, Protocol):
    """What a relay reads of one store database: its outbox rows (the changes), and its
    reward and moderation events, which go on the stream too when NATS is the log."""


class ChangeLog(Protocol):
    """Between the store's outbox and the board updaters. Delivery is at least once."""

    @property
    def partitions(self) -> int:
        """How many partitions the log is split into by player (at least 1)."""
        ...

    async def relay(self, limit: int) -> int:
        """Move up to ``limit`` committed outbox rows into the log; returns how many moved.
        A log that is the outbox itself has nothing to move and returns 0."""
        ...

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        """Up to ``limit`` messages that nobody holds, each leased to this consumer and
        carrying its ``handle``; totals as ``Change``, profile changes as ``ProfileChange``.
        Only those of ``partition`` when one is given (``ValueError`` if out of range)."""
        ...

    async def ack(self, messages: Sequence[Message]) -> None:
        """Applied: these are never delivered again."""
        ...

    async def in_progress(self, messages: Sequence[Message]) -> None:
        """Still being worked on: start their leases again, so that nobody else gets them
        while this consumer retries."""
        ...

    async def nak(self, messages: Sequence[Message]) -> None:
        """Not applied, given back: deliver them again at once, to any consumer."""
        ...

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        """For each message this consumer acked, whether every message of its partition
        (and, on the outbox, of its store database) that came before it is acked too: the
        log's ack floor reached it. What lets an updater tell that a board mark's
        predecessors are on the board though other updaters fetched them
        (``domain/marks.py``); False where the log cannot tell (a replay)."""
        ...

    async def replay(
        self, since: float, keep: Callable[[Message], bool] | None = None
    ) -> ChangeLog:
        """Everything committed since ``since`` (epoch seconds), delivered once more: a log
        of its own, for one consumer to drain (fetch, apply, ack, until a fetch returns
        less than it asked for) and then close, beside this log's own deliveries. That
        consumer fetches only when it holds nothing: what it did not ack by then (a batch
        given up when it outlasted its lease) is delivered again, before the end (the
        outbox's rows, like any others, to whichever updater fetches once their lease ran
        out). Applying it again is harmless (absolute totals, ``GT`` and versioned
        writes); it mends a board whose index lost writes (a Redis failover). JetStream: a
        consumer from that time, up to what the stream held when the replay began; with
        ``keep``, what it refuses is settled unread and never delivered (the changes of
        index shards that did not change). Kafka: every partition read from that time up
        to its end when the replay began, outside the consumer group. The outbox: fresh
        rows with the current totals of every player with a result since then, in the
        outbox itself (so the returned log is one more consumer of it, and ``keep`` cannot
        narrow it: every updater applies those rows)."""
        ...

    async def ping(self) -> None:
        """Returns when the log answers (``GET /readyz``); raises ``Unavailable`` when it
        does not. A log that is the store's outbox answers when the store does, and says
        nothing of its own."""
        ...

    async def close(self) -> None:
        """Stop. Messages this consumer still holds are given back (as by ``nak``) where
        the log can; otherwise their leases run out."""
        ...
