"""NATS JetStream as the change log: a stream between the store's outbox and the updaters.

One stream, ``[log] stream``, on subjects ``<stream>.changes.<partition>``; a player's
partition is ``bucket_of(player) % partitions``, so one player's changes share one subject
and keep their order. The stream is made on first use if missing (file storage, limits
retention for ``[log] retention_s`` so that a replay by time can reach back, a duplicate
window of ``DUPLICATE_WINDOW_S``); one made with another partition count is refused.
Reward and moderation events go on it too, on ``<stream>.events.<type>``
(``log/nats/relay.py``), which no consumer of changes reads; a stream made before them is
given that subject at first use.

**Relay.** ``relay`` moves committed outbox rows into the stream, with message ids that
make a re-publish harmless (``log/nats/relay.py``), from every store database this process
holds the relay lease of (``log/nats/lease.py``): one relay at a time per database, so that a
player's changes reach the stream in commit order, and any number of relay processes, the
others standing by. The databases are asked for at every step (``databases``), so a
database that a bucket moved to is relayed too.

**Updaters.** One durable pull consumer per partition (``<stream>-changes-<p>``, so that a
restart resumes where the fleet was), explicit acks with ``ack_wait = [workers] lease_s``:
the lease is JetStream's own, so it runs on the server's clock. ``fetch(partition=p)`` pulls
from that partition's consumer; without a partition, from all of them at once, the limit
shared between those that have more. ``in_progress`` and ``nak`` are synchronous (the
server answers each ``+WPI`` and ``-NAK``), so that once they return the server knows. An
ack is sent without asking for an answer, a batch of them then flushed (the server has read
them when the flush returns): a request per message was 44% of an updater's time
(BENCHMARKS.md). An ack that is lost after all (a node lost before the consumer's leader
applied it) only lets its message be delivered again after its lease: at least once still.

On a cluster a consumer's leases live on its leader: a new leader (a node lost, or the
elections of a consumer just made) may deliver again at once what the old one had leased.
That is at least once still, and the updater's writes make it harmless.

**Replay.** ``replay(since)`` is a log of its own: an ephemeral consumer that starts at that
time, delivers what the stream held when it was made, and is deleted when closed
(``replay.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime

import nats
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from podium import metrics
from podium.domain.models import Message
from podium.errors import ConfigError, LogUnavailable
from podium.log.events import (
    EventError,
    OtherVersion,
    decode,
    partition_of,
)
from podium.log.nats.delivery import Delivery, delivery
from podium.log.nats.erasure import erase_messages, player_subjects
from podium.log.nats.errors import translated
from podium.log.nats.lease import RelayLeases
from podium.log.nats.pull import Pull
from podium.log.nats.relay import Publisher
from podium.log.nats.replay import NatsReplay
from podium.log.partitions import Turns, databases_of
from podium.ports import Clock, Relayed
from podium.util.aio import gather_all
from podium.util.redact import redact_url

log = logging.getLogger("podium.log")

DUPLICATE_WINDOW_S = 300.0  # longer than a relay's lease and restart, so re-publishes drop
MAX_ACK_PENDING = 20_000  # per partition: several updaters' batches held across an outage
CONNECT_TIMEOUT_S = 5.0  # the first connection, every server tried
REQUEST_TIMEOUT_S = 5.0  # a publish, an ack: longer than a cluster's election
PING_TIMEOUT_S = 1.0  # readiness asks often: a log that takes longer is not answering
PULL_TIMEOUT_S = 2.0  # a no_wait pull is answered at once: longer, and its leader is gone


class NatsLog:
    def __init__(
        self,
        servers: Sequence[str],
        stream: str,
        clock: Clock,
        *,
        partitions: int = 16,
        lease_s: float = 10.0,
        replicas: int = 0,
        retention_s: float = 86_400.0,
        outbox: Relayed | None = None,
        source: str = "",
        databases: Callable[[], Awaitable[Mapping[str, Relayed]]] | None = None,
        holder: str = "",
    ) -> None:
        """``databases`` gives the outbox of every store database by its source name
        (``events.source_of``); ``outbox`` and ``source`` name just one. Without either,
        the log is a consumer only. ``holder`` names this process in its relay leases."""
        self._servers = list(servers)
        self._stream = stream
        self._clock = clock
        self._partitions = partitions
        self._lease_s = lease_s
        self._replicas = replicas
        self._retention_s = retention_s
        self._databases = databases_of(databases, outbox, source)
        self._leases = RelayLeases(f"{stream}-relays", lease_s, replicas, holder)
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._connecting = asyncio.Lock()
        self._pulls: list[Pull] = []
        self._turns = Turns(partitions)
        self._held: dict[str, float] = {}  # reply subject -> lease end, of what this holds
        self._pinging: asyncio.Future[None] | None = None  # readiness's question, asked once

    @classmethod
    def from_url(cls, url: str, stream: str, clock: Clock, **kwargs: object) -> NatsLog:
        """``nats://host:4222[,host:4223...]``: every server of one cluster."""
        hosts = url.removeprefix("nats://").split(",")
        servers = [f"nats://{h.strip().rstrip('/')}" for h in hosts if h.strip()]
        return cls(servers, stream, clock, **kwargs)  # type: ignore[arg-type]

    @property
    def partitions(self) -> int:
        return self._partitions

    @property
    def stream(self) -> str:
        return self._stream

    def subject(self, partition: int) -> str:
        return f"{self._stream}.changes.{partition}"

    @property
    def events_subject(self) -> str:
        """Every event's subject: ``<stream>.events.<type>`` (``log/nats/relay.py``)."""
        return f"{self._stream}.events.>"

    # -- connection and stream ---------------------------------------------------------

    async def _ready(self) -> tuple[Client, JetStreamContext]:
        if self._nc is not None and self._js is not None and not self._nc.is_closed:
            return self._nc, self._js
        async with self._connecting:
            if self._nc is None or self._js is None or self._nc.is_closed:
                nc = await self._connect()
                js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
                try:
                    await self._ensure_stream(nc, js)
                except BaseException:
                    await nc.close()
                    raise
                self._nc, self._js = nc, js
                self._leases.reset()
                self._pulls = [self._pull(nc, js, p) for p in range(self._partitions)]
        assert self._nc is not None and self._js is not None
        return self._nc, self._js

    async def _connect(self) -> Client:
        async def quiet(e: Exception) -> None:
            log.warning("NATS: %s: %s", type(e).__name__, e)

        with translated(f"connect to {','.join(redact_url(s) for s in self._servers)}"):
            # Reconnects for ever once connected (a node killed, a restart). nats-py would
            # also try the first connection for ever: that one is bounded here, and the
            # runner retries it.
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                return await nats.connect(
                    servers=self._servers,
                    name="podium",
                    connect_timeout=2,
                    reconnect_time_wait=0.25,
                    max_reconnect_attempts=-1,
                    allow_reconnect=True,
                    error_cb=quiet,
                )

    async def _ensure_stream(self, nc: Client, js: JetStreamContext) -> None:
        described = f"podium change log: {self._partitions} partitions, change-event v1"
        with translated(f"look up stream {self._stream}"):
            try:
                info = await js.stream_info(self._stream)
            except nats.js.errors.NotFoundError:
                info = None
        if info is None:
            replicas = self._replicas_for(nc)
            config = StreamConfig(
                name=self._stream,
                description=described,
                subjects=[f"{self._stream}.changes.>", self.events_subject],
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.FILE,
                max_age=self._retention_s,
                duplicate_window=DUPLICATE_WINDOW_S,
                num_replicas=replicas,
            )
            with translated(f"create stream {self._stream}"):
                try:
                    info = await js.add_stream(config)
                    log.info("created stream %s (%d replicas)", self._stream, replicas)
                except nats.js.errors.BadRequestError as e:
                    if e.err_code != 10058:  # made meanwhile by another process
                        raise
                    info = await js.stream_info(self._stream)
        if info.config.description != described:
            raise ConfigError(
                f"log.stream: stream {self._stream!r} is not this log "
                f"({info.config.description!r}, expected {described!r}); partitions are "
                "fixed for a stream's life: use another stream name"
            )
        subjects = list(info.config.subjects or [])
        if self.events_subject not in subjects:
            # Made by a podium from before events went on the stream: one more subject,
            # which changes nothing for the consumers of changes.
            config = dataclasses.replace(info.config, subjects=[*subjects, self.events_subject])
            with translated(f"update stream {self._stream}"):
                await js.update_stream(config)
            log.info("stream %s: events subject %s added", self._stream, self.events_subject)

    async def ping(self) -> None:
        """JetStream answers on a connection that is up, within ``PING_TIMEOUT_S``. The
        asking goes on in a task of its own, shared by the pings that come while it runs:
        a first connection slower than a ping's wait is not cut off by it, and completes
        for the next."""
        task = self._pinging
        if task is None or task.done():
            task = self._pinging = asyncio.ensure_future(self._ping())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # seen, if late
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await asyncio.shield(task)
        except TimeoutError:
            raise LogUnavailable(f"NATS: no answer in {PING_TIMEOUT_S} s") from None

    async def _ping(self) -> None:
        nc, js = await self._ready()
        if not nc.is_connected:  # reconnecting: every server down, or the one it knew
            raise LogUnavailable("NATS: not connected, reconnecting")
        with translated("ask JetStream for the account"):
            await js.account_info()

    async def erase_player(self, player_id: str) -> int:
        """Every message of the stream naming the player, deleted (``erasure.py``)."""
        _, js = await self._ready()
        subjects = player_subjects(self._stream, self._partitions, player_id)
        return await erase_messages(js, self._stream, subjects, player_id)

    def _pull(self, nc: Client, js: JetStreamContext, partition: int) -> Pull:
        config = ConsumerConfig(
            durable_name=f"{self._stream}-changes-{partition:02d}",
            filter_subject=self.subject(partition),
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self._lease_s,
            deliver_policy=DeliverPolicy.ALL,
            max_deliver=-1,
            max_ack_pending=MAX_ACK_PENDING,
        )
        return Pull(nc, js, self._stream, config, PULL_TIMEOUT_S)

    # -- relay -----------------------------------------------------------------------------

    @property
    def relay_leases(self) -> RelayLeases:
        return self._leases

    async def relay(self, limit: int) -> int:
        """Up to ``limit`` rows of each store database this process holds the lease of, and
        up to ``limit`` of its events."""
        if self._databases is None:
            return 0  # a consumer only: the relays are elsewhere
        nc, js = await self._ready()
        outboxes = await self._databases()
        self._leases.replicas = self._replicas_for(nc)
        try:
            held = await self._leases.hold(js, sorted(outboxes))
        finally:  # through an outage too: what is held runs out, and the gauge with it
            metrics.RELAY_DATABASES.set(len(self._leases.held()))
        if not held:
            return 0  # standing by: every database has its relay
        # A publish may take this long at most, and none starts later than this before the
        # lease's end: what the stream stores, it stores while the lease is this process's.
        margin = min(REQUEST_TIMEOUT_S, self._leases.ttl / 3)
        publisher = Publisher(js, self._stream, self._partitions, margin, self._clock)

        def keep(source: str) -> Callable[[], Awaitable[float]]:
            async def stop() -> float:
                return await self._leases.keep(js, source) - margin

            return stop

        work = [
            job
            for source, deadline in held.items()
            for job in (
                publisher.relay(outboxes[source], source, limit, self._lease_s, keep(source)),
                publisher.publish_events(outboxes[source], limit, deadline - margin),
            )
        ]
        moved = await asyncio.gather(*work, return_exceptions=True)
        for m in moved:  # every database to its end, then the first failure raised
            if isinstance(m, BaseException):
                raise m
        return sum(m for m in moved if isinstance(m, int))

    def _replicas_for(self, nc: Client) -> int:
        return self._replicas or min(3, _cluster_size(nc))

    # -- consumers -------------------------------------------------------------------------

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        parts = self._turns.parts(partition)
        if limit <= 0:
            return []
        await self._ready()
        return await self._fetch_from([self._pulls[p] for p in parts], limit)

    async def _fetch_from(self, pulls: list[Pull], limit: int) -> list[Message]:
        """Pull from every consumer at once, the limit shared out; then again from those
        that filled their share, until the limit is reached or nobody has more."""
        out: list[Message] = []
        error: BaseException | None = None
        while pulls and len(out) < limit:
            shares = _share(limit - len(out), len(pulls))
            asked = [(p, n) for p, n in zip(pulls, shares, strict=True) if n]
            lease_ends = time.monotonic() + self._lease_s
            got = await asyncio.gather(*(p.next(n) for p, n in asked), return_exceptions=True)
            pulls = []
            for (pull, n), msgs in zip(asked, got, strict=True):
                if isinstance(msgs, BaseException):
                    error = error or msgs
                    continue
                out += await self._decode(msgs, lease_ends)
                if len(msgs) == n:
                    pulls.append(pull)
        if error is not None and not out:
            raise error
        return out

    async def _decode(self, msgs: list[Msg], lease_ends: float) -> list[Message]:
        out: list[Message] = []
        for msg in msgs:
            seq = msg.metadata.sequence.stream
            handle = Delivery(msg.reply, seq, lease_ends)
            try:
                out.append(decode(msg.data, handle))
            except EventError as e:
                # Not an event this podium can read. Another version (a newer relay in a
                # rolling upgrade) is left to its lease, for an updater that can; anything
                # else will never be readable, and is taken off the log.
                log.error("stream %s message %d: %s", self._stream, seq, e)
                if not isinstance(e, OtherVersion):
                    await self._settle_replies([msg.reply], b"+TERM")
                continue
            self._held[msg.reply] = lease_ends
        return out

    async def ack(self, messages: Sequence[Message]) -> None:
        await self._settle(messages, b"+ACK", keep=False)

    async def in_progress(self, messages: Sequence[Message]) -> None:
        await self._settle(messages, b"+WPI", keep=True)

    async def nak(self, messages: Sequence[Message]) -> None:
        await self._settle(messages, b"-NAK", keep=False)

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        # A partition's durable consumer's ack floor: every message of its subject up to
        # that stream sequence is acked, whoever held it.
        if not messages:
            return []
        _, js = await self._ready()
        parts = {
            p: self._pulls[p].name for p in {_partition_of(m, self._partitions) for m in messages}
        }

        async def floor(name: str) -> int:
            with translated(f"read consumer {name}"):
                info = await js.consumer_info(self._stream, name, timeout=REQUEST_TIMEOUT_S)
            return int(info.ack_floor.stream_seq) if info.ack_floor else 0

        # Every partition asked at once: the updater waits one round trip before its next
        # batch, not one a partition (each 400 ms on the slow links of docs/faults.md).
        got = await gather_all(floor(name) for name in parts.values())
        floors = dict(zip(parts, got, strict=True))
        return [
            floors[_partition_of(m, self._partitions)] >= delivery(m).stream_seq for m in messages
        ]

    async def _settle(self, messages: Sequence[Message], body: bytes, *, keep: bool) -> None:
        replies = [delivery(m).reply for m in messages]
        if not replies:
            return
        lease_ends = time.monotonic() + self._lease_s
        await self._settle_replies(replies, body)
        for r in replies:
            if keep:
                self._held[r] = lease_ends
            else:
                self._held.pop(r, None)

    async def _settle_replies(self, replies: Sequence[str], body: bytes) -> None:
        nc, _ = await self._ready()
        with translated(f"settle {len(replies)} messages ({body.decode()})"):
            if body == b"+ACK":
                for r in set(replies):
                    await nc.publish(r, body)
                await nc.flush(timeout=int(REQUEST_TIMEOUT_S))
                return
            # Each with a reply, all at once: the server answers once it has settled it.
            await asyncio.gather(
                *(nc.request(r, body, timeout=REQUEST_TIMEOUT_S) for r in set(replies))
            )

    async def replay(
        self, since: float, keep: Callable[[Message], bool] | None = None
    ) -> NatsReplay:
        """A log of its own that delivers once more what the stream held from ``since``
        (epoch seconds) until now, what ``keep`` refuses left out; see ``ChangeLog.replay``."""
        nc, js = await self._ready()
        with translated(f"look up stream {self._stream}"):
            info = await js.stream_info(self._stream)
        end = info.state.last_seq
        start = datetime.fromtimestamp(since, UTC)
        config = ConsumerConfig(
            filter_subject=f"{self._stream}.changes.>",
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self._lease_s,
            deliver_policy=DeliverPolicy.BY_START_TIME,
            opt_start_time=start,
            max_ack_pending=MAX_ACK_PENDING,
            inactive_threshold=max(60.0, 6 * self._lease_s),
        )
        pull = Pull(nc, js, self._stream, config, PULL_TIMEOUT_S)
        return NatsReplay(
            self,
            pull,
            end,
            keep,
            lease_s=self._lease_s,
            decode=self._decode,
            settle=self._settle_replies,
        )

    async def close(self) -> None:
        # Give back at once what this consumer still holds, but only what is still its own
        # as far as it can tell: a nak of a delivery whose lease ran out would take the
        # message from whoever holds it now.
        if self._pinging is not None and not self._pinging.done():
            self._pinging.cancel()  # a connection it would make now would outlive the log
        now = time.monotonic()
        mine = [r for r, until in self._held.items() if until > now]
        self._held.clear()
        nc, self._nc, self._js = self._nc, None, None
        if nc is None or nc.is_closed:
            return
        await self._leases.release()  # a standby relay takes over now, not after a lease
        try:
            if mine:
                await asyncio.gather(
                    *(nc.request(r, b"-NAK", timeout=REQUEST_TIMEOUT_S) for r in mine)
                )
                log.info("gave back %d messages still held at close", len(mine))
        except (nats.errors.Error, TimeoutError) as e:  # their leases run out by themselves
            log.warning("giving back %d messages at close: %s", len(mine), e)
        finally:
            await nc.close()


def _cluster_size(nc: Client) -> int:
    """How many servers the connected one says its cluster has (1 when not clustered)."""
    info = nc._server_info
    if not info.get("cluster"):
        return 1
    return max(1, len(set(info.get("connect_urls") or [])))


def _share(total: int, parts: int) -> list[int]:
    """``total`` shared out over ``parts`` as evenly as integers go (some may get 0)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _partition_of(m: Message, partitions: int) -> int:
    """The partition a message was delivered from: its player's."""
    return partition_of(m.player_id, partitions)
