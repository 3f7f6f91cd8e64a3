"""The index mending itself: beside every updater, a check of the index's generation
markers every ``[index] watch_s`` (``ports/generations.py`` says what they are).

- A shard whose marker is where it was written is **confirmed**: the time of the look
  (taken before it) is written beside its marker, which the node replicates with the rest.
- A shard whose marker is **gone** lost its data (a Redis restarted without it, or flushed):
  one process, under the rebuild lock, refills every live board window from the store (the
  rebuild use case, ``rebuilds.py``), applies the log's last seconds once more (writes that
  landed while the rebuild read the store would otherwise be lost to its swap), and only
  then writes a new marker: until then every read of the index answers 503
  (``service/ranks/marked.py``). That replay starts from before the rebuild began, however late the
  loss was noticed: the store holds everything committed before, and the rebuild reads it all.
- A shard whose marker was written on **another node** than the one that holds it now (a
  replica took over, or the node restarted from a snapshot) may lack the writes of the last
  moments before the change: the log is applied once more from the time its marker was last
  confirmed on its old node, less ``[index] failover_replay_s`` (a replica that took over
  holds a confirmed time from before the change, whenever the change is noticed; a marker
  with no time, from an older release, counts as confirmed now). Then the marker is written
  again with the node it is on now, so the change is mended once. A second process that saw
  the same change replays as well, which the index's idempotent writes make harmless
  (invariant 3 of docs/architecture.md).
- A shard whose marker names the node it is on, but **not the node this process found it on
  at its last look**, moved under this process after another mended it: the other process
  replayed and marked the new node while this one still reached the old node, and wrote to
  it (a Redis primary cut from its Sentinels and from that process, but not from this one,
  takes writes until the heal, when they are dropped). Those writes came after the other's
  replay, so this process applies the log once more itself, from ``[index]
  failover_replay_s`` before its last look that found the old node (its writes there went
  on until then): a split brain longer than that setting can still lose the writes of its
  start to a later replay's reach, which each player's next result mends. Found by the
  network fault tests (docs/faults.md, the Sentinel split brain with two workers).

Before either mend (the rebuild, or the replay), the shard's board windows whose counts an
aggregator holds are marked as a new generation of counts (``ShardIndex.renew_counts``):
the node that holds the shard now may lack writes none of its moves describes, and its
tally of writes may climb past the one the aggregator counted at before it looks again, so
the aggregator and readers count that shard afresh rather than follow its moves
(``domain/recount.py``). Once, before: the replay's writes and the rebuild's swap are moves
of their own on the node that holds the shard now (write.lua tallies each in its own step,
swap.lua marks its own generation), which counts taken after the mark follow exactly; a
mark after them would only cost another fresh count.

After a failover's replay, the index is swept for erased players (``service.erasure
.sweep_erased``): a replica that took over may hold what an erasure deleted on its old node
(the player's members, ban-set entries, metadata, their copy of the profile), which no
replay removes, since the erasure keeps only the keyed hash of the id once done; the sweep
finds them by the hash of each id the index holds (and drops an aggregator's snapshot whose
top names one).

The log is split by player into partitions of its own, which are not the index's shards, so
a replay from a time reads every partition (``ChangeLog.replay``). Where some shards changed
and others did not (a Redis Cluster primary of several), only the changes written to the
changed shards are applied (``replay.on_shards``: a player's shard, or a league cohort's):
a JetStream replay settles the others unread. The outbox's replay cannot leave any out (its
rows are re-queued in the outbox, which every updater applies), so there every change of the
replayed seconds is applied again. ``podium_replayed_changes_total`` counts what this
process's replay applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Collection, Sequence
from functools import partial

from podium import metrics
from podium.domain.recount import counted
from podium.domain.windows import index_expiry
from podium.ports import BoardKey, Clock
from podium.ports.generations import Generations, Held
from podium.service.erasure import sweep_erased
from podium.workers.replay import replay
from podium.workers.runner import Needs, Runner

log = logging.getLogger("podium.mender")

LOCK_S = 30.0  # the rebuild lock's time to live, renewed while the rebuild runs
RACE_S = 5.0  # after a rebuild, the log from this long before it began is applied again


def _names(shards: Sequence[int | None]) -> str:
    return ", ".join("the index" if s is None else f"shard {s}" for s in shards)


def _label(shard: int | None) -> str:
    return "0" if shard is None else str(shard)


class Mender:
    def __init__(
        self,
        generations: Generations,
        rebuild_live: Callable[[], Awaitable[int]],
        replay: Callable[[float, Collection[int] | None], Awaitable[int]],
        clock: Clock,
        replay_s: float,
        shards: int | Callable[[], int] = 1,
        sweep: Callable[[], Awaitable[int]] | None = None,
        renew: Callable[[Sequence[int | None]], Awaitable[None]] | None = None,
    ) -> None:
        """``replay(since_s, shards)`` applies the log's last ``since_s`` seconds again, of
        the index shards ``shards`` only (None: of every shard); ``shards`` here is how
        many the index has (asked at each look where a reshard can change it); ``sweep``
        takes erased players out of the index after a failover (None: nothing swept);
        ``renew(shards)`` marks those shards' counts as a new generation (None: none kept)."""
        self._gens = generations
        self._rebuild_live = rebuild_live
        self._replay = replay
        self._clock = clock
        self._replay_s = replay_s
        self._shards = shards if callable(shards) else (lambda: shards)
        self._sweep = sweep
        self._renew = renew
        # Each shard's node at this process's last look, when that look began, and the
        # marker's token then.
        self._seen: dict[int | None, tuple[str, float, str]] = {}

    async def step(self) -> int:
        looked = self._clock.now()  # before the look: the marker was there at least then
        held = await self._gens.held()
        gone = [h.shard for h in held if h.token is None]
        moved = [h for h in held if h.token is not None and h.marked_on != h.node]
        healthy = [h for h in held if h.token is not None and h.marked_on == h.node]
        # Already marked on their new node by another process, but on another node at this
        # process's last look: this one may have written to the old node since (above). The
        # same marker only: a failover's mend keeps the shard's token, while a rebuild or a
        # reshard marks anew (after a reshard shard 0 is other keys, on another node,
        # rebuilt whole under its new marker, with no old node's writes to mend).
        switched = [
            (h, seen[1])
            for h in healthy
            if (seen := self._seen.get(h.shard)) is not None
            and seen[0] != h.node
            and seen[2] == h.token
        ]
        if healthy:
            await self._gens.confirm(healthy, looked)
        if gone:
            await self.rebuild(gone)
        if moved:
            await self._failover(moved)
        if switched:
            await self._switched(switched)
        # Remembered only once mended: a look that failed meanwhile is taken again.
        for h in held:
            if h.token is not None:
                self._seen[h.shard] = (h.node, looked, h.token)
        return 0  # the runner sleeps watch_s until the next look

    async def rebuild(self, shards: Sequence[int | None], *, replay: bool = True) -> bool:
        """Refill the index from the store and mark ``shards`` anew; False if another
        process holds the rebuild lock (it will mark them when done)."""
        token = secrets.token_hex(8)
        if not await self._gens.lock(token, LOCK_S):
            return False
        keep = asyncio.create_task(self._keep_lock(token))
        try:
            for s in shards:
                metrics.INDEX_FAILOVERS.labels(_label(s)).inc()
            if self._renew is not None:  # before the refill: see the module's docstring
                await self._renew(shards)
            began = self._clock.now()
            n = await self._rebuild_live()
            since_s = self._clock.now() - began + RACE_S
            replayed = await self._replay(since_s, None) if replay else 0
            metrics.REPLAYED_CHANGES.inc(replayed)
            await self._gens.mark(shards, token, began)
        finally:
            keep.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keep
            with contextlib.suppress(Exception):
                await self._gens.unlock(token)
        log.warning(
            "%s lost its data (its generation marker was gone): rebuilt %d entries of live "
            "board windows from the store, then replayed %d changes of the log",
            _names(shards), n, replayed,
        )  # fmt: skip
        return True

    async def _failover(self, moved: list[Held]) -> None:
        for h in moved:
            metrics.INDEX_FAILOVERS.labels(_label(h.shard)).inc()
        shards = [h.shard for h in moved]
        why = "; ".join(f"{_names([h.shard])}: {h.marked_on} -> {h.node}" for h in moved)
        if self._renew is not None:
            # Before the replay, whether or not one runs: the lost writes leave the counts
            # wrong either way. Not after it: its writes are honest moves on this node.
            await self._renew(shards)
        now = self._clock.now()
        if self._replay_s <= 0:
            log.warning(
                "the Redis node behind %s changed (%s); not replaying: "
                "index.failover_replay_s = 0", _names(shards), why,
            )  # fmt: skip
        else:
            # From before the change: the oldest time a moved marker was last confirmed on
            # its old node (a marker with none, written by an older release: now).
            confirmed = min(now if h.confirmed is None else min(h.confirmed, now) for h in moved)
            since_s = now - confirmed + self._replay_s
            n = await self._replay(since_s, self._only(shards))
            metrics.REPLAYED_CHANGES.inc(n)
            log.warning(
                "the Redis node behind %s changed (%s): it may lack the last writes of its "
                "old node, so %d changes of the log's last %.0fs (from %.0fs before it was "
                "last confirmed on its old node, %.0fs ago) were applied again%s",
                _names(shards), why, n, since_s, self._replay_s, now - confirmed,
                "" if self._only(shards) is None else " (those of the other shards left out "
                "where the log can)",
            )  # fmt: skip
        if self._sweep is not None:
            await self._sweep()  # before the marks: a sweep that fails is done again next look
        # Each shard keeps its token (reads compare tokens) and now names its new node.
        for h in moved:
            assert h.token is not None
            await self._gens.mark([h.shard], h.token, now)

    async def _switched(self, switched: list[tuple[Held, float]]) -> None:
        shards = [h.shard for h, _ in switched]
        why = "; ".join(f"{_names([h.shard])}: now on {h.node}" for h, _ in switched)
        if self._replay_s <= 0:
            log.warning(
                "the Redis node behind %s changed since this process's last look (%s), "
                "mended by another process; not replaying: index.failover_replay_s = 0",
                _names(shards), why,
            )  # fmt: skip
            return
        now = self._clock.now()
        last = min(at for _, at in switched)  # the last look that found the old node
        since_s = now - last + self._replay_s
        n = await self._replay(since_s, self._only(shards))
        metrics.REPLAYED_CHANGES.inc(n)
        log.warning(
            "the Redis node behind %s changed since this process's last look (%s), and was "
            "mended by another process meanwhile; this one may have written to the old node "
            "after that, so %d changes of the log's last %.0fs (from %.0fs before its last "
            "look on the old node, %.0fs ago) were applied again",
            _names(shards), why, n, since_s, self._replay_s, now - last,
        )  # fmt: skip

    def _only(self, shards: Sequence[int | None]) -> Collection[int] | None:
        """The shards a replay is of; None: every one (the unsplit index, or all moved)."""
        if None in shards or len(set(shards)) >= self._shards():
            return None
        return {s for s in shards if s is not None}

    async def _keep_lock(self, token: str) -> None:
        while True:
            await asyncio.sleep(LOCK_S / 3)
            with contextlib.suppress(Exception):
                await self._gens.lock(token, LOCK_S)


