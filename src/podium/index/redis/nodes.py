"""Where an index shard's keys are, and how that Redis replicates (``podium status``).

On one Redis the node is the client's own (behind Sentinel, the primary it names now); on
Redis Cluster, the primary of the slot the
shard's hash tag maps to (its profile copy's key is in that slot, keys.py). ``INFO
replication`` there gives the node's role, its ``master_repl_offset`` and each replica's
offset, whose difference is the replica's lag in bytes: what a failover would lose.
A node that does not answer is reported down, with the reason, never raised: the command
lists every shard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool

from podium.index.redis.errors import CAUGHT, from_driver, translate
from podium.ports.status import IndexNode, Replica


async def describe(client: Any, key: str, shard: int | None) -> IndexNode:
    """The node holding ``key`` (any key of the shard), and its replication."""
    name = "?"
    try:
        if isinstance(client, RedisCluster):
            await client.initialize()
            node = client.get_node_from_key(key)
            if node is None:  # no primary serves the slot: a failover under way
                return IndexNode(shard, name, up=False, why="no node serves the shard's slot")
            name = f"{node.host}:{node.port}"
            info = await node.execute_command("INFO", "replication")
        elif isinstance(pool := client.connection_pool, SentinelConnectionPool):
            # behind Sentinel: the primary it names now (redis-py's pool is untyped)
            sentinel: Any = pool
            host, port = await sentinel.get_master_address()
            name = f"{host}:{port}"
            info = await client.info("replication")
        else:
            kwargs = client.connection_pool.connection_kwargs
            name = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
            info = await client.info("replication")
    except (*CAUGHT, AttributeError, TypeError) as e:
        if not from_driver(e):
            raise
        return IndexNode(shard, name, up=False, why=str(translate(e)))
    return replication(shard, name, info)


def replication(shard: int | None, name: str, info: Mapping[str, Any]) -> IndexNode:
    """``INFO replication`` as redis-py parses it: ``slave0`` and the like are dicts of
    ``ip``, ``port``, ``state``, ``offset``."""
    offset = _int(info.get("master_repl_offset"))
    replicas = []
    for field, value in sorted(info.items()):
        if not (field.startswith("slave") and field[5:].isdigit() and isinstance(value, dict)):
            continue
        theirs = _int(value.get("offset"))
        lag = None if offset is None or theirs is None else max(0, offset - theirs)
        replicas.append(
            Replica(f"{value.get('ip')}:{value.get('port')}", str(value.get("state")), lag)
        )
    role = info.get("role")
    return IndexNode(
        shard, name, up=True, role=None if role is None else str(role), offset=offset,
        replicas=tuple(replicas),
    )  # fmt: skip


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
