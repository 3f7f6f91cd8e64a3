"""The tests' databases on the machine's Postgres: copies of one migrated template.

A test used to create an empty database and run every migration on it; a run made hundreds.
Now the session (each worker process, under xdist) migrates one template database once, and
each test database is a copy of it (``CREATE DATABASE ... TEMPLATE``): its store's
``migrate()`` then finds every version applied and does nothing. Postgres refuses to copy a
database while anyone is connected to it, so the template is closed to connections once
migrated. A test of the migrations themselves is marked ``empty_database`` and gets
databases with nothing in them, as before.

Both ends are done in batches, several statements at once, because of what each costs
the server: a copy writes its whole template to the WAL, and a ``DROP DATABASE`` waits for
a checkpoint (on a busy server, from half a second to seconds each; several dropped at once
share one). So copies are made a batch at a time ahead of need, and the databases of
finished tests are dropped a batch at a time, in the teardown of the test that fills the
batch (not in the background: a checkpoint stalls every commit on the server, and must
not fall in the middle of a test that times its writes); the rest at the session's end.
The names all start with ``podium_test_``.

Each copy commits without waiting for its WAL to reach the disk (``synchronous_commit =
off``, set on the database, so every connection to it has it): what a test sees is the
same, since no test crashes the machine's server (a commit is lost only then), and a
test's many commits no longer each wait out a flush of a disk shared with the whole run.
``PODIUM_TEST_LAZY_COMMIT=0`` makes them wait as a production server would.
"""

from __future__ import annotations

import os
import secrets
import warnings
from urllib.parse import urlparse

import asyncpg

from podium.util.aio import gather_all

# The server is shared (its max_connections with it): each statement at once is a connection.
BATCH = 4  # copies made ahead, at once
DROP_BATCH = 8  # databases dropped together, AT_ONCE at a time
AT_ONCE = 4
PREFIX = "podium_test_"


class Databases:
    """The session's template and test databases on the server at ``admin_url``."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.template: str | None = None
        self.ready: list[str] = []  # copies of the template nobody has taken yet
        self.retired: list[str] = []  # databases of finished tests, to drop
        self.sealed: list[str] = []  # databases tests filled once and copy (``seal``)

    def url(self, name: str) -> str:
        return urlparse(self.admin_url)._replace(path=f"/{name}").geturl()

    async def take(self, n: int, *, empty: bool = False) -> list[str]:
        """The URLs of ``n`` databases of the caller's own: migrated copies of the template,
        or, with ``empty``, databases with nothing in them."""
        if empty:
            names = _names(n)
            await self._create(names, None)
        else:
            if len(self.ready) < n:
                template = await self._template()
                more = _names(max(n - len(self.ready), BATCH))
                await self._create(more, template)
                self.ready += more
            names, self.ready = self.ready[:n], self.ready[n:]
        return [self.url(name) for name in names]

    async def give_back(self, urls: list[str]) -> None:
        """The test is done with these: dropped with the next full batch. Until then they
        take no connections: what a test left open (a pool it leaked, a process it killed)
        is ended now and refused if it tries again, so it does not hold the machine's
        connection slots for the tests after it (a drop, not a close, used to end them)."""
        names = [urlparse(u).path.lstrip("/") for u in urls]
        if names:
            quoted = ", ".join(f"'{n}'" for n in names)
            await self._admin(
                *(f'ALTER DATABASE "{n}" WITH ALLOW_CONNECTIONS false' for n in names),
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                f" WHERE datname IN ({quoted}) AND pid <> pg_backend_pid()",
            )
        self.retired += names
        if len(self.retired) >= DROP_BATCH:
            await self._drop_retired()

    async def seal(self, url: str) -> None:
        """Make a database a test filled (one of ``take``'s) a template of its own, for
        ``copies_of``: closed to connections, as a copy needs. It is dropped at the end."""
        name = urlparse(url).path.lstrip("/")
        await self._admin(
            f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false',
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
        )
        self.sealed.append(name)

    async def copies_of(self, url: str, n: int) -> list[str]:
        """``n`` copies of a sealed database (what a test seeded once, for several tests);
        the caller gives them back as it does its own."""
        names = _names(n)
        await self._create(names, urlparse(url).path.lstrip("/"))
        return [self.url(name) for name in names]

    async def close(self) -> None:
        """Drop everything made: the test databases, the copies never taken, the template."""
        self.retired += self.ready
        self.ready = []
        while self.retired:
            await self._drop_retired()
        for name in self.sealed:
            await self._admin(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false')
            await self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.sealed = []
        template, self.template = self.template, None
        if template is not None:
            await self._admin(f'ALTER DATABASE "{template}" WITH IS_TEMPLATE false')
            await self._admin(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')

    async def _drop_retired(self) -> None:
        names, self.retired = self.retired[:DROP_BATCH], self.retired[DROP_BATCH:]
        for i in range(0, len(names), AT_ONCE):
            # FORCE: a connection a test left open (a leak, a process it killed) is ended.
            drops = [
                self._admin(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)')
                for n in names[i : i + AT_ONCE]
            ]
            try:
                await gather_all(drops)
            except (OSError, asyncpg.PostgresError) as e:  # left behind, not a test's failure
                warnings.warn(f"could not drop a test database: {e!r}", stacklevel=1)

    async def _template(self) -> str:
        if self.template is None:
            from podium.store.postgres import PostgresStore

            name = f"{PREFIX}template_{secrets.token_hex(4)}"
            await self._admin(f'CREATE DATABASE "{name}"')
            store = PostgresStore.from_url(self.url(name))
            try:
                await store.migrate()
            finally:
                await store.close()
            # Closed to connections, and any left (there should be none) ended: a copy is
            # refused while a session is open on its template.
            await self._admin(
                f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false',
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
            )
            self.template = name
        return self.template

    async def _create(self, names: list[str], template: str | None) -> None:
        source = f' TEMPLATE "{template}"' if template else ""
        lazy = os.environ.get("PODIUM_TEST_LAZY_COMMIT", "1") == "1"
        await gather_all(
            self._admin(
                f'CREATE DATABASE "{n}"{source}',
                *([f'ALTER DATABASE "{n}" SET synchronous_commit = off'] if lazy else []),
            )
            for n in names
        )

    async def _admin(self, *statements: str) -> None:
        admin = await asyncpg.connect(self.admin_url)
        try:
            for statement in statements:
                await admin.execute(statement)
        finally:
            await admin.close()


def _names(n: int) -> list[str]:
    return [f"{PREFIX}{secrets.token_hex(4)}" for _ in range(n)]
