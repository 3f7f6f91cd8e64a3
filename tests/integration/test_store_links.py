"""The Postgres store's bounds on a store it cannot reach (``[store] timeout_s`` and
``command_timeout_s``, ``store/postgres/pool.py``): each connection's link made to fail
within the bound at both ends, a full pool refused within it, a statement past its time
cancelled, each a 503 (``StoreUnavailable``). A link that hangs for real (a cut, answers
lost) is the network fault tests' (``test_partitions.py``: it needs root)."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from podium.errors import StoreUnavailable
from podium.store.postgres import PostgresStore
from podium.store.postgres.pool import keepalive


def test_keepalive_finds_a_silent_link_dead_within_the_bound() -> None:
    for timeout_s in (0.1, 1.0, 2.0, 2.5, 10.0):
        idle, interval, count = keepalive(timeout_s)
        assert idle >= 1 and interval >= 1 and count >= 1
        assert idle + interval * count <= max(2, timeout_s)


async def test_each_connection_is_bounded_at_both_ends(postgres_url: str) -> None:
    store = PostgresStore.from_url(postgres_url, timeout_s=1.5)

    async def look(c: Any) -> tuple[int, list[str]]:
        sock = c._con._transport.get_extra_info("socket")
        mine = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
        names = ("tcp_user_timeout", "tcp_keepalives_idle", "tcp_keepalives_count")
        theirs = [await c.fetchval(f"SHOW {n}") for n in names]
        return mine, theirs

    try:
        mine, theirs = await store.run(look, tx=False)
    finally:
        await store.close()
    assert mine == 1500  # podium's end: bytes unacknowledged 1.5 s drop the link
    assert theirs == ["1500", "1", "1"]  # Postgres's end, for the session


async def test_a_full_pool_is_refused_within_the_timeout(postgres_url: str) -> None:
    store = PostgresStore.from_url(postgres_url, pool_size=1, timeout_s=0.5)
    try:
        busy = asyncio.create_task(store.run(lambda c: c.execute("SELECT pg_sleep(3)")))
        await asyncio.sleep(0.3)  # the one connection taken
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.run(lambda c: c.fetchval("SELECT 1"))
        waited = time.monotonic() - t0
        await busy
    finally:
        await store.close()
    assert 0.4 <= waited < 2.5, waited  # the bound, not the statement's 3 s


async def test_a_statement_past_its_time_is_cancelled_and_unavailable(postgres_url: str) -> None:
    store = PostgresStore.from_url(postgres_url, command_timeout_s=0.5)
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.run(lambda c: c.execute("SELECT pg_sleep(5)"))
        waited = time.monotonic() - t0
        assert await store.run(lambda c: c.fetchval("SELECT 1")) == 1  # the pool goes on
    finally:
        await store.close()
    assert waited < 4.0, waited
