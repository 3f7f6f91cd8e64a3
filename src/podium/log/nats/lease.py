"""Relay leases: which process relays which store database, held in JetStream itself.

One store database's outbox is relayed by one process at a time. Two relays of one database
could each claim some of one player's rows and publish them out of commit order; the stream
must hold a player's changes in the order they were committed. So every relay process
takes, in the key-value bucket ``<stream>-relays``, a lease on each database it relays: one
key per database (``relay.<source>``, ``events.source_of``), its value the holder's name.
Several relay processes can then run at once: each database has one active relay, and the
others stand by and take a database over when its holder stops renewing.

**Shared out.** Each relay process also keeps a key of its own (``member.<token>``) alive in
the bucket, and holds at most its share of the databases: as many as there are, divided by
the live relay processes, rounded up. One that holds more (another relay started) gives the
extra back, and the newcomer takes them; so the databases spread over the relays, and one
relay's publishing rate (measured in BENCHMARKS.md) is not the fleet's.

- **Taken** with ``create`` (written only if the key is absent), at most every quarter of a
  lease per process, so that standbys cost a request now and then, not one per loop.
- **Renewed** with ``update`` against the revision this holder wrote last: a holder whose
  key was taken over meanwhile learns it from the refused update, and drops the database.
- **Ended** by the bucket's age limit (its ``ttl``): a key that was not written for a lease
  is removed by the server, on the server's clock, and the next ``create`` wins it. A clean
  stop deletes its keys at once, so that a standby takes over within a quarter lease.

The holder stops relaying before the server can give its key away: its deadline is a lease
from the moment it *sent* its last successful write (the server stored it later, so its
age limit ends later), on this process's monotonic clock, and ``nats_relay`` starts no
publish less than a publish's timeout before it. Clocks that run at the same rate are all
this needs; no clock is compared with another.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import re
import secrets
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from podium import metrics
from podium.errors import LogUnavailable
from podium.log.nats.errors import translated

log = logging.getLogger("podium.log")

RENEW_AFTER = 1 / 3  # of a lease gone by: renewed while two thirds are still left
TRY_EVERY = 1 / 4  # of a lease: how often a process tries to take databases nobody holds


@dataclass(frozen=True, slots=True)
class _Held:
    revision: int  # of the key's last write by this holder
    renew_at: float  # time.monotonic()
    deadline: float  # time.monotonic(): the earliest the server may give the key away


class RelayLeases:
    def __init__(self, bucket: str, lease_s: float, replicas: int, holder: str = "") -> None:
        self._bucket = bucket
        self._lease_s = lease_s
        self.replicas = replicas  # the stream's, once connected
        self._token = secrets.token_hex(4)  # this start of this process
        # The name its leases carry: host and pid, for whoever looks at the bucket.
        self.holder = holder or f"{socket.gethostname()} pid {os.getpid()} {self._token}"
        self._kv: KeyValue | None = None
        self._ttl = lease_s  # the bucket's own, once known: it is what the server enforces
        self._held: dict[str, _Held] = {}
        self._next_try = 0.0  # time.monotonic()
        # One write of the leases' keys at a time: a database's rows and its events are
        # relayed side by side, and the share-out runs beside them; two updates of a key
        # from the same revision would lose it to each other, and a renewal must not put
        # back a lease given back meanwhile.
        self._writing = asyncio.Lock()
        self._sharing: asyncio.Task[None] | None = None  # a share-out beside a step
        # Over this relay's share, found by a share-out beside a step: given back by the
        # next ``hold``, between steps, never while a step may still publish its rows (a
        # publish in flight would land after the next holder's, out of commit order).
        self._over: set[str] = set()

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def ttl(self) -> float:
        """A lease, as the bucket keeps it (seconds)."""
        return self._ttl

    def held(self) -> set[str]:
        """The databases this process holds now."""
        now = time.monotonic()
        return {s for s, h in self._held.items() if h.deadline > now}

    def reset(self) -> None:
        """The connection was made again: the bucket is looked up again on next use. What
        is held stays held until its deadline (its key may still be this holder's)."""
        self._kv = None

    async def hold(self, js: JetStreamContext, sources: Sequence[str]) -> dict[str, float]:
        """Renew what this process holds, try to take what nobody holds; returns each
        database this process may relay now, with its deadline (``time.monotonic()``)."""
        kv = await self._bucket_of(js)
        wanted = set(sources)
        for gone in [s for s in self._held if s not in wanted]:  # no longer a database
            await self._give_back(kv, gone)
        over, self._over = self._over, set()
        for source in sorted(over & set(self._held)):
            await self._hand_over(kv, source)
        await self._renew_due(kv)
        now = time.monotonic()
        if now >= self._next_try and (self._sharing is None or self._sharing.done()):
            self._shared()
            self._next_try = now + self._ttl * TRY_EVERY
            beside = bool(self.held())
            sharing = asyncio.create_task(self._share_out(kv, list(sources), beside=beside))
            if beside:
                # Already relaying: the share-out (a write, then the bucket's keys: a few
                # round trips, seconds over a slow link, where it once outlasted the lease
                # it was to keep) runs beside the step instead of before it. What it would
                # give back waits for the next step's start; what it takes, for that step.
                self._sharing = sharing
            else:
                await sharing
        now = time.monotonic()
        return {s: h.deadline for s, h in self._held.items() if h.deadline > now}

    def _shared(self) -> None:
        """The last share-out run beside a step, if it ended, its failure said (the next
        one, a quarter lease on, tries again)."""
        done, self._sharing = self._sharing, None
        if done is not None and not done.cancelled() and (e := done.exception()) is not None:
            log.warning("relay: sharing out the store databases: %s", e)

    async def _renew_due(self, kv: KeyValue) -> None:
        async with self._writing:
            now = time.monotonic()
            due = [s for s, h in self._held.items() if h.renew_at <= now]
            await asyncio.gather(*(self._renew(kv, s) for s in due))

    async def keep(self, js: JetStreamContext, source: str) -> float:
        """The deadline of ``source``'s lease (``time.monotonic()``; 0 if this process no
        longer holds it), renewed first if it is due. A step that outlasts a third of a lease
        (a slow link: a claim and each wave of publishes a round trip or more) calls it as it
        goes, so that it keeps its lease as ``hold`` keeps it between steps, instead of
        stopping at its first deadline. A renewal that fails leaves the deadline as it was:
        the step stops by it."""
        async with self._writing:
            held = self._held.get(source)
            now = time.monotonic()
            if held is None or held.deadline <= now:
                return 0.0
            if held.renew_at <= now:
                with contextlib.suppress(LogUnavailable):
                    await self._renew(await self._bucket_of(js), source)
            kept = self._held.get(source)
            return kept.deadline if kept is not None else 0.0

    async def _share_out(
        self, kv: KeyValue, sources: Sequence[str], *, beside: bool = False
    ) -> None:
        """Keep this relay's key alive, then hold its share of the databases: give back
        what is over it, try to take free ones (in a random order, so that relays trying
        at once do not all ask for the same one first) until it is reached."""
        with translated("count the relays"):
            await kv.put(f"member.{self._token}", self.holder.encode())
            try:
                keys = await kv.keys()
            except nats.js.errors.NoKeysError:
                keys = []
        relays = max(1, sum(1 for k in keys if k.startswith("member.")))
        share = -(-len(sources) // relays)
        for source in sorted(self._held)[share:]:
            if beside:  # a step may be publishing its rows: the next hold gives it back
                self._over.add(source)
            else:
                await self._hand_over(kv, source)
        free = [s for s in sources if s not in self._held]
        random.shuffle(free)
        for source in free:
            if len(self._held) >= share:
                break
            await self._take(kv, source)

    async def release(self) -> None:
        """Give back every lease at once (a clean stop): a standby need not wait them out."""
        if self._sharing is not None:
            self._sharing.cancel()
            with contextlib.suppress(BaseException):
                await self._sharing
            self._sharing = None
        kv, held = self._kv, list(self._held)
        if kv is None:
            self._held.clear()
            return
        for source in held:
            await self._give_back(kv, source)
        try:
            await kv.delete(f"member.{self._token}")
        except (nats.errors.Error, TimeoutError) as e:  # it runs out by itself
            log.warning("relay: leaving the relays: %s", e)

    async def _bucket_of(self, js: JetStreamContext) -> KeyValue:
        if self._kv is not None:
            return self._kv
        config = KeyValueConfig(
            bucket=self._bucket,
            description="podium relay leases: one key per store database",
            history=1,
            ttl=self._lease_s,
            storage=StorageType.FILE,
            replicas=self.replicas,
        )
        with translated(f"open key-value bucket {self._bucket}"):
            try:
                kv = await js.create_key_value(config)
            except nats.js.errors.BadRequestError as e:
                if e.err_code != 10058:  # made by a fleet with another lease: use theirs
                    raise
                kv = await js.key_value(self._bucket)
            status = await kv.status()
        if status.ttl and status.ttl != self._lease_s:
            log.warning(
                "relay leases: bucket %s holds leases of %.1fs, not workers.lease_s %.1fs; "
                "using the bucket's",
                self._bucket,
                status.ttl,
                self._lease_s,
            )
        self._ttl = float(status.ttl or self._lease_s)
        self._kv = kv
        return kv

    def _kept(self, revision: int, sent: float) -> _Held:
        return _Held(revision, sent + self._ttl * RENEW_AFTER, sent + self._ttl)

    async def _take(self, kv: KeyValue, source: str) -> None:
        async with self._writing:
            sent = time.monotonic()
            with translated(f"take the relay lease of {source}"):
                try:
                    revision = await kv.create(_key(source), self.holder.encode())
                except nats.js.errors.KeyWrongLastSequenceError:
                    return  # held by another relay
            self._held[source] = self._kept(revision, sent)
        log.info("relay: now relaying store database %s (%s)", source, self.holder)

    async def _renew(self, kv: KeyValue, source: str) -> None:
        """Called under ``_writing``."""
        held = self._held.get(source)
        if held is None:
            return
        sent = time.monotonic()
        with translated(f"renew the relay lease of {source}"):
            try:
                revision = await kv.update(_key(source), self.holder.encode(), last=held.revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                # It ran out and someone took it (or it is gone): not ours any more.
                self._held.pop(source, None)
                metrics.LEASE_LOST.labels("relay").inc()
                log.warning("relay: lost the lease of store database %s", source)
                return
        self._held[source] = self._kept(revision, sent)

    async def _hand_over(self, kv: KeyValue, source: str) -> None:
        """Give back a database over this relay's share, for another relay to take."""
        await self._give_back(kv, source)
        log.info("relay: gave store database %s to another relay", source)

    async def _give_back(self, kv: KeyValue, source: str) -> None:
        async with self._writing:
            held = self._held.pop(source, None)
            if held is None or held.deadline <= time.monotonic():
                return
            try:
                await kv.delete(_key(source), last=held.revision)
            except (nats.errors.Error, TimeoutError) as e:  # it runs out by itself
                log.warning("relay: giving back the lease of %s: %s", source, e)


def _key(source: str) -> str:
    """The source's own name where a key may hold it (``events.source_of`` gives hex),
    otherwise a digest of it."""
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", source):
        return f"relay.{source}"
    return f"relay.{hashlib.blake2b(source.encode(), digest_size=8).hexdigest()}"
