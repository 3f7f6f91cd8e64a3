"""A rebuild's progress, told to every API process (``GET /v1/admin/upkeep``): a real rebuild
of a board window on Redis, run by another process's backends (as ``podium rebuild`` is a
command of its own), held after its first page so that the API is read while it fills, then
let go: the API says what runs, its phase, the players written out of the store's count and
when it began, then that it is done. An ops key reads it; a game server's key does not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from podium import bootstrap
from podium.ports import TallyRow
from podium.service.upkeep.gapless import GaplessRebuild, Target
from podium.service.upkeep.progress import Published
from tests.integration.conftest import Api
from tests.integration.test_api import problem

PLAYERS = 30


class Held:
    """The store, whose tallies of a window come ten at a time, held after the first ten
    until ``go`` is set."""

    def __init__(self, store: Any, go: asyncio.Event) -> None:
        self._store = store
        self._go = go

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def tally_rows(
        self, board: str, window: str, batch: int = 10_000
    ) -> AsyncIterator[list[TallyRow]]:
        first = True
        async for page in self._store.tally_rows(board, window, batch):
            for i in range(0, len(page), 10):
                yield page[i : i + 10]
                if first:
                    first = False
                    await self._go.wait()


async def _upkeep(api: Api, key: str) -> list[dict[str, Any]]:
    r = await api.client.get("/v1/admin/upkeep", headers=api.auth(key))
    assert r.status_code == 200, r.text
    return r.json()["running"]  # type: ignore[no-any-return]


async def _until(api: Api, key: str, check: Any, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        runs = await _upkeep(api, key)
        if runs and check(runs[0]):
            return runs[0]
        assert time.monotonic() < deadline, runs
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("config_kind", ["production", "split"], indirect=True)
async def test_a_running_rebuild_is_seen_by_every_api_process(api: Api) -> None:
    for i in range(PLAYERS):
        r = await api.submit(f"m{i}", [(f"p{i:02d}", 10 + i)])
        assert r.status_code == 200, r.text
    await api.settle()
    r = await api.client.post(
        "/v1/admin/keys", json={"name": "ops", "scope": "ops"}, headers=api.auth(api.admin_key)
    )
    ops = r.json()["secret"]
    assert await _upkeep(api, ops) == []
    problem(await api.client.get("/v1/admin/upkeep", headers=api.auth()), 403)
    problem(await api.client.get("/v1/admin/upkeep"), 401)

    # Another process: its own clients, its own service, the same store and index.
    other = bootstrap.build(api.backends.settings)
    go = asyncio.Event()
    try:
        assert other.rebuilding is not None
        spec = other.podium.boards.board("week")
        target = Target(spec, other.podium.boards.window(spec, None))
        p = other.podium
        rebuild = GaplessRebuild(
            other.settings, Held(other.store, go), other.rebuilding, p.rebuilds.index,
            other.clock, p.changed,
        )  # fmt: skip

        async def run() -> None:
            async with Published(p.upkeep, other.clock, [target]) as progress:
                await rebuild.run([target], grace_s=0.0, progress=progress)

        started = time.time()
        task = asyncio.create_task(run())
        seen = await _until(api, ops, lambda r: r["done"] == 10)
        assert (seen["kind"], seen["phase"]) == ("rebuild", "filling")
        assert seen["windows"] == [f"week {target.window.id}"]
        assert (seen["window"], seen["total"], seen["windowsDone"]) == (seen["windows"][0], 30, 0)
        assert abs(_epoch(seen["startedAt"]) - started) < 5
        assert await _upkeep(api, api.admin_key)  # the admin's key reads it too
        go.set()
        await asyncio.wait_for(task, 60)
        done = await _until(api, ops, lambda r: r["phase"] == "done")
        assert (done["done"], done["total"], done["windowsDone"]) == (30, 30, 1)
        assert done["id"] == seen["id"] and done["startedAt"] == seen["startedAt"]
    finally:
        go.set()
        await other.close()
    # The board, rebuilt, is the store's.
    page = await api.page("week", limit=50)
    assert len(page["entries"]) == PLAYERS


def _epoch(text: str) -> float:
    return time.mktime(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone


@pytest.mark.parametrize("config_kind", ["production"], indirect=True)
async def test_a_rebuild_the_service_asks_for_tells_its_progress_too(api: Api) -> None:
    """The mender's refill of an index that lost its data goes through ``Rebuilds.rebuild``
    (one window at a time, beside the live one): each tells how far it is, as the command."""
    for i in range(3):
        assert (await api.submit(f"m{i}", [(f"p{i}", 5)])).status_code == 200
    await api.settle()
    boards = api.podium.boards
    window = boards.window(boards.board("week"), None)
    assert await api.podium.rebuilds.rebuild("week", window.id) == 3
    [run] = await _upkeep(api, api.admin_key)
    assert (run["kind"], run["phase"], run["windows"]) == ("rebuild", "done", [f"week {window.id}"])
    assert (run["done"], run["total"], run["windowsDone"]) == (3, 3, 1)
