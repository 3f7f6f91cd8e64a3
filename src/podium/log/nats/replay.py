"""``NatsLog.replay``: one ephemeral consumer over every partition, from a start time up to
the last message the stream held when the replay began; then nothing. Settled through the
log that made it; deleted when closed (or by JetStream, once left idle). With ``keep``, the
changes it refuses are acked as they are read and never delivered.

It knows the log that made it by the port (``ChangeLog``) and the two steps of it that it
shares (decoding a pull's messages, settling replies), given to it, so the imports run one
way: ``log.py`` imports this module, never the reverse."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from nats.aio.msg import Msg

from podium.domain.models import Message
from podium.log.nats.delivery import delivery
from podium.log.nats.pull import Pull
from podium.ports import ChangeLog

log = logging.getLogger("podium.log")

AGAIN_POLL_S = 0.05  # how often an empty pull is asked again while given-back ones are due


class NatsReplay:
    """``NatsLog.replay``: one ephemeral consumer over every partition, from a start time up
    to the last message the stream held when the replay began; then nothing."""

    def __init__(
        self,
        log: ChangeLog,
        pull: Pull,
        end: int,
        keep: Callable[[Message], bool] | None = None,
        *,
        lease_s: float,
        decode: Callable[[list[Msg], float], Awaitable[list[Message]]],
        settle: Callable[[Sequence[str], bytes], Awaitable[None]],
    ) -> None:
        """``log``: the log that made it, which settles its deliveries; ``decode``: its
        messages of a pull as deliveries leased until a time; ``settle``: replies given one
        body (``+ACK``) at once."""
        self._log = log
        self._lease_s = lease_s
        self._decode = decode
        self._settle = settle
        self._pull = pull
        self._end = end
        self._past = end == 0  # every message up to the end delivered once
        self._keep = keep
        self._unacked: dict[int, Message] = {}  # by stream sequence: delivered, not acked
        self._due: set[int] = set()  # stream sequences given back, not delivered again yet
        self._due_until = 0.0  # when to stop waiting for them (time.monotonic())

    @property
    def partitions(self) -> int:
        return 1

    async def relay(self, limit: int) -> int:
        return 0

    async def ping(self) -> None:
        await self._log.ping()

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        if partition not in (None, 0):
            raise ValueError(f"partition {partition!r}: a replay has one partition, 0")
        if self._unacked:  # given up by the one consumer: delivered again at once, waited for
            await self.nak(list(self._unacked.values()))
        # Less than ``limit`` only at the end: that is how the caller knows it is done.
        out: list[Message] = []
        while len(out) < limit and not (self._past and not self._due):
            if self._past and time.monotonic() >= self._due_until:
                log.error(
                    "replay: %d changes given back did not come again; ending without "
                    "them (each player's next result mends their totals)",
                    len(self._due),
                )
                self._due.clear()
                break
            lease_ends = time.monotonic() + self._lease_s
            msgs = await self._pull.next(limit - len(out))
            mine = [m for m in msgs if m.metadata.sequence.stream <= self._end]
            later = [m.reply for m in msgs if m.metadata.sequence.stream > self._end]
            if later:
                await self._settle(later, b"+ACK")  # past the end: the updaters' own
            got = await self._decode(mine, lease_ends)
            if self._keep is not None:
                refused = [m for m in got if not self._keep(m)]
                if refused:
                    await self._log.ack(refused)
                    got = [m for m in got if self._keep(m)]
            for m in got:
                seq = delivery(m).stream_seq
                self._unacked[seq] = m
                self._due.discard(seq)
            out += got
            if later or not msgs:
                self._past = True  # all read once: only what was given back may come
                if self._due and not got:
                    await asyncio.sleep(AGAIN_POLL_S)
        return out

    def _forget(self, seqs: Sequence[int], *, due: bool) -> None:
        """No longer held by the consumer; with ``due``, given back (nak): the replay waits
        for them to come again before it ends (at most a lease, after which JetStream
        delivers them again by itself)."""
        for s in seqs:
            self._unacked.pop(s, None)
        if due:
            self._due.update(seqs)
            self._due_until = time.monotonic() + self._lease_s

    async def ack(self, messages: Sequence[Message]) -> None:
        await self._log.ack(messages)
        self._forget([delivery(m).stream_seq for m in messages], due=False)

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        # A replay delivers again what was applied already: its marks are old, and say
        # nothing of where the log's own consumers are.
        return [False] * len(messages)

    async def in_progress(self, messages: Sequence[Message]) -> None:
        await self._log.in_progress(messages)

    async def nak(self, messages: Sequence[Message]) -> None:
        await self._log.nak(messages)
        self._forget([delivery(m).stream_seq for m in messages], due=True)

    async def replay(
        self, since: float, keep: Callable[[Message], bool] | None = None
    ) -> ChangeLog:
        return await self._log.replay(since, keep)

    async def close(self) -> None:
        try:
            await self._pull.delete()
        except Exception as e:  # an ephemeral consumer goes by itself when left idle
            log.warning("deleting the replay consumer: %s", e)
