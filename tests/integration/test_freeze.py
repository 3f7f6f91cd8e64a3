"""The life of a window on every configuration: freeze on time and on demand, exactly
once across restarts, late results after the freeze, final standings, the archive file."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from podium import bootstrap
from podium.archive import standings as archive
from podium.config.settings import Settings
from podium.domain.models import ApiKey, PlayerResult, Target
from podium.workers.freezer import Freezer
from tests.conftest import stored_results
from tests.integration.conftest import KINDS_WITH_SPLIT, Api, Backends, settings_for

CONFIG_KINDS = KINDS_WITH_SPLIT

DAY = 86_400


def _midweek(days_ahead: int) -> int:
    """The midnight (UTC) of the first Wednesday at least ``days_ahead`` days from now: far
    enough ahead that Redis, which expires keys by its own clock, keeps the window's keys,
    and mid-week, so that closing the day never closes the week with it (a Sunday would
    freeze the week too)."""
    d = int(time.time()) // DAY + days_ahead
    d += (2 - (d + 3)) % 7  # 1970-01-01 was a Thursday: weekday (Monday 0) is (d + 3) % 7
    return d * DAY


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


BOARDS = [
    {"name": "day", "window": "day", "freeze_after_s": 600, "exact_top": 3},
    {"name": "week", "window": "week"},
    {"name": "shared", "window": "day", "ties": "shared", "freeze_after_s": 600},
]


@pytest.fixture
def life_settings(config_kind: str, backend_urls: Backends, tmp_path: Path) -> Settings:
    pg, prefix, shards = backend_urls
    return settings_for(
        config_kind,
        f"sqlite:///{tmp_path}/life.db",
        pg,
        prefix,
        shards=shards,
        boards=BOARDS,
        archive={"dir": str(tmp_path / "standings")},
        server={"page_cache_s": 0},
    )


async def _started(s: Settings, clock: Clock) -> bootstrap.Backends:
    b = bootstrap.build(s, clock)
    await b.start()
    return b


def _freezer(b: bootstrap.Backends) -> Freezer:
    """The process's freezer role, a pass at a time (its first pass looks at every window)."""
    return Freezer(b.settings, b.store, b.clock, b.podium.lifecycle)


async def _drain(b: bootstrap.Backends) -> None:
    from podium.workers.updater import Updater

    up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
    while await up.step():
        pass


async def test_freeze_on_time_exactly_once_across_restarts(
    life_settings: Settings, tmp_path: Path
) -> None:
    # A day in the future: Redis expires keys by its own clock.
    day = _midweek(30)
    clock = Clock(day + 3600)
    key = ApiKey("gs", "gs", "h", ("default",))
    b = await _started(life_settings, clock)
    try:
        points = {"a": 50, "b": 80, "c": 80, "d": 10, "e": 65}
        for i, (p, pts) in enumerate(points.items()):
            await b.podium.matches.record(
                key, f"m{i}", "default", day + 60 * i, 60, [PlayerResult(p, pts)]
            )
        await _drain(b)
        # closed, but still inside freeze_after_s: a late result is accepted
        clock.t = day + DAY + 300
        out = await b.podium.matches.record(
            key, "late", "default", day + 7200, 60, [PlayerResult("d", 100)]
        )
        assert out["d"]["day"] == 110
        freezer = _freezer(b)
        assert await freezer.step() == 0  # not due yet
        clock.t = day + DAY + 601
        assert await freezer.step() == 2  # the day and the shared day board
    finally:
        await b.close()

    # a restarted process (new caches, first pass over every window) freezes nothing again
    b = await _started(life_settings, clock)
    try:
        assert await _freezer(b).step() == 0
        window = b.podium.boards.board("day").rule.window_at(day)
        assert window is not None
        frozen = (await b.store.frozen("day"))[window.id]
        assert frozen.players == 5 and frozen.archive is not None
        # after the freeze: refused for the day, still counted for the open week
        after = await b.podium.matches.record(
            key, "after", "default", day + 100, 60, [PlayerResult("a", 1)]
        )
        assert after == {"a": {"week": 51}}
        # the final standings: the top 3 (exact_top), in board order, ties by who was first
        page = await b.podium.reads.page("day", window.id, 0, 10)
        assert [(e.rank, e.player_id, e.points) for e in page.entries] == [
            (1, "d", 110),
            (2, "b", 80),
            (3, "c", 80),
        ]
        me = await b.podium.reads.player_rank("day", "c", 1, window.id)
        assert me.rank == 3 and [n.player_id for n in me.neighbors] == ["b", "c"]
        # the archive holds every player, matches the store's top, and its manifest
        rows = archive.read(tmp_path / "standings", frozen.archive)  # type: ignore[arg-type]
        assert [(r.position, r.player_id, r.points) for r in rows] == [
            (1, "d", 110),
            (2, "b", 80),
            (3, "c", 80),
            (4, "e", 65),
            (5, "a", 50),
        ]
        stored = await b.store.final_page("day", window.id, 1, 10)
        assert stored == rows[:3]
        manifest = json.loads(
            (tmp_path / "standings" / "day" / f"{window.id}.manifest.json").read_text()
        )
        assert manifest["players"] == 5 and manifest["sha256"] == frozen.checksum
        # shared ties are kept in the final standings too
        shared = await b.podium.reads.page("shared", window.id, 0, 10)
        assert [(e.rank, e.player_id) for e in shared.entries][:3] == [(1, "d"), (2, "c"), (2, "b")]
    finally:
        await b.close()


