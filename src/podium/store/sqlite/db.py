"""The embedded score store: one SQLite file in WAL mode.

SQLite allows one writer at a time, so all writes run on one dedicated thread with one
connection; reads run on a second thread with its own connection, which WAL lets proceed
while a write is in progress. ``synchronous=FULL``: an acknowledged result survives power
loss, not only a crash.

Writes commit in groups. Each use case runs inside a savepoint of its own, so it lands or
fails whole, and the writes that queued while one group ran share the next ``BEGIN
IMMEDIATE ... COMMIT`` (and its fsync). No caller hears back before the commit that holds
its write; if that commit fails, every write of the group fails and nothing of it is kept,
so a retry is safe. Why: one transaction per write kept the writer thread busy with commits
and with winning the GIL back from the event loop after each statement; under 500 rank
reads/s it fell behind 500 results/s (BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from podium import metrics
from podium.errors import StoreUnavailable
from podium.store.common import migrations
from podium.store.sqlite.errors import GroupLost, translate

T = TypeVar("T")
BUSY_TIMEOUT_S = 10  # a statement waits this long for another connection's lock
WAL_CUT_WAIT_S = 0.2  # a cut of the WAL waits this long for readers, each time it is tried
GROUP_MAX = 32  # writes per commit: bounds what the first write of a group waits for


class Database:
    """One SQLite file: the writer thread with its group commits, the reader thread, the
    schema. Every port of the embedded store is built on these few methods."""

    def __init__(self, path: str, *, synchronous: str = "FULL") -> None:
        self.path = path
        self._synchronous = synchronous
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-w")
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="sqlite-r")
        self._wconn: sqlite3.Connection | None = None
        self._queued: list[_Job] = []  # writes waiting for the next group
        self._queue_lock = threading.Lock()
        self._draining = False  # a drain of the queue is scheduled on the writer thread
        self._closed = False
        self._rconn: sqlite3.Connection | None = None

    # -- plumbing ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        # Switching a fresh file to WAL fails at once with "database is locked" when another
        # connection is doing the same (the busy timeout is not applied), so retry it briefly.
        for attempt in range(50):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError:
                if attempt == 49:
                    raise
                time.sleep(0.02)
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        # Deleted content is overwritten with zeros, not left in free space for the file to
        # hold: an erased player's rows (and their outbox rows, relayed and deleted long
        # before) leave no bytes behind in the database file (issue 35).
        conn.execute("PRAGMA secure_delete=ON")
        conn.row_factory = sqlite3.Row  # rows are read by column name
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        job = _Job(fn, loop, loop.create_future())
        # Retrieve a failure even when the caller went away, so it is not logged as lost.
        job.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        with self._queue_lock:
            if self._closed:
                raise StoreUnavailable("sqlite: the store is closed")
            self._queued.append(job)
            start = not self._draining  # if not, the running drain takes this write too
            self._draining = True
        if start:
            self._writer.submit(self._drain)
        # Shielded: a caller that goes away does not take the write back; it may still
        # commit, as any write may whose caller stopped waiting (a retry is safe).
        out: T = await asyncio.shield(job.done)
        return out

    def _drain(self) -> None:
        """On the writer thread: commit the queued writes, a group at a time, until none
        is left."""
        group: list[_Job] = []
        try:
            while True:
                with self._queue_lock:
                    group = self._queued[:GROUP_MAX]
                    del self._queued[:GROUP_MAX]
                    if not group:
                        self._draining = False
                        return
                self._commit(group)
        except BaseException as e:
            # Not one of the writes' own errors (``_commit`` answers those): still, no write
            # may be left waiting, nor the queue without a drain.
            with self._queue_lock:
                left, self._queued = self._queued, []
                self._draining = False
            failure = StoreUnavailable(f"sqlite: the writer stopped: {e!r}")
            for job in [*group, *left]:
                job.settle(False, failure)
            raise

    def _commit(self, group: list[_Job]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            if self._wconn is None:
                self._wconn = self._connect()
            conn = self._wconn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for job in group:
                    outcomes.append(_one(conn, job))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as e:  # nothing of the group was kept: every write fails
            failure = translate(e)
            for job in group:
                job.settle(False, failure)
            return
        metrics.STORE_WRITE_GROUP.observe(len(group))
        for job, (ok, value) in zip(group, outcomes, strict=True):
            job.settle(ok, value)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            if self._rconn is None:
                self._rconn = self._connect()
            return fn(self._rconn)

        return await self._run(self._reader, run)

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn)
        except sqlite3.Error as e:  # nothing was committed; an outage or a bug (errors.py)
            raise translate(e) from e

    async def migrate(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"
            )
            done = {r["version"] for r in conn.execute("SELECT version FROM schema_migrations")}
            for version, sql in migrations("sqlite"):
                if version not in done:
                    for statement in _statements(sql):
                        conn.execute(statement)
                    conn.execute("INSERT INTO schema_migrations VALUES (?)", (version,))

        await self._write(run)

    async def close(self) -> None:
        def close_w() -> None:
            if self._wconn is not None:
                self._wconn.close()

        def close_r() -> None:
            if self._rconn is not None:
                self._rconn.close()

        # No write is queued from now on; the writer thread runs in order, so the drain of
        # the writes queued before this finishes before the connection closes.
        with self._queue_lock:
            if self._closed:
                return
            self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._writer, close_w)
        await asyncio.get_running_loop().run_in_executor(self._reader, close_r)
        self._writer.shutdown()
        self._reader.shutdown()

    async def truncate_wal(self, wait_s: float = WAL_CUT_WAIT_S) -> bool:
        """Copy the WAL into the database file and cut it to nothing, so that the page
        images it held before (rows deleted since among them) are gone from disk; False when
        a reader kept it from finishing within ``wait_s`` (the caller tries again)."""

        if self._closed:
            return False

        def run() -> bool:
            if self._wconn is None:
                self._wconn = self._connect()
            # On the writer thread, between its groups: never inside a write's transaction.
            # The cut waits for every reader to be done with the WAL, and every write waits
            # behind it: briefly, rather than the connection's 10 s busy timeout.
            conn = self._wconn
            conn.execute(f"PRAGMA busy_timeout={max(1, int(wait_s * 1000))}")
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
            return int(busy) == 0

        return await self._run(self._writer, run)

    async def ping(self) -> None:
        await self._read(lambda c: c.execute("SELECT 1").fetchone())


@dataclass(slots=True)
class _Job:
    fn: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[Any]

    def settle(self, ok: bool, value: Any) -> None:
        """From the writer thread: hand the outcome to the caller's event loop."""
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(_settle, self.done, ok, value)


def _settle(done: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if done.done():
        return
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)


def _one(conn: sqlite3.Connection, job: _Job) -> tuple[bool, Any]:
    """Run one write in a savepoint: on an error, it is undone and the group goes on."""
    conn.execute("SAVEPOINT write")
    try:
        value = job.fn(conn)
    except Exception as e:
        if not conn.in_transaction:
            raise GroupLost(str(e)) from e
        conn.execute("ROLLBACK TO write")
        conn.execute("RELEASE write")
        return False, translate(e)
    conn.execute("RELEASE write")
    return True, value


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (executescript would commit mid-migration)."""
    text = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    # A trigger's body holds semicolons of its own: a piece is a statement once SQLite
    # says it is complete.
    out, piece = [], ""
    for part in text.split(";"):
        piece += part + ";"
        if sqlite3.complete_statement(piece):
            out.append(piece)
            piece = ""
    return [s for s in out if s.strip(" \n;")]
