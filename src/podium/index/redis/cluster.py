"""Redis Cluster for the rank index: ``redis+cluster://host:port[,host:port...]``.

One cluster client (redis-py's ``redis.asyncio.cluster.RedisCluster``) is shared by the S
shard indexes of a split board (``shard_indexes``): each shard's keys carry its hash tag
(``{s00}`` ... ``{s15}``, keys.py), so each shard lives in one slot and every script of it
runs on that slot's node; the tags spread over the primaries. The client follows the
cluster's slot map itself (MOVED, ASK, a failover); what it cannot ride out becomes
``IndexUnavailable`` (errors.py).

With ``read_from_replicas``, reads (ZRANGE, ZCARD, ZMSCORE, and the scripts that only read,
sent as ``EVALSHA_RO``) go to the replicas, round robin, and writes to the primaries. A
replica lags its primary by its replication delay: a read just after a write may not see
it yet, which the board's one-second freshness allows.

``rediss+cluster://`` is the same over TLS.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.cluster import LoadBalancingStrategy

from podium.errors import ConfigError
from podium.index.redis.index import TIMEOUTS, RedisIndex
from podium.util.redact import redact_url

SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster_url(url: str) -> bool:
    return url.startswith(tuple(f"{s}://" for s in SCHEMES))


class _Cluster(RedisCluster):
    """redis-py's cluster client, which finds the slot of ``EVAL_RO`` and ``EVALSHA_RO`` as
    it does that of ``EVAL`` (their keys follow the key count). Without this it asks a node
    for their keys (``COMMAND GETKEYS``) on every call: a second round trip per read.

    It also learns the cluster's slots before it sends anything: a split board's first read
    sends one command per shard at once, and when those are a fresh client's first
    commands, redis-py 8.1 lets some of them through while the others are still learning
    the slots, on connections that learning then closes ("'NoneType' object has no
    attribute 'writelines'"). Every command waits for the one first initialization."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self._initialize:
            await self.initialize()
        return await super().execute_command(*args, **kwargs)

    async def _determine_slot(self, command: str, *args: Any) -> int:
        if command.upper() in ("EVAL_RO", "EVALSHA_RO"):
            command = command[:-3]
        return await super()._determine_slot(command, *args)


def nodes_of(url: str) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """The startup nodes of a cluster URL, and the connection options it names (user,
    password, TLS)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"index.url: not a Redis Cluster URL: {redact_url(url)!r}")
    auth, _, hosts = parts.netloc.rpartition("@")
    options: dict[str, Any] = {}
    if auth:
        user, _, password = auth.partition(":")
        if user:
            options["username"] = unquote(user)
        if password:
            options["password"] = unquote(password)
    if parts.scheme == "rediss+cluster":
        options["ssl"] = True
    if parts.path not in ("", "/", "/0"):
        raise ConfigError(f"index.url: Redis Cluster has only database 0, not {parts.path!r}")
    if parse_qs(parts.query):
        raise ConfigError(f"index.url: options in the query are not read: {parts.query!r}")
    nodes: list[tuple[str, int]] = []
    for hostport in hosts.split(","):
        host, sep, port = hostport.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"index.url: {hostport!r} is not host:port in {redact_url(url)!r}")
        nodes.append((host.strip("[]"), int(port)))
    return nodes, options


def cluster_client(
    url: str, *, read_from_replicas: bool = False, timeout_s: float | None = None
) -> RedisCluster:
    """A cluster client for ``redis+cluster://host:port[,host:port...]``, with the timeouts of
    a single Redis (``RedisIndex.from_url``). It connects on first use; any listed node
    that answers tells it the rest of the cluster.

    ``timeout_s`` (the read limiter's) sets both timeouts, and no retry: a node that does
    not answer is given up at once, where the index's client retries a few times (redis-py's
    default: about 0.3 s in all for a dead node on loopback) to ride out the first moments
    of a failover."""
    nodes, options = nodes_of(url)
    strategy = LoadBalancingStrategy.ROUND_ROBIN_REPLICAS if read_from_replicas else None
    timeouts = TIMEOUTS if timeout_s is None else dict.fromkeys(TIMEOUTS, timeout_s)
    if timeout_s is not None:
        options["retry"] = Retry(NoBackoff(), 0)
    return _Cluster(
        startup_nodes=[ClusterNode(host, port) for host, port in nodes],
        decode_responses=True,
        load_balancing_strategy=strategy,
        health_check_interval=30,
        **timeouts,
        **options,
    )


def client_for(url: str, *, read_from_replicas: bool = False) -> Any:
    """The client the shard indexes of ``index.url`` share: a cluster's for
    ``redis+cluster://``, else one Redis's (``redis://``, ``rediss://``), whose one node has
    no replica to read from."""
    if is_cluster_url(url):
        return cluster_client(url, read_from_replicas=read_from_replicas)
    return RedisIndex.client_from_url(url)


def shard_indexes(
    client: Any, prefix: str, shards: int, layout: int | None = None
) -> list[RedisIndex]:
    """One ``RedisIndex`` per shard, all on one client (a cluster's, or one Redis's); with
    ``layout``, under the tags of a layout a reshard built (``keys.shard_tag``)."""
    if shards < 1:
        raise ConfigError(f"index.shards must be at least 1, not {shards}")
    return [RedisIndex(client, prefix, shard=n, layout=layout) for n in range(shards)]
