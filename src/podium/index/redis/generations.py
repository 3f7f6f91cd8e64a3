"""``Generations`` on Redis: a marker key per shard, in the shard's own slot, and the node
that holds it (``ports/generations.py`` says why).

The marker (``Keys.generation``) holds ``<token> <run_id>:<master_replid>``: the token drawn
when the index was (re)built or first used, and the identity of the node it was written on.
It is written like any other key, so a replica copies it: a replica promoted after its
primary died still holds it, with the primary's identity, which is how the change is seen.
That is the idea of the profile copy's mark (``index/redis/profiles.py``, tied to ``run_id``),
with ``master_replid`` beside it: a replica that takes over draws a new one, and so does a
primary restarted without its replication state.

Beside the marker, in the same slot, ``Keys.confirmed`` holds when the marker was last found
on the node it names (``confirm``, by script: only while the marker still holds what was
read). It is replicated too, so a promoted replica holds a time from before the change,
where the replay of the lost writes starts. A key of its own rather than a third field of
the marker, so that a process of a release that keeps no such time still reads the marker
as it did (it leaves the time as it was: an older time only makes a replay reach further
back).

On one Redis every shard is on the one node; on Redis Cluster a shard is on the primary of
its slot, asked directly (``INFO`` goes to one node), so a failover of one primary changes
the identity of the shards it took over only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from podium.errors import IndexUnavailable
from podium.index.redis.errors import translated
from podium.index.redis.keys import Keys
from podium.index.redis.scripts import Script
from podium.ports.generations import Generations, Held

UNLOCK = Script("unlock")
CONFIRM = Script("confirm")


def identity(info: dict[str, Any]) -> str:
    """What a node says of itself in ``INFO server replication``: ``<run_id>:<replid>``."""
    return f"{info.get('run_id', '?')}:{info.get('master_replid', '?')}"


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


class RedisGenerations:
    """The markers of ``shards`` (each a shard number, None for the unsplit index, and its
    keys), on one client: one Redis's, or a cluster's."""

    def __init__(self, client: Any, shards: Sequence[tuple[int | None, Keys]]) -> None:
        self._r = client
        self._shards = list(shards)
        self._lock = self._shards[0][1].rebuild_lock()

    async def held(self) -> list[Held]:
        with translated:
            values = await self._values(confirmed=True)
            nodes = await self._nodes()
        out = []
        markers, times = values[0::2], values[1::2]  # each shard's marker, then its time
        for (shard, _), value, at, node in zip(self._shards, markers, times, nodes, strict=True):
            token, _, marked_on = (value or "").partition(" ")
            confirmed = _seconds(at) if token else None
            out.append(Held(shard, token or None, marked_on or None, node, confirmed))
        return out

    async def tokens(self) -> tuple[str | None, ...]:
        with translated:
            values = await self._values()
        return tuple((v.partition(" ")[0] or None) if v else None for v in values)

    async def mark(self, shards: Sequence[int | None], token: str, at: float) -> None:
        wanted = set(shards)
        chosen = [(s, k) for s, k in self._shards if s in wanted]
        with translated:
            nodes = await self._nodes(chosen)
            for (_, keys), node in zip(chosen, nodes, strict=True):
                # one slot: both at once, the marker never seen with another's time
                await self._r.mset({keys.generation(): f"{token} {node}", keys.confirmed(): at})

    async def confirm(self, held: Sequence[Held], at: float) -> None:
        keys = dict(self._shards)
        with translated:
            await asyncio.gather(
                *(
                    CONFIRM(
                        self._r,
                        [keys[h.shard].generation(), keys[h.shard].confirmed()],
                        [f"{h.token} {h.marked_on}", at],
                    )
                    for h in held
                    if h.token is not None and h.marked_on is not None
                )
            )

    async def lock(self, token: str, ttl_s: float) -> bool:
        ms = max(1, int(ttl_s * 1000))
        with translated:
            if await self._r.set(self._lock, token, nx=True, px=ms):
                return True
            if await self._r.get(self._lock) == token:  # ours: renew it
                return bool(await self._r.pexpire(self._lock, ms))
        return False

    async def unlock(self, token: str) -> None:
        with translated:
            await UNLOCK(self._r, [self._lock], [token])

    async def _values(self, *, confirmed: bool = False) -> list[str | None]:
        """Every shard's marker; with ``confirmed``, each followed by its confirmed time."""
        names = [
            name
            for _, k in self._shards
            for name in ((k.generation(), k.confirmed()) if confirmed else (k.generation(),))
        ]
        if isinstance(self._r, RedisCluster):
            # One slot per shard: MGET per slot, pipelined per node, so a read's check is one
            # round trip to each primary rather than a GET for each of (say) 16 shards.
            cluster: Any = self._r
            return list(await cluster.mget_nonatomic(names))
        return list(await self._r.mget(names))

    async def _nodes(self, shards: Sequence[tuple[int | None, Keys]] | None = None) -> list[str]:
        """The identity of the node holding each shard now (asked once per node)."""
        shards = self._shards if shards is None else shards
        if not isinstance(self._r, RedisCluster):
            info = await self._r.execute_command("INFO", "server", "replication")
            return [identity(info)] * len(shards)
        await self._r.initialize()  # at once if it knows the slots already
        asked: dict[str, str] = {}
        out = []
        for _, keys in shards:
            node = self._r.get_node_from_key(keys.generation())
            if node is None:  # no primary serves the slot: a failover under way
                raise IndexUnavailable("no node serves the slot of an index shard")
            if node.name not in asked:
                info = await node.execute_command("INFO", "server", "replication")
                asked[node.name] = identity(info)
            out.append(asked[node.name])
        return out


if TYPE_CHECKING:  # mypy holds the adapter to the port it implements
    _port: type[Generations] = RedisGenerations
