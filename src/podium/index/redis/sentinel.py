"""Redis Sentinel for the rank index: ``redis+sentinel://host:26379[,host:26379...]/SERVICE``.

The client (``sentinel_client``) is redis-py's ``redis.asyncio.sentinel.Sentinel``'s client
of the service's primary (``master_for``): every new connection asks the Sentinels which node
is the primary now, so once a replica is promoted the next connection reaches it, with no
restart. What it meets on the way is an outage (``index/redis/errors.py``): the old primary's
connections fail (connection refused, or ``READONLY`` from a primary demoted to a replica,
which redis-py turns into a ConnectionError and a new question to the Sentinels); while the
Sentinels agree the primary is down and none is promoted yet, ``MasterNotFoundError``.

A promoted node never ran the scripts of ``lua/`` (Redis does not copy its script cache to
its replicas): the first ``EVALSHA`` there answers ``NOSCRIPT``, and ``scripts.py`` sends the
whole text once, which loads it there.

Everything else of the index is a single Redis's (``redis.py``, one shard or a split board
over hash-tag shards on the one primary), so a failover changes the node behind every shard
at once, which the generation markers see (``generations.py``: ``INFO`` goes to the primary).

With ``read_from_replicas`` the rank reads (the scripts that only read, and the sorted-set
reads: ``READS``) go to the replicas Sentinel lists, round robin, and to the primary when it
lists none; everything else (writes, the markers, hashes, ``INFO``) to the primary.

The question to the Sentinels is asked once for all the connections that open while it is
under way (``_Sentinel``), never answered from a cache: an answer is always a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import BlockingConnectionPool
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from podium.index.redis.index import POOL_CONNECTIONS, TIMEOUTS, stale_retry

# The commands of the index's reads that a replica may answer (redis.py): the scripts that
# only read (``EVALSHA_RO``), and the plain sorted-set reads. The generation markers (GET,
# MGET) and the rebuild lock stay on the primary, where they are decided.
READS = frozenset({"EVALSHA_RO", "EVAL_RO", "ZRANGE", "ZCARD", "ZMSCORE"})


class _Sentinel(Sentinel):
    """redis-py's Sentinel, whose questions (which node is the primary, which are replicas)
    are asked once for every caller that asks while one is under way. A pool asks at every
    new connection, and a burst of reads opens up to ``POOL_CONNECTIONS`` at once: asked
    one by one, those questions overflow the Sentinel clients' own pools (100 connections),
    and 500 of a burst of 600 first commands failed with MasterNotFoundError."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self._asking: dict[tuple[str, str], asyncio.Future[Any]] = {}

    async def _once(self, what: str, service: str, ask: Callable[[str], Awaitable[Any]]) -> Any:
        task = self._asking.get((what, service))
        if task is None or task.done():
            task = asyncio.ensure_future(ask(service))
            task.add_done_callback(_retrieved)
            self._asking[(what, service)] = task
        return await asyncio.shield(task)

    async def discover_master(self, service_name: str) -> Any:
        return await self._once("master", service_name, super().discover_master)

    async def discover_slaves(self, service_name: str) -> Any:
        return await self._once("replicas", service_name, super().discover_slaves)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """A question every asker stopped waiting for: its error read, not reported unread."""
    if not task.cancelled():
        task.exception()


class _Pool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool, which makes a caller wait for a free connection rather than fail,
    as the pool of one Redis does (``RedisIndex.client_from_url`` says why)."""


_PRIMARY: Any = aioredis.Redis.execute_command  # untyped in redis-py


class SentinelRedis(aioredis.Redis):
    """The primary's client; with a reader, the replicas' client answers ``READS``. It owns
    the Sentinels' own clients, closed with it."""

    reader: Any = None  # the replicas' client (redis-py's commands are untyped)
    manager: Sentinel | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if self.reader is not None and args[0] in READS:
            return await self.reader.execute_command(*args, **options)
        return await _PRIMARY(self, *args, **options)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        try:
            if self.reader is not None:
                await self.reader.aclose()
            await super().aclose(close_connection_pool)
        finally:
            if self.manager is not None:
                await self.manager.aclose()


def sentinel_client(
    sentinels: Sequence[tuple[str, int]],
    service: str,
    *,
    db: int = 0,
    username: str | None = None,
    password: str | None = None,
    sentinel_password: str | None = None,
    read_from_replicas: bool = False,
    timeout_s: float | None = None,
) -> SentinelRedis:
    """The client of ``service``'s primary, found through ``sentinels``, with the timeouts
    and pool of one Redis (``redis.py``); ``timeout_s`` (the read limiter's) sets every
    timeout, the Sentinels' too."""
    timeouts = TIMEOUTS if timeout_s is None else dict.fromkeys(TIMEOUTS, timeout_s)
    asked: dict[str, Any] = dict(timeouts)
    if sentinel_password is not None:
        asked["password"] = sentinel_password
    manager = _Sentinel(list(sentinels), sentinel_kwargs=asked)
    options: dict[str, Any] = {
        "db": db,
        "decode_responses": True,
        "health_check_interval": 30,
        "max_connections": POOL_CONNECTIONS,
        "timeout": timeouts["socket_timeout"],  # the wait for a free connection
        **timeouts,
    }
    if timeout_s is None:  # the read limiter's client gives a node up at once, as on a cluster
        options["retry"] = stale_retry()
    if username is not None:
        options["username"] = username
    if password is not None:
        options["password"] = password
    client = manager.master_for(
        service, redis_class=SentinelRedis, connection_pool_class=_Pool, **options
    )
    assert isinstance(client, SentinelRedis)
    client.manager = manager
    if read_from_replicas:
        client.reader = manager.slave_for(service, connection_pool_class=_Pool, **options)
    return client
