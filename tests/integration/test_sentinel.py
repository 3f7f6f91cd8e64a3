"""The index through Sentinel (``redis+sentinel://``, ``index/redis/sentinel.py``), as bootstrap
builds it, on the session's private primary, its replica and the Sentinel that watches them
(``redis_sentinel`` in tests/conftest.py): what reaches the primary, what reaches the
replica under ``read_from_replicas``, scripts the node never ran, what ``podium status``
names, and a service the Sentinel does not know. Following a promotion under load, and the
mending after it, is ``test_mending.py``'s (a deployment of its own that it breaks)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from podium.bootstrap import Backends, build
from podium.config.settings import parse
from podium.errors import IndexUnavailable, RateLimited
from podium.ports import BoardKey
from tests.redis_sentinel import SERVICE, Sentinels

KEY = BoardKey("week", "2026-W44")
DB = "3"  # a database other than 0, named by ?db= in the URL
Build = Callable[..., Backends]


@pytest.fixture
async def backends(tmp_path: Path, redis_sentinel: Sentinels) -> AsyncIterator[Build]:
    """``build(settings)`` over the session's Sentinel, under a key prefix of the test's own;
    each closed afterwards."""
    made: list[Backends] = []
    prefix = f"podium-test-{secrets.token_hex(4)}"

    def make(url: str | None = None, **index: Any) -> Backends:
        raw = {
            "store": {"url": f"sqlite:///{tmp_path}/podium.db"},
            "index": {"url": url or redis_sentinel.url(), "prefix": prefix, **index},
            "server": {"read_rate_per_s": 1, "read_burst": 2, "read_limiter": "redis"},
        }
        b = build(parse(raw))
        made.append(b)
        return b

    yield make
    for b in made:
        await b.close()
    for node in redis_sentinel.nodes:  # a writable replica keeps what was written on it
        for db in ("0", DB):
            keys = node.cli("-n", db, "--scan", "--pattern", f"{prefix}:*").split()
            if keys:
                node.cli("-n", db, "del", *keys)


def _replicated(sentinels: Sentinels) -> None:
    """Until the replica has applied every write the primary had taken when called (WAIT
    would not do: it waits for the writes of its own connection, and redis-cli's has none)."""
    goal = _offset(sentinels.primary.cli("info", "replication"), "master_repl_offset")
    deadline = time.monotonic() + 30
    while _offset(sentinels.replicas[0].cli("info", "replication"), "slave_repl_offset") < goal:
        assert time.monotonic() < deadline, "the replica did not catch up"
        time.sleep(0.01)


def _offset(info: str, field: str) -> int:
    return int(
        next(line for line in info.splitlines() if line.startswith(f"{field}:"))[len(field) + 1 :]
    )


async def test_the_index_snapshots_and_limiter_reach_the_primary(
    backends: Build, redis_sentinel: Sentinels
) -> None:
    b = backends()
    assert b.topology.index == "sentinel"
    await b.index.ping()
    assert await b.index.write(KEY, [("a", 5), ("b", 7)], descending=True, expire_at=None) == 2
    assert await b.index.page(KEY, 0, 100, descending=True) == [("b", 7), ("a", 5)]
    prefix = b.settings.index.prefix
    assert redis_sentinel.primary.cli("zcard", f"{prefix}:{{b:week:2026-W44}}:z").strip() == "2"
    # the fleet's read buckets are the primary's: a burst of 2, then refused
    await b.read_limiter.take("client-1")
    await b.read_limiter.take("client-1")
    with pytest.raises(RateLimited):
        await b.read_limiter.take("client-1")
    assert redis_sentinel.primary.cli("--scan", "--pattern", f"{prefix}:*rl*").strip()
    [node] = await b.index.nodes()  # podium status: the primary Sentinel names, by address
    assert node.node == f"127.0.0.1:{redis_sentinel.primary.port}" and node.role == "master"
    assert [r.node for r in node.replicas] == [f"127.0.0.1:{redis_sentinel.replicas[0].port}"]


async def test_the_database_the_url_names_holds_every_key(
    backends: Build, redis_sentinel: Sentinels
) -> None:
    """``?db=N``: the index, the generation markers, the snapshots' and the read limiter's
    keys all land in database N of the primary (and of its replica), none in database 0."""
    b = backends(url=redis_sentinel.url(f"db={DB}"), read_from_replicas=True)
    assert await b.index.write(KEY, [("a", 5), ("b", 7)], descending=True, expire_at=None) == 2
    await b.read_limiter.take("client-1")
    assert b.generations is not None
    await b.generations.mark([None], "t0", time.time())
    assert await b.generations.tokens() == ("t0",)
    prefix = b.settings.index.prefix
    zkey = f"{prefix}:{{b:week:2026-W44}}:z"
    primary = redis_sentinel.primary
    assert primary.cli("-n", DB, "zcard", zkey).strip() == "2"
    assert primary.cli("-n", DB, "exists", f"{prefix}:gen").strip() == "1"
    assert primary.cli("-n", DB, "--scan", "--pattern", f"{prefix}:rl*").strip()
    assert primary.cli("-n", "0", "--scan", "--pattern", f"{prefix}:*").strip() == ""
    _replicated(redis_sentinel)  # the replica's reads are of database N too
    assert redis_sentinel.replicas[0].cli("-n", DB, "zcard", zkey).strip() == "2"
    assert [m for m, _ in await b.index.page(KEY, 0, 100, descending=True)] == ["b", "a"]


async def test_reads_go_to_the_replica_sentinel_lists_under_read_from_replicas(
    backends: Build, redis_sentinel: Sentinels
) -> None:
    on_replicas, on_primary = backends(read_from_replicas=True), backends()
    await on_primary.index.write(KEY, [("a", 5)], descending=True, expire_at=None)
    _replicated(redis_sentinel)
    # A member the replica alone holds (it is writable, tests/redis_server.py): seen only by
    # the reads that go to it.
    zkey = f"{on_primary.settings.index.prefix}:{{b:week:2026-W44}}:z"
    redis_sentinel.replicas[0].cli("zadd", zkey, "9", "replica-only")
    for index in (on_replicas.index, on_primary.index):  # scripts, and plain reads
        assert await index.write(KEY, [("b", 7)], descending=True, expire_at=None) in (0, 1)
    _replicated(redis_sentinel)
    got = await on_replicas.index.page(KEY, 0, 100, descending=True)
    assert [m for m, _ in got] == ["replica-only", "b", "a"]
    assert (await on_replicas.index.rank(KEY, "replica-only", descending=True)) is not None
    assert await on_replicas.index.count(KEY) == 3
    assert [m for m, _ in await on_primary.index.page(KEY, 0, 100, descending=True)] == ["b", "a"]
    assert await on_primary.index.rank(KEY, "replica-only", descending=True) is None
    # The generation markers are read on the primary, whatever the reads: a marker the
    # replica alone lacks is still there.
    assert on_replicas.generations is not None
    await on_replicas.generations.mark([None], "t0", time.time())
    _replicated(redis_sentinel)
    marker = f"{on_primary.settings.index.prefix}:gen"
    assert redis_sentinel.replicas[0].cli("del", marker).strip() == "1"
    assert await on_replicas.generations.tokens() == ("t0",)


async def test_scripts_a_node_never_ran_are_sent_whole_once(
    backends: Build, redis_sentinel: Sentinels
) -> None:
    """A promoted replica has none of the primary's scripts (Redis does not copy its script
    cache): the first EVALSHA there answers NOSCRIPT, and the script is sent whole."""
    b = backends(read_from_replicas=True)
    await b.index.write(KEY, [("a", 5)], descending=True, expire_at=None)
    for node in redis_sentinel.nodes:
        node.cli("script", "flush")
    assert await b.index.write(KEY, [("a", 8)], descending=True, expire_at=None) == 1
    _replicated(redis_sentinel)
    assert await b.index.rank(KEY, "a", descending=True) is not None  # EVALSHA_RO, replica


async def test_a_split_board_through_sentinel(backends: Build) -> None:
    b = backends(shards=4)
    assert b.split is not None and len(b.split.shards) == 4
    entries = [(f"p{i}", i) for i in range(40)]
    assert await b.index.write(KEY, entries, descending=True, expire_at=None) == 40
    assert await b.index.count(KEY) == 40
    assert b.generations is not None
    assert len(await b.generations.held()) == 4


async def test_a_service_no_sentinel_knows_is_an_outage_that_says_so(
    backends: Build, redis_sentinel: Sentinels
) -> None:
    b = backends(url=redis_sentinel.url().replace(f"/{SERVICE}", "/no-such-service"))
    began = time.monotonic()
    with pytest.raises(IndexUnavailable, match="redis sentinel: No master found for 'no-such"):
        await b.index.ping()
    assert time.monotonic() - began < 30
    [node] = await b.index.nodes()
    assert not node.up and "No master found" in (node.why or "")


@pytest.mark.parametrize("replicas", [False, True], ids=["primary", "replicas"])
async def test_a_burst_of_first_reads_asks_sentinel_once_per_question(
    backends: Build, replicas: bool
) -> None:
    """A fresh process's first burst opens its pool's connections at once, each asking the
    Sentinels for its node: asked one by one, most of them failed (the Sentinel clients' own
    pools are of 100)."""
    b = backends(read_from_replicas=replicas)
    counts = await asyncio.gather(*(b.index.count(KEY) for _ in range(600)))
    assert counts == [0] * 600