async def test_a_crash_between_freeze_and_archive_is_mended(
    life_settings: Settings, tmp_path: Path
) -> None:
    day = _midweek(31)
    clock = Clock(day + 100)
    key = ApiKey("gs", "gs", "h", ("default",))
    b = await _started(life_settings, clock)
    try:
        await b.podium.matches.record(key, "m", "default", day + 10, 60, [PlayerResult("a", 5)])
        spec = b.podium.boards.board("day")
        window = spec.rule.window_at(day)
        assert window is not None
        # the store froze it, then the process died before the archive was written
        assert await b.store.freeze(spec, window, spec.exact_top, clock.now())
        assert (await b.store.frozen("day"))[window.id].archive is None
    finally:
        await b.close()
    b = await _started(life_settings, clock)
    try:
        assert await _freezer(b).step() == 0  # nothing frozen twice
        info = (await b.store.frozen("day"))[window.id]
        assert info.archive is not None
        assert archive.read(tmp_path / "standings", info.archive)[0].player_id == "a"
    finally:
        await b.close()


async def test_admin_freeze_ends_a_window_early(api: Api) -> None:
    h = api.auth(api.admin_key)
    await api.submit("m1", [("a", 10), ("b", 20)])
    await api.settle()
    day = time.strftime("%Y-%m-%d", time.gmtime())
    r = await api.client.post(f"/v1/admin/boards/day/windows/{day}/freeze", headers=h)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["frozenNow"] is True and body["players"] == 2 and len(body["sha256"]) == 64
    again = (await api.client.post(f"/v1/admin/boards/day/windows/{day}/freeze", headers=h)).json()
    assert again["frozenNow"] is False and again["sha256"] == body["sha256"]
    # results keep counting for the open week and season, never for the frozen day
    r = await api.submit("m2", [("a", 100)])
    assert r.status_code == 200
    assert r.json()["players"][0]["totals"] == {"season": 110, "week": 110}
    await api.settle()
    page = await api.page("day")
    assert [(e["playerId"], e["points"]) for e in page["entries"]] == [("b", 20), ("a", 10)]
    assert (await api.page("week"))["entries"][0] == {"rank": 1, "playerId": "a", "points": 110}
    r = await api.client.post("/v1/admin/boards/day/windows/2026-13-01/freeze", headers=h)
    assert r.status_code == 422
    r = await api.client.post(f"/v1/admin/boards/day/windows/{day}/freeze", headers=api.auth())
    assert r.status_code == 403


async def test_concurrent_results_never_slip_past_a_freeze(
    life_settings: Settings, config_kind: str
) -> None:
    """Results racing a freeze either made the final standings or did not count for the
    window: the frozen window's tallies equal its standings afterwards."""
    day = _midweek(32)
    clock = Clock(day + 100)
    key = ApiKey("gs", "gs", "h", ("default",))
    b = await _started(life_settings, clock)
    try:
        spec = b.podium.boards.board("day")
        window = spec.rule.window_at(day)
        assert window is not None

        async def submit(i: int) -> None:
            # never refused: the week is open even when the day is frozen
            await b.podium.matches.record(
                key, f"r{i}", "default", day + i, 60, [PlayerResult(f"p{i % 7}", 1 + i)]
            )

        async def freeze_soon() -> None:
            await asyncio.sleep(0.01)
            await b.podium.board_admin.freeze("day", window.id)

        await asyncio.gather(*(submit(i) for i in range(60)), freeze_soon())
        tallies: dict[str, int] = {}
        async for batch in b.store.standings("day", window.id):
            tallies |= {s.player_id: s.tally.total for s in batch}
        info = (await b.store.frozen("day"))[window.id]
        assert info.players == len(tallies)
        rows = archive.read(b.settings.archive.dir, info.archive)  # type: ignore[arg-type]
        assert {r.player_id: r.points for r in rows} == tallies
        week = b.podium.boards.board("week").rule.window_at(day)
        assert week is not None
        weekly = [
            (await b.store.totals(f"p{i}", [Target("week", week.id, week.start)]))["week"]
            for i in range(7)
        ]
        assert sum(weekly) == sum(1 + i for i in range(60))  # every result counted for the week
    finally:
        await b.close()


async def test_a_result_for_frozen_windows_only_is_refused(make_api: Any) -> None:
    api: Api = await make_api(boards=[{"name": "day", "window": "day"}])
    day = time.strftime("%Y-%m-%d", time.gmtime())
    h = api.auth(api.admin_key)
    assert (
        await api.client.post(f"/v1/admin/boards/day/windows/{day}/freeze", headers=h)
    ).status_code == 200
    r = await api.submit("m1", [("a", 10)])
    assert r.status_code == 422 and "window" in r.json()["detail"]
    assert await stored_results(api.backends.store, "m1", ["a"]) == {}
