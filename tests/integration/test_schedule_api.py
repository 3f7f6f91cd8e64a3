"""A schedule board over HTTP, on the embedded and production configurations: results that
end inside a scheduled window count for it, those that end between two windows count only
for the other boards, ``GET /v1/boards`` says when each window ends and the next begins, and
a closed scheduled window is listed, frozen (by an admin, and by the freezer between two
windows) and read from its final standings."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from podium.serve.app import create_app
from podium.service.wiring import Service
from podium.workers.freezer import Freezer
from podium.workers.updater import Updater
from tests.integration.conftest import KINDS_WITH_SPLIT, Backends, settings_for

CONFIG_KINDS = KINDS_WITH_SPLIT

DAY = 86_400
WEEK = 7 * DAY
MODES = [{"name": "default"}, {"name": "event"}]
BOARDS = [
    {
        "name": "weekend",
        "window": "schedule",
        "schedule": "0 18 * * FRI",
        "duration_s": 2 * DAY,
        "freeze_after_s": 600,
    },
    {"name": "day", "window": "day", "modes": ["default"]},
]


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def window_id(t: float) -> str:
    return time.strftime("%Y%m%dT%H%M", time.gmtime(t))


class Weekend:
    """The app on a clock the test sets; the updater and the freezer run a pass at a time."""

    def __init__(self, app: Any, client: httpx.AsyncClient, clock: Clock, game: str, admin: str):
        self.app, self.client, self.clock = app, client, clock
        self.game, self.admin = game, admin

    @property
    def podium(self) -> Service:
        return self.app.state.podium  # type: ignore[no-any-return]

    async def submit(
        self, match_id: str, ended_at: float, results: dict[str, int], mode: str = "default"
    ) -> httpx.Response:
        body = {
            "mode": mode,
            "endedAt": rfc3339(ended_at),
            "durationSeconds": 60,
            "results": [{"playerId": p, "points": n} for p, n in results.items()],
        }
        r = await self.client.post(
            f"/v1/matches/{match_id}/results",
            json=body,
            headers={"Authorization": f"Bearer {self.game}"},
        )
        b = self.app.state.backends
        up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
        while await up.step():
            pass
        return r

    async def get(self, path: str, status: int = 200, **params: Any) -> Any:
        r = await self.client.get(path, params=params)
        assert r.status_code == status, r.text
        return r.json()

    async def board(self, name: str) -> dict[str, Any]:
        boards = (await self.get("/v1/boards"))["boards"]
        return next(b for b in boards if b["name"] == name)  # type: ignore[no-any-return]

    async def top(self, window: str) -> list[tuple[int, str, int]]:
        page = await self.get("/v1/boards/weekend", window=window)
        assert page["window"] == window
        return [(e["rank"], e["playerId"], e["points"]) for e in page["entries"]]


@pytest.fixture
async def weekend(
    config_kind: str, backend_urls: Backends, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[Weekend]:
    pg, prefix, shards = backend_urls
    settings = settings_for(
        config_kind,
        sqlite_url,
        pg,
        prefix,
        shards=shards,
        modes=MODES,
        boards=BOARDS,
        archive={"dir": str(tmp_path / "standings")},
        server={"page_cache_s": 0},
    )
    # A Friday 18:00 a month ahead, an hour in: Redis expires a closed window's keys by its
    # own clock, so every window here is still in the future for it.
    friday = (int(time.time()) // WEEK + 5) * WEEK + DAY + 18 * 3600  # epoch day 0: a Thursday
    assert time.gmtime(friday).tm_wday == 4
    clock = Clock(friday + 3600)
    app = create_app(settings, roles=(), clock=clock)
    async with app.router.lifespan_context(app):
        podium: Service = app.state.podium
        _, game = await podium.keys.create("gs", ["default", "event"], False)
        _, admin = await podium.keys.create("admin", [], True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as client:
            yield Weekend(app, client, clock, game, admin)


async def test_a_weekend_event_from_open_to_frozen(weekend: Weekend) -> None:
    fri = weekend.clock.t - 3600
    sun = fri + 2 * DAY
    first, second = window_id(fri), window_id(fri + WEEK)

    # open: the board says which window, when it ends, and when the next begins
    board = await weekend.board("weekend")
    assert (board["window"], board["currentWindow"]) == ("schedule", first)
    assert (board["endsAt"], board["nextStartsAt"]) == (rfc3339(sun), rfc3339(fri + WEEK))
    published = (await weekend.get("/openapi.json"))["components"]["schemas"]["BoardOut"]
    assert {"endsAt", "nextStartsAt"} <= published["properties"].keys()
    day = await weekend.board("day")
    midnight = (fri // DAY + 1) * DAY
    assert day["endsAt"] == day["nextStartsAt"] == rfc3339(midnight)

    r = await weekend.submit("m1", fri, {"a": 50, "b": 80})  # at the start: inside
    assert r.status_code == 200, r.text
    assert r.json()["players"][0]["totals"] == {"weekend": 50, "day": 50}
    assert (await weekend.submit("m2", fri + 120, {"c": 80})).status_code == 200
    live = await weekend.get("/v1/boards/weekend")
    assert live["window"] == first
    assert [(e["playerId"], e["points"]) for e in live["entries"]] == [
        ("b", 80),
        ("c", 80),
        ("a", 50),
    ]

    # closed, taking late results for freeze_after_s: nothing is open on the board
    weekend.clock.t = sun + 300
    board = await weekend.board("weekend")
    assert (board["currentWindow"], board["endsAt"]) == (None, None)
    assert board["nextStartsAt"] == rfc3339(fri + WEEK)
    late = await weekend.submit("late", sun - 1, {"a": 100})  # its last second
    assert late.json()["players"][0]["totals"]["weekend"] == 150
    # ended at the window's end, and between two windows: only the day board takes it
    for i, t in enumerate((sun, sun + 200)):
        r = await weekend.submit(f"gap{i}", t, {"d": 7})
        assert r.status_code == 200, r.text
        assert r.json()["players"][0]["totals"] == {"day": 7 * (i + 1)}
    # a mode only the schedule board counts: no board takes it, a 422 that says why
    r = await weekend.submit("gap-event", sun + 200, {"d": 7}, mode="event")
    assert r.status_code == 422, r.text
    assert "between two windows of a schedule" in r.json()["detail"]

    # reads: none current (a 404 naming the last and the next), the closed one by id
    r = await weekend.client.get("/v1/boards/weekend")
    assert r.status_code == 404, r.text
    assert first in r.json()["detail"] and rfc3339(fri + WEEK) in r.json()["detail"]
    assert await weekend.top(first) == [(1, "a", 150), (2, "b", 80), (3, "c", 80)]
    for window, status, says in (
        (window_id(fri - 3600), 422, "not a start of the schedule"),
        ("2026-12-04", 422, "not a schedule window id"),
        (second, 404, "opens at"),
    ):
        r = await weekend.client.get("/v1/boards/weekend", params={"window": window})
        assert r.status_code == status and says in r.json()["detail"], r.text

    # listed newest first, then frozen by an admin: final standings from then on
    listed = await weekend.get("/v1/boards/weekend/windows")
    assert [(w["id"], w["state"], w["players"]) for w in listed["windows"]] == [
        (first, "closed", 3)
    ]
    r = await weekend.client.post(
        f"/v1/admin/boards/weekend/windows/{first}/freeze",
        headers={"Authorization": f"Bearer {weekend.admin}"},
    )
    assert r.status_code == 200 and r.json()["players"] == 3, r.text
    assert (await weekend.submit("after", sun - 60, {"e": 1})).json()["players"][0]["totals"] == {
        "day": 1
    }  # frozen: refused for it, still counted where it is open
    assert await weekend.top(first) == [(1, "a", 150), (2, "b", 80), (3, "c", 80)]
    listed = await weekend.get("/v1/boards/weekend/windows")
    assert [(w["id"], w["state"]) for w in listed["windows"]] == [(first, "frozen")]

    # the next weekend: open, then closed past freeze_after_s and frozen by the freezer
    # while no window is open
    weekend.clock.t = fri + WEEK + 60
    assert (await weekend.board("weekend"))["currentWindow"] == second
    b = weekend.app.state.backends
    freezer = Freezer(b.settings, b.store, b.clock, weekend.podium.lifecycle)
    assert await freezer.step() == 2  # its first pass: the day board's Friday and Sunday
    r = await weekend.submit("m3", fri + WEEK + 30, {"f": 9}, mode="event")
    assert r.status_code == 200 and r.json()["players"][0]["totals"] == {"weekend": 9}
    listed = await weekend.get("/v1/boards/weekend/windows")
    assert [(w["id"], w["state"]) for w in listed["windows"]] == [
        (second, "open"),
        (first, "frozen"),
    ]
    weekend.clock.t = sun + WEEK + 599
    assert await freezer.step() == 0  # closed, not due yet
    weekend.clock.t = sun + WEEK + 600
    # found by stepping back from the latest window to begin (the first pass is over)
    assert await freezer.step() == 1
    listed = await weekend.get("/v1/boards/weekend/windows")
    assert [(w["id"], w["state"]) for w in listed["windows"]] == [
        (second, "frozen"),
        (first, "frozen"),
    ]
    assert await weekend.top(second) == [(1, "f", 9)]
