"""Board marks in a store database's outbox (``Marking``, ``domain/marks.py``): on SQLite
and on Postgres, each database of a split store being one of the latter."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from podium.domain.marks import MARK_BOARD, mark_players
from podium.domain.models import Change
from podium.store.postgres import PostgresStore
from podium.store.sqlite import SqliteStore
from tests.contract.test_store import NOW, result, targets


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> tuple[str, str]:
    """A sync fixture, so that the async database fixtures are set up only when needed."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return request.param, url


@pytest.fixture
async def store(backend: tuple[str, str]) -> AsyncIterator[SqliteStore | PostgresStore]:
    kind, url = backend
    s = SqliteStore.from_url(url) if kind == "sqlite" else PostgresStore.from_url(url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def test_marks_come_in_commit_order_between_changes_and_are_no_backlog(
    store: SqliteStore | PostgresStore,
) -> None:
    r = result("m1", 4)
    await store.record(r, targets(r.ended_at), NOW, None)
    players = mark_players(3)
    await store.write_marks(players, "db1", NOW + 1)
    r = result("m2", 5)
    await store.record(r, targets(r.ended_at), NOW + 2, None)
    assert (await store.outbox_backlog(NOW + 10))[0] == 4  # the changes, not the marks
    rows = await store.claim_changes(100, 30, NOW + 10)
    boards = [c.board for c in rows if isinstance(c, Change)]
    assert boards[2:5] == [MARK_BOARD] * 3  # after m1's two rows, before m2's
    marks = [c for c in rows if isinstance(c, Change) and c.board == MARK_BOARD]
    assert [(c.window, c.player_id, c.committed_at) for c in marks] == [
        ("db1", p, NOW + 1) for p in players
    ]
    await store.ack_changes([int(str(c.handle)) for c in rows])
    assert await store.outbox_backlog(NOW + 10) == (0, 0.0)
