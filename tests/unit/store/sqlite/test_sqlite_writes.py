"""The embedded store's group commit: writes that queue while a group runs share the next
commit, each lands or fails whole, and a write hears back only after its commit.

These drive ``SqliteStore._write`` directly with statements of their own, on a scratch
table: what is under test is the transaction handling every use case runs through (the use
cases themselves are held to the contract suite).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from podium import metrics
from podium.errors import InternalError, StoreUnavailable
from podium.store.sqlite import SqliteStore


@pytest.fixture
async def store(tmp_path: Path):
    s = SqliteStore(str(tmp_path / "w.db"))
    await s._write(lambda c: c.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)"))
    yield s
    await s.close()


def _insert(x: int):
    def run(c: sqlite3.Connection) -> int:
        c.execute("INSERT INTO t VALUES (?)", (x,))
        return x

    return run


def _rows(tmp_path: Path) -> list[int]:
    """What is committed, read on a connection of the test's own."""
    with sqlite3.connect(tmp_path / "w.db") as c:
        return [r[0] for r in c.execute("SELECT x FROM t ORDER BY x")]


async def _behind_a_held_write(store: SqliteStore, jobs: list) -> list:
    """Hold the writer in a first write until ``jobs`` are all queued, so they form the
    next group together; return their outcomes."""
    release = threading.Event()

    def hold(c: sqlite3.Connection) -> None:
        release.wait(5)

    held = asyncio.ensure_future(store._write(hold))
    await asyncio.sleep(0.05)  # the writer thread is inside ``hold`` now
    queued = [asyncio.ensure_future(store._write(j)) for j in jobs]
    await asyncio.sleep(0)  # every one of them is in the queue
    release.set()
    await held
    return await asyncio.gather(*queued, return_exceptions=True)


def _groups() -> tuple[float, float]:
    count = metrics.REGISTRY.get_sample_value("podium_store_write_group_size_count") or 0.0
    total = metrics.REGISTRY.get_sample_value("podium_store_write_group_size_sum") or 0.0
    return count, total


async def test_queued_writes_commit_together(store: SqliteStore, tmp_path: Path) -> None:
    before = _groups()
    out = await _behind_a_held_write(store, [_insert(x) for x in range(10)])
    assert out == list(range(10))
    assert _rows(tmp_path) == list(range(10))
    count, total = _groups()
    # the held write in a group of its own, then the ten in one more
    assert (count - before[0], total - before[1]) == (2, 11)


async def test_a_failing_write_is_undone_alone(store: SqliteStore, tmp_path: Path) -> None:
    def half_then_fail(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (2)")
        raise ValueError("refused after writing")

    out = await _behind_a_held_write(store, [_insert(1), half_then_fail, _insert(3)])
    assert out[0] == 1 and out[2] == 3
    assert isinstance(out[1], ValueError)
    assert _rows(tmp_path) == [1, 3]


async def test_a_driver_error_in_one_write_fails_it_alone_translated(
    store: SqliteStore, tmp_path: Path
) -> None:
    out = await _behind_a_held_write(store, [_insert(1), _insert(1), _insert(2)])
    assert out[0] == 1 and out[2] == 2
    # The duplicate key, translated: a constraint podium did not expect is a bug (500), not an
    # outage that a retry would mend.
    assert isinstance(out[1], InternalError) and isinstance(out[1].__cause__, sqlite3.Error)
    assert _rows(tmp_path) == [1, 2]


async def test_a_busy_database_in_one_write_is_unavailable(
    store: SqliteStore, tmp_path: Path
) -> None:
    def busy(c: sqlite3.Connection) -> None:
        error = sqlite3.OperationalError("database is locked")
        error.sqlite_errorcode = 5  # type: ignore[attr-defined]  # SQLITE_BUSY
        raise error

    out = await _behind_a_held_write(store, [_insert(1), busy, _insert(2)])
    assert out[0] == 1 and out[2] == 2
    assert isinstance(out[1], StoreUnavailable)
    assert _rows(tmp_path) == [1, 2]


async def test_a_lost_transaction_fails_the_whole_group(store: SqliteStore, tmp_path: Path) -> None:
    def lose_it(c: sqlite3.Connection) -> None:
        # What SQLite does on a full disk or an I/O error: it rolls the whole transaction
        # back, taking the writes before this one in the group with it.
        c.execute("ROLLBACK")
        raise sqlite3.OperationalError("database or disk is full")

    out = await _behind_a_held_write(store, [_insert(1), lose_it, _insert(3)])
    assert all(isinstance(o, StoreUnavailable) for o in out), out
    assert _rows(tmp_path) == []
    assert await store._write(_insert(4)) == 4  # and the store goes on
    assert _rows(tmp_path) == [4]


class SlowCommit(sqlite3.Connection):
    """A connection whose COMMIT takes 50 ms: long enough that a write answered before its
    commit would be seen, without fail, by a reader that looks as soon as it is answered."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            time.sleep(0.05)
        return super().execute(sql, *args)


async def test_a_write_is_answered_after_its_commit(
    store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.close()
    slow = SqliteStore(str(tmp_path / "w.db"))
    connect = sqlite3.connect
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: connect(*a, **{**k, "factory": SlowCommit})
    )
    seen: list[list[int]] = []

    async def write_then_look(x: int) -> None:
        await slow._write(_insert(x))
        seen.append(_rows(tmp_path))

    try:
        await asyncio.gather(*(write_then_look(x) for x in range(5)))
    finally:
        monkeypatch.undo()
        await slow.close()
    # the k-th answer comes after at least k writes are committed
    for k, rows in enumerate(sorted(seen, key=len), start=1):
        assert len(rows) >= k


async def test_an_interrupt_in_one_write_fails_its_group_and_no_more(
    store: SqliteStore, tmp_path: Path
) -> None:
    def interrupted(c: sqlite3.Connection) -> None:
        raise KeyboardInterrupt

    out = await _behind_a_held_write(store, [_insert(1), interrupted, _insert(3)])
    # the others hear of an unavailable store, not of the interrupt; nothing of it is kept
    assert all(isinstance(o, StoreUnavailable) for o in out), out
    assert _rows(tmp_path) == []
    assert await store._write(_insert(4)) == 4
    assert _rows(tmp_path) == [4]


async def test_a_closed_store_refuses_writes(tmp_path: Path) -> None:
    s = SqliteStore(str(tmp_path / "c.db"))
    await s._write(lambda c: c.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)"))
    await s.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        await s._write(_insert(1))


async def test_a_caller_that_goes_away_does_not_undo_its_write(
    store: SqliteStore, tmp_path: Path
) -> None:
    release = threading.Event()
    held = asyncio.ensure_future(store._write(lambda c: release.wait(5)))
    await asyncio.sleep(0.05)
    gone = asyncio.ensure_future(store._write(_insert(7)))
    await asyncio.sleep(0)
    gone.cancel()
    release.set()
    await held
    await store._write(_insert(8))  # queued after the cancelled one, so it ran first
    assert _rows(tmp_path) == [7, 8]