def mender(n: Needs) -> Mender | None:
    """The mender of this deployment's index; None where it has no markers (in process)."""
    if n.generations is None or n.rebuild_live is None:
        return None

    async def again(since_s: float, shards: Collection[int] | None) -> int:
        return await replay(n, since_s, shards)

    async def sweep() -> int:
        return await sweep_erased(n.store, [n.index, n.snapshots])

    return Mender(
        n.generations,
        n.rebuild_live,
        again,
        n.clock,
        n.settings.index.failover_replay_s,
        lambda: max(1, len(n.shards)),  # the live layout's (index/redis/layout.py)
        sweep,
        partial(renew_counts, n),
    )


async def renew_counts(n: Needs, shards: Sequence[int | None]) -> None:
    """The board windows whose counts an aggregator holds (``domain.recount.counted``: none
    but those carry counts from one cycle to the next), marked as a new generation of
    counts on each of ``shards`` of the live layout, with the expiry a write gives them.
    The unsplit index (None) has no aggregator: one shard is the whole board."""
    live = list(n.shards)  # the live layout's (index/redis/layout.py), as ``shards`` are
    windows = [
        (BoardKey(spec.name, w.id), index_expiry(w))
        for spec, w in counted(n.settings.boards, n.clock.now())
    ]
    marked = {s for s in shards if s is not None and s < len(live)}
    if windows and marked:
        await asyncio.gather(*(live[s].renew_counts(windows) for s in sorted(marked)))


def runners(n: Needs) -> list[Runner]:
    m = mender(n)
    if m is None:
        return []
    return [Runner("mender", m.step, idle_sleep_s=n.settings.index.watch_s)]
