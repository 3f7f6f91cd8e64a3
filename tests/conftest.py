"""Shared fixtures: the real services this machine runs, or a clear skip.

On a laptop a backend that is not reachable is skipped with the reason printed. CI sets
``PODIUM_REQUIRE_SERVICES=1``, and there an unreachable backend fails the run instead.
Every test gets its own Postgres database and its own Redis key prefix, and removes them
afterwards: the machine's own services are shared and never flushed. A test's database is
a copy of a template migrated once per session, so that its store's ``migrate()`` finds
nothing left to do; a test of the migrations themselves is marked ``empty_database`` and
gets databases with nothing in them (``tests/pg_databases.py``). A Redis Cluster is the
tests' own (``tests/redis_cluster.py``): started once per session from the installed
``redis-server``, on free loopback ports, and stopped at the end.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlparse

import pytest

from podium.ports import ScoreStore
from tests.pg_databases import Databases

T = TypeVar("T")

# ``PODIUM_TEST_POSTGRES`` names a server the run shares with whatever else uses it: its tests
# then run one at a time on one worker (``worker_group``). Without it each worker starts a
# Postgres of its own from the installed ``initdb`` (``tests/pg_cluster.py``), and the tests on
# Postgres spread over every worker; with no ``initdb`` either, the machine's server is shared.
SHARED_POSTGRES = os.environ.get("PODIUM_TEST_POSTGRES")
POSTGRES_URL = SHARED_POSTGRES or "postgresql://postgres@127.0.0.1:5432/postgres"

REDIS_URL = os.environ.get("PODIUM_TEST_REDIS", "redis://127.0.0.1:6379/0")
REQUIRE = os.environ.get("PODIUM_REQUIRE_SERVICES") == "1"


def _reachable(url: str) -> bool:
    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 0), timeout=1):
            return True
    except OSError:
        return False


def need(url: str, what: str) -> None:
    """Skip (laptop) or fail (CI) when a real backend is not reachable."""
    if _reachable(url):
        return
    message = f"{what} not reachable at {url}"
    if REQUIRE:
        pytest.fail(f"{message} and PODIUM_REQUIRE_SERVICES=1")
    pytest.skip(message)


def _in_a_thread(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end from synchronous code, in a thread of its own: the caller
    may be inside a test's event loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work()).result()


def _private_postgres() -> bool:
    from tests.pg_cluster import installed

    return SHARED_POSTGRES is None and installed()


PRIVATE_POSTGRES = _private_postgres()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Databases]:
    """The session's databases (``tests/pg_databases.py``): the migrated template, made on
    first use, and the copies of it; all dropped at the end. On this worker's own Postgres,
    started here and stopped at the end, unless the run was given a shared server."""
    if not PRIVATE_POSTGRES:
        databases = Databases(POSTGRES_URL)
        try:
            yield databases
        finally:
            _in_a_thread(databases.close)
        return
    from tests.pg_cluster import PgCluster

    server = PgCluster(for_tests=True)
    try:
        server.start()
        yield Databases(server.url)
    finally:
        server.destroy()  # its databases with it


class OwnDatabases:
    """What one test makes: ``await make(n)`` gives the URLs of ``n`` fresh databases."""

    def __init__(self, server: Databases, empty: bool) -> None:
        self.server = server
        self.empty = empty
        self.made: list[str] = []

    async def make(self, n: int) -> list[str]:
        urls = await self.server.take(n, empty=self.empty)
        self.made += urls
        return urls

    async def copies_of(self, url: str, n: int = 1) -> list[str]:
        """``n`` copies of a database sealed for it (``Databases.seal``), given back like
        the others."""
        urls = await self.server.copies_of(url, n)
        self.made += urls
        return urls


@pytest.fixture
async def pg_databases(
    request: pytest.FixtureRequest, postgres_server: Databases
) -> AsyncIterator[OwnDatabases]:
    """The test's maker of Postgres databases: copies of the migrated template, or empty
    ones for a test marked ``empty_database``; given back (to be dropped) afterwards."""
    need(postgres_server.admin_url, "PostgreSQL")
    mine = OwnDatabases(
        postgres_server, request.node.get_closest_marker("empty_database") is not None
    )
    try:
        yield mine
    finally:
        await postgres_server.give_back(mine.made)


@pytest.fixture
async def postgres_url(pg_databases: OwnDatabases) -> str:
    """A fresh database on the tests' Postgres: migrated already (its store's
    ``migrate()`` finds nothing to do), or empty under ``empty_database``."""
    [url] = await pg_databases.make(1)
    return url


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix of our own on the machine's Redis; its keys are deleted afterwards."""
    need(REDIS_URL, "Redis")
    import redis.asyncio as aioredis

    prefix = f"podium-test-{secrets.token_hex(4)}"
    yield prefix
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Any]:
    """A private Redis Cluster (three primaries, a replica each) for the whole session."""
    from tests.redis_cluster import REDIS_CLI, REDIS_SERVER, start_cluster

    if REDIS_SERVER is None or REDIS_CLI is None:
        message = "redis-server and redis-cli are not installed: no Redis Cluster to start"
        if REQUIRE:
            pytest.fail(f"{message} and PODIUM_REQUIRE_SERVICES=1")
        pytest.skip(message)
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[Any]:
    """A private Redis primary and its replica, which one private Sentinel watches, for the
    whole session: the rank index contract and the Sentinel client's tests
    (``tests/redis_sentinel.py``). Nothing kills it: the failover tests start their own."""
    from tests.redis_cluster import REDIS_CLI, REDIS_SERVER
    from tests.redis_sentinel import start_sentinels

    if REDIS_SERVER is None or REDIS_CLI is None:
        message = "redis-server and redis-cli are not installed: no Sentinel to start"
        if REQUIRE:
            pytest.fail(f"{message} and PODIUM_REQUIRE_SERVICES=1")
        pytest.skip(message)
    sentinels = start_sentinels(replicas=1, sentinels=1)
    try:
        yield sentinels
    finally:
        sentinels.stop()


