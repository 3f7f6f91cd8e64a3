"""The export's order on databases whose collation is not byte order (issue 35).

Every section of an export is read a page at a time by a text key, and a split store merges
its databases' pages in Python's string order (byte order, as SQLite compares text). A
Postgres database created with an ICU or glibc locale orders text otherwise (``en-US``: case
and punctuation weighed after the letters), so its pages came in an order the merge did not
expect, and past a page boundary rows were skipped or read twice. The keys are compared in
byte order on Postgres now (``store/erasure.py``'s ``export_sql``), whatever the database's
collation: the export is in the order docs/export.md names, every row once.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from podium.config.settings import parse
from podium.service import erasure
from podium.service.erasure import Erasures
from podium.store.split import SplitStore
from tests.conftest import need
from tests.pg_databases import PREFIX, Databases

TARGET = "zq-target-1"  # the exported player: every other one names them as a friend
# Friends' ids that differ only in case and punctuation: en-US puts "m_B" before "m-a" and
# "ma" before "mA", byte order the other way round.
NAMERS = ["m-a", "m_B", "mA", "ma", "M1", "m.a", "MA", "m-b", "m:a", "Ma", "m_a", "m1", "mB"]
LOCALE = "en-US"


class Clock:
    """A clock that stands still: every export's ``exportedAt`` the same."""

    def now(self) -> float:
        return 1_792_800_000.0


@pytest.fixture
async def icu_databases(postgres_server: Databases) -> AsyncIterator[list[str]]:
    """Three empty databases collated by ICU's ``en-US``, dropped afterwards."""
    need(postgres_server.admin_url, "PostgreSQL")
    names = [f"{PREFIX}icu_{secrets.token_hex(4)}" for _ in range(3)]
    admin = await asyncpg.connect(postgres_server.admin_url)
    made: list[str] = []
    why = None  # why the server cannot make them: the test is skipped
    try:
        if admin.get_server_version().major < 15:
            why = "CREATE DATABASE ... LOCALE_PROVIDER icu needs Postgres 15"
        for name in names if why is None else []:
            try:
                await admin.execute(
                    f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' "
                    f"LOCALE_PROVIDER icu ICU_LOCALE '{LOCALE}' LOCALE 'C.UTF-8'"
                )
            except asyncpg.FeatureNotSupportedError as e:  # a server built without ICU
                why = f"no ICU collation on this server: {e}"
                break
            made.append(name)
    finally:
        await admin.close()
    urls = [postgres_server.url(n) for n in made]
    try:
        if why is not None:  # the ones made before it are given back all the same
            pytest.skip(why)
        yield urls
    finally:
        await postgres_server.give_back(urls)


async def _export(svc: Erasures, player_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(b"".join([c async for c in await svc.export(player_id)]))
    return doc


async def test_an_export_is_in_byte_order_on_a_database_collated_otherwise(
    icu_databases: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, a, b = icu_databases
    store = SplitStore.from_urls(home, [a, b])
    try:
        await store.migrate()
        # The databases do order these keys otherwise than bytes (else this test is moot).
        collated = await store.router.db(a).run(
            lambda c: c.fetch("SELECT k FROM unnest($1::text[]) AS k ORDER BY k", NAMERS),
            tx=False,
        )
        assert [r["k"] for r in collated] != sorted(NAMERS)
        # friendOf: the rows of other players who name the target, each on their own
        # database, so one section of one player's export is read from both.
        for p in NAMERS:
            await store.set_friends(p, [TARGET])
        on = {u: sorted(p for p in NAMERS if store.url_of(p) == u) for u in (a, b)}
        assert on[a] and on[b], f"the namers all live on one database: {on}"

        svc = Erasures(parse({}), store, [], None, Clock())
        whole = await _export(svc, TARGET)
        for page in (1, 2):
            monkeypatch.setattr(erasure, "PAGE", page)
            doc = await _export(svc, TARGET)
            got = [r["playerId"] for r in doc["friendOf"]]
            assert sorted(got) == sorted(NAMERS), f"PAGE={page}: a row skipped or read twice"
            assert got == sorted(NAMERS), f"PAGE={page}: not in byte order"
            assert doc == whole
        assert [r["playerId"] for r in whole["friendOf"]] == sorted(NAMERS)

        # One database alone, as a single Postgres store: SQLite's order, page by page.
        for url in (a, b):
            alone = Erasures(parse({}), store.router.db(url), [], None, Clock())
            monkeypatch.setattr(erasure, "PAGE", 2)
            doc = await _export(alone, TARGET)
            assert [r["playerId"] for r in doc["friendOf"]] == on[url]
    finally:
        await store.close()
