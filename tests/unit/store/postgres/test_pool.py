"""The Postgres store's transaction helper, on a stand-in connection: a failure inside it is
the error raised, even when the connection is gone (``store/postgres/pool.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from asyncpg import exceptions as pgx

from podium.store.postgres.pool import keepalive, server_link, transaction


class Dropped:
    """A pooled connection the kernel dropped mid-transaction: asyncpg released it back to
    the pool, and every call on it raises."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.released = False

    async def execute(self, sql: str) -> None:
        if self.released:
            raise pgx.InterfaceError("cannot call Connection.execute(): released")
        self.sent.append(sql)

    def is_closed(self) -> bool:
        if self.released:
            raise pgx.InterfaceError("cannot call Connection.is_closed(): released")
        return False


async def test_the_first_error_is_raised_when_the_connection_is_gone() -> None:
    c: Any = Dropped()
    with pytest.raises(pgx.ConnectionDoesNotExistError):
        async with transaction(c, "SELECT 1"):
            c.released = True
            raise pgx.ConnectionDoesNotExistError("connection was closed in the middle")
    assert c.sent == ["BEGIN; SELECT 1"]


async def test_a_failure_on_a_live_connection_rolls_back() -> None:
    c: Any = Dropped()
    with pytest.raises(ValueError):
        async with transaction(c, "SELECT 1"):
            raise ValueError("a bug")
    assert c.sent == ["BEGIN; SELECT 1", "ROLLBACK"]


def test_postgres_end_gets_the_same_bounds() -> None:
    idle, interval, count = keepalive(2.0)
    assert server_link(2.0) == {
        "tcp_user_timeout": "2000",
        "tcp_keepalives_idle": str(idle),
        "tcp_keepalives_interval": str(interval),
        "tcp_keepalives_count": str(count),
    }