@pytest.fixture
async def cluster_prefix(redis_cluster: Any) -> AsyncIterator[str]:
    """A key prefix of our own on the session's Redis Cluster; its keys are deleted
    afterwards, on every primary."""
    from podium.index.redis.cluster import cluster_client

    prefix = f"podium-test-{secrets.token_hex(4)}"
    yield prefix
    client = cluster_client(redis_cluster.url)
    try:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
    finally:
        await client.aclose()


@pytest.fixture
def sqlite_url(tmp_path: object) -> Iterator[str]:
    yield f"sqlite:///{tmp_path}/podium.db"


async def stored_results(store: ScoreStore, match_id: str, player_ids: list[str]) -> dict[str, Any]:
    """The results ``store`` holds for these players in this match."""
    return await store.results_of(match_id, player_ids)


# -- which tests share a worker (pytest-xdist, ``--dist loadgroup``) -------------------------

# What a test that uses the tests' Postgres asks for, by name or as its parameter.
_POSTGRES_FIXTURES = {"pg_databases", "postgres_url", "postgres_databases", "split_databases"}
_POSTGRES_KINDS = {"postgres", "production", "split", "split2", "split3"}


def _uses_postgres(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    if names & _POSTGRES_FIXTURES or "databases" in names:  # test_fleet's own three
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        values = value if isinstance(value, tuple) else (value,)
        if any(isinstance(v, str) and v in _POSTGRES_KINDS for v in values):
            return True
    return False


def worker_group(item: pytest.Item) -> str | None:
    """The group whose tests run one after another on one worker: the log contract's
    bodies on the 3-node JetStream cluster (one cluster for the run, its streams made
    ahead), and, when the run shares a Postgres server (``PODIUM_TEST_POSTGRES``, or no
    ``initdb`` to start one), every test on it (its connections are shared with the whole
    machine: one test's worth at a time, as without workers). Each worker's own Postgres
    needs no group. The rest goes to whichever worker is free: the log contract on one
    JetStream server among them (a store on Postgres, one connection at a time, while its
    leases are waited out)."""
    if item.path.name == "test_log.py" and "[nats" in item.nodeid:
        return "nats-cluster" if "[nats-cluster]" in item.nodeid else None
    if not PRIVATE_POSTGRES and _uses_postgres(item):
        return "postgres"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = worker_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # The slow tests first (a stable sort: each keeps its place among its kind). The workers
    # take tests from one queue in this order, so a minute-long fleet test taken last would
    # hold one worker long after the others ran out of work; taken first, the short tests
    # fill the other workers around it and the run ends with short tests only.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
