"""podium.client against a real ``podium serve`` on the embedded default: a submission and
its retry, every read a game's client makes, the typed refusals, with the sync and the
async client on the same server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TypeVar

import pytest

from podium.client import (
    AsyncClient,
    Client,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Rank,
    Unauthorized,
)
from tests.e2e.conftest import Server, start_server, stop_server

pytestmark = pytest.mark.slow
T = TypeVar("T")
ENDED = datetime.now(UTC).replace(microsecond=0)
# The windows the matches count for, named on every read: a test that runs across midnight
# UTC (or a Sunday's) still reads where its results went.
WEEK = ENDED.strftime("%G-W%V")
DAY = ENDED.strftime("%Y-%m-%d")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start_server(tmp_path_factory.mktemp("client"))
    yield s
    stop_server(s)


def _eventually(read: Callable[[], T | None]) -> T:
    """The background updater brings a result to the boards soon after its answer."""
    deadline = time.monotonic() + 30
    while True:
        try:
            got = read()
        except NotFound:
            got = None
        if got is not None:
            return got
        assert time.monotonic() < deadline, "not on the board within 30 s"
        time.sleep(0.05)


def test_the_sync_client_submits_retries_and_reads(server: Server) -> None:
    with Client(server.url, server.game_key) as c:
        first = c.submit("cm-1", [("cp1", 140), ("cp2", 95)], duration_seconds=300, ended_at=ENDED)
        assert first.totals("cp1")["week"] == 140
        # The same match sent again (a retry after a lost answer): the stored totals.
        again = c.submit("cm-1", [("cp1", 140), ("cp2", 95)], duration_seconds=300, ended_at=ENDED)
        assert again == first
        with pytest.raises(Conflict) as conflict:
            c.submit("cm-1", [("cp1", 999)], duration_seconds=300, ended_at=ENDED)
        assert conflict.value.status == 409 and "cp1" in conflict.value.detail
        with pytest.raises(Invalid) as invalid:
            c.submit("cm-2", [("cp1", -5)], duration_seconds=300, ended_at=ENDED)
        assert invalid.value.status == 422 and invalid.value.detail

        rank: Rank = _eventually(lambda: c.rank("week", "cp2", neighbors=1, window=WEEK))
        assert (rank.rank, rank.points, rank.exact) == (2, 95, True)
        assert [e.player_id for e in rank.neighbors] == ["cp1", "cp2"]
        # A third player, once the second's neighbors are checked: nobody is below them yet.
        c.submit("cm-3", [("cp3", 50)], duration_seconds=300, ended_at=ENDED)
        ahead = _eventually(lambda: c.rank("week", "cp3", above=2, below=0, window=WEEK))
        assert [e.player_id for e in ahead.neighbors] == ["cp1", "cp2", "cp3"]

        top = c.page("week", limit=2, window=WEEK)
        assert [(e.rank, e.player_id, e.points) for e in top.entries] == [
            (1, "cp1", 140),
            (2, "cp2", 95),
        ]
        assert top.next is not None
        rest = c.page("week", cursor=top.next, window=WEEK)
        assert [e.player_id for e in rest.entries] == ["cp3"]

        assert (
            server.admin("PUT", "/v1/players/cp3/friends", {"friends": ["cp1"]}).status_code == 204
        )
        friends = c.friends("week", "cp3", window=WEEK)
        assert [(e.player_id, e.global_rank) for e in friends.entries] == [("cp1", 1), ("cp3", 3)]

        found = c.lookup("week", ["cp3", "cp1", "nobody"], window=WEEK)
        assert [(f.player_id, f.rank) for f in found.players] == [("cp1", 1), ("cp3", 3)]
        assert found.absent == ("nobody",)

        boards = {b.name: b for b in c.boards()}
        assert {"season", "week", "day"} <= set(boards)
        assert rank.window == WEEK and boards["week"].window == "week"

        with pytest.raises(NotFound):
            c.page("no-such-board")

    with Client(server.url, "not-a-key") as stranger, pytest.raises(Unauthorized):
        stranger.submit("cm-4", [("cp1", 1)], duration_seconds=300)
    with Client(server.url, server.admin_key) as admin, pytest.raises(Forbidden):
        admin.submit("cm-4", [("cp1", 1)], duration_seconds=300)


def test_the_async_client_submits_retries_and_reads(server: Server) -> None:
    async def scenario() -> None:
        async with AsyncClient(server.url, server.game_key) as c:
            match = [("ap1", 300), ("ap2", 200)]
            first = await c.submit("am-1", match, duration_seconds=60, ended_at=ENDED)
            again = await c.submit("am-1", match, duration_seconds=60, ended_at=ENDED)
            assert again == first and first.totals("ap2")["day"] == 200
            rank = None
            deadline = time.monotonic() + 30
            while rank is None:
                try:
                    rank = await c.rank("day", "ap2", neighbors=1, window=DAY)
                except NotFound:
                    assert time.monotonic() < deadline, "not on the board within 30 s"
                    await asyncio.sleep(0.05)
            assert rank.points == 200 and "ap1" in [e.player_id for e in rank.neighbors]
            page = await c.page("day", limit=100, window=DAY)
            assert [e.player_id for e in page.entries][:2] == ["ap1", "ap2"]
            found = await c.lookup("day", ["ap1", "ap2"], window=DAY)
            assert [f.rank for f in found.players] == [1, 2]
            server.admin("PUT", "/v1/players/ap1/friends", {"friends": ["ap2"]})
            friends = await c.friends("day", "ap1", window=DAY)
            assert [e.player_id for e in friends.entries] == ["ap1", "ap2"]

            # A frozen window: in the board's windows with its file, and in the history.
            window = rank.window
            frozen = server.admin("POST", f"/v1/admin/boards/day/windows/{window}/freeze")
            assert frozen.status_code == 200, frozen.text
            windows = await c.windows("day")
            mine = [w for w in windows.windows if w.id == window]
            assert mine and mine[0].state == "frozen" and mine[0].sha256
            history = await c.history("ap2", "day")
            assert [(p.window, p.rank, p.points) for p in history.windows] == [(window, 2, 200)]

    asyncio.run(scenario())
