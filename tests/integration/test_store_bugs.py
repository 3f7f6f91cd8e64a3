"""A bug in the store is a 500 with its traceback in the log, never a 503 that tells the game
server a retry is safe (the store's error table, ``store/*/errors.py``).

Each test breaks the store the way a bug would (a column the code names that the schema does
not have, a malformed statement), on every configuration (the split store too), and reads the
answer and the log.
"""

from __future__ import annotations

import logging
import sqlite3
from urllib.parse import urlparse

import asyncpg
import pytest

from podium.errors import InternalError
from tests.integration.conftest import KINDS_WITH_SPLIT, Api

CONFIG_KINDS = KINDS_WITH_SPLIT


async def _alter(api: Api, sql: str) -> None:
    """Run DDL on the store's databases behind the service's back: the one database, or on
    a store split by player every database that holds players."""
    store = api.podium.settings.store
    url = store.url
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(urlparse(url).path)
        try:
            conn.execute(sql)
            conn.commit()
        finally:
            conn.close()
        return
    for url in store.shards or (store.url,):
        pg = await asyncpg.connect(url)
        try:
            await pg.execute(sql)
        finally:
            await pg.close()


def _assert_bug(r_status: int, headers: dict[str, str], body: dict[str, object]) -> None:
    assert r_status == 500, body
    assert "retry-after" not in headers
    assert body["status"] == 500 and body["title"] == "Internal error"


def _logged_with_traceback(caplog: pytest.LogCaptureFixture, driver: tuple[type, ...]) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]
    assert errors, "the 500 was not logged with its traceback"
    exc = errors[-1].exc_info[1]  # type: ignore[index]
    assert isinstance(exc, InternalError)
    assert isinstance(exc.__cause__, driver), repr(exc.__cause__)


DRIVER_ERRORS = (sqlite3.Error, asyncpg.PostgresError)


async def test_an_undefined_column_on_record_is_a_500(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    assert (await api.submit("m0", [("a", 10)])).status_code == 200
    await _alter(api, "ALTER TABLE tallies RENAME COLUMN total TO total_renamed")
    caplog.set_level(logging.WARNING)
    r = await api.submit("m1", [("b", 10)])
    assert r.headers["content-type"].startswith("application/problem+json")
    _assert_bug(r.status_code, dict(r.headers), r.json())
    _logged_with_traceback(caplog, DRIVER_ERRORS)


async def test_a_malformed_statement_is_a_500(
    api: Api, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The review reads flagged results with these columns; a stray comma makes the
    # statement malformed on both databases.
    import podium.store.postgres.record as pg_record
    import podium.store.sqlite.record as sqlite_record

    for module in (pg_record, sqlite_record):
        monkeypatch.setattr(module, "FLAGGED_COLS", "player_id,, match_id")
    caplog.set_level(logging.WARNING)
    r = await api.client.get(
        "/v1/admin/review", params={"board": "week"}, headers=api.auth(api.admin_key)
    )
    _assert_bug(r.status_code, dict(r.headers), r.json())
    _logged_with_traceback(caplog, DRIVER_ERRORS)
