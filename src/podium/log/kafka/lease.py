"""Relay leases on Kafka: which process relays which store database.

One store database's outbox is relayed by one process at a time, so that a player's changes
reach the topic in commit order. The leases are kept where the updaters' state is: in a
consumer group's committed-offset metadata, the group ``<group>.relays`` on partition 0 of
the events topic (its offset means nothing): ``{"h": {source: [holder, until_ms]}, "m":
{holder: until_ms}}``. Each relay process renews its own leases every third of a lease and
takes the databases whose lease ran out (or that nobody held) every quarter of a lease; it
relays a database only after it read back its own name on it, and stops at its lease's end,
measured from before the write that renewed it (``time.monotonic()``).

**Shared out.** Each relay process also keeps itself in ``m`` while it runs, and holds at
most its share of the databases: as many as there are, divided by the live relay
processes, rounded up. One that holds more (another relay started) gives the extra back,
and the newcomer takes them, as on NATS (``log/nats/lease.py``).

Kafka has no compare-and-set on a commit: two processes that take a free database at the
same instant can both believe they hold it until the next renewal reads the winner back,
and so can a relay whose lease ran out in a long step and the relay that took it next (the
first writes it back before it reads the other's name). In that window both claim the
database's rows. Each claim takes every row claimed before it (``relay.py``), so the later
one publishes a player's rows in commit order, every row of the earlier claim with them:
what lands out of order is only a copy, whose message id was seen before, which a subscriber
drops and the updaters' writes (absolute totals, ``GT``, versions) make harmless. A relay
also renews its leases before each database of a step, when due, so that a step over
several databases does not outlast them.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from podium import metrics
from podium.log.kafka.errors import translated

if TYPE_CHECKING:
    from podium.log.kafka.log import KafkaLog

log = logging.getLogger("podium.log")

RENEW_AFTER = 1 / 3  # of a lease gone by
TRY_EVERY = 1 / 4  # of a lease: how often a process tries to take databases nobody holds


class RelayLeases:
    def __init__(self, log: KafkaLog, holder: str) -> None:
        self._log = log
        self.holder = holder
        self._consumer: Consumer | None = None
        self._held: dict[str, float] = {}  # source -> deadline, time.monotonic()
        self._renew_at = 0.0
        self._next_try = 0.0

    @property
    def group(self) -> str:
        return f"{self._log.group}.relays"

    def held(self) -> set[str]:
        now = time.monotonic()
        return {s for s, d in self._held.items() if d > now}

    async def hold(self, sources: Sequence[str]) -> dict[str, float]:
        """Each database this process may relay now, with its deadline."""
        now = time.monotonic()
        wanted = set(sources)
        missing = wanted - self.held()
        if now >= self._renew_at or (missing and now >= self._next_try) or set(self._held) - wanted:
            await self._log.run(self._hold, sorted(wanted))
        now = time.monotonic()
        return {s: d for s, d in self._held.items() if d > now and s in wanted}

    def _slot(self) -> TopicPartition:
        return TopicPartition(self._log.events_topic, 0)

    def _client(self) -> Consumer:
        if self._consumer is None:
            with translated("make the relay leases' client"):
                self._consumer = Consumer(
                    self._log.config(**{"group.id": self.group, "enable.auto.commit": False})
                )
        return self._consumer

    def read(self, c: Consumer) -> tuple[dict[str, list[Any]], dict[str, int]]:
        """The leases (source -> [holder, until_ms]) and the relays (holder -> until_ms)."""
        from podium.log.kafka.topics import REQUEST_TIMEOUT_S

        with translated(f"read the relay leases ({self.group})"):
            [tp] = c.committed([self._slot()], timeout=REQUEST_TIMEOUT_S)
        if tp.error is not None:
            raise KafkaException(tp.error)
        try:
            raw = json.loads(tp.metadata or "{}")
            leases = {str(k): list(v) for k, v in raw.get("h", {}).items()}
            members = {str(k): int(v) for k, v in raw.get("m", {}).items()}
            return leases, members
        except (ValueError, TypeError, AttributeError):
            return {}, {}

    def _commit(self, c: Consumer, leases: dict[str, list[Any]], members: dict[str, int]) -> None:
        text = json.dumps({"h": leases, "m": members}, separators=(",", ":"))
        slot = TopicPartition(self._log.events_topic, 0, 0, text)
        with translated(f"write the relay leases ({self.group})"):
            c.commit(offsets=[slot], asynchronous=False)

    def _hold(self, sources: list[str]) -> None:
        c = self._client()
        lease_ms = int(self._log.lease_s * 1000)
        sent = time.monotonic()
        now_ms = int(time.time() * 1000)
        leases, members = self.read(c)
        members = {m: u for m, u in members.items() if u > now_ms}
        members[self.holder] = now_ms + lease_ms
        share = -(-len(sources) // len(members))
        for s in [s for s, v in leases.items() if v[1] <= now_ms or s not in sources]:
            if leases[s][0] == self.holder or leases[s][1] <= now_ms:
                del leases[s]  # ran out, or no longer a database
        held = sorted(s for s, v in leases.items() if v[0] == self.holder)
        for s in held[share:]:
            del leases[s]
            log.info("relay: gave store database %s to another relay (%d relays)", s, len(members))
        for s in held[:share]:
            leases[s] = [self.holder, now_ms + lease_ms]
        free = [s for s in sources if s not in leases]
        random.shuffle(free)
        for s in free[: max(0, share - len(held))]:
            leases[s] = [self.holder, now_ms + lease_ms]
        self._commit(c, leases, members)
        back, _ = self.read(c)  # the last writer's, if another wrote at the same time
        mine = {s for s in sources if (back.get(s) or [""])[0] == self.holder}
        for s in mine - set(self._held):
            log.info("relay: now relaying store database %s (%s)", s, self.holder)
        for s in set(self._held) - mine:
            metrics.LEASE_LOST.labels("relay").inc()
            log.warning("relay: lost the lease of store database %s", s)
        self._held = {s: sent + self._log.lease_s for s in mine}
        self._renew_at = sent + self._log.lease_s * RENEW_AFTER
        self._next_try = sent + self._log.lease_s * TRY_EVERY

    async def release(self) -> None:
        """Give back every lease at once (a clean stop): a standby need not wait them out."""
        if self._consumer is None:
            self._held = {}
            return

        def give_back() -> None:
            c = self._client()
            leases, members = self.read(c)
            for s in [s for s, v in leases.items() if v[0] == self.holder]:
                del leases[s]
            members.pop(self.holder, None)
            self._commit(c, leases, members)
            c.close()

        self._held = {}
        try:
            await self._log.run(give_back)
        except Exception as e:  # they run out by themselves
            log.warning("relay: giving back the leases: %s", e)
        self._consumer = None
