"""Past windows over HTTP, on every configuration: a board's windows listed newest first
with a cursor, a frozen window's standings downloaded (CSV, the file itself, JSON lines)
with the sha256 the list gives, and a player's history from the kept top and from below it."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from podium.archive import standings as archive
from podium.domain import events
from podium.domain.models import FinalEntry
from podium.serve.app import create_app
from podium.service.wiring import Service
from podium.workers.freezer import Freezer
from podium.workers.updater import Updater
from tests.integration.conftest import KINDS_WITH_SPLIT, Backends, settings_for

CONFIG_KINDS = KINDS_WITH_SPLIT

DAY = 86_400
BOARDS = [
    {"name": "day", "window": "day", "freeze_after_s": 600, "exact_top": 3},
    {"name": "nations", "window": "day", "group_by": "country", "exact_top": 1},
    {"name": "ever", "window": "all"},
]


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


class Past:
    """The app on a clock the test sets, with a game server's key and an admin's; the
    updater and the freezer run a pass at a time, when the test says."""

    def __init__(self, app: Any, client: httpx.AsyncClient, clock: Clock, game: str, admin: str):
        self.app = app
        self.client = client
        self.clock = clock
        self.game = game
        self.admin = admin

    @property
    def podium(self) -> Service:
        return self.app.state.podium  # type: ignore[no-any-return]

    async def submit(self, match_id: str, ended_at: float, results: dict[str, int]) -> None:
        body = {
            "mode": "default",
            "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended_at)),
            "durationSeconds": 60,
            "results": [{"playerId": p, "points": n} for p, n in results.items()],
        }
        r = await self.client.post(
            f"/v1/matches/{match_id}/results",
            json=body,
            headers={"Authorization": f"Bearer {self.game}"},
        )
        assert r.status_code == 200, r.text
        b = self.app.state.backends
        up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
        while await up.step():
            pass

    async def freeze(self, board: str, window: str) -> dict[str, Any]:
        r = await self.client.post(
            f"/v1/admin/boards/{board}/windows/{window}/freeze",
            headers={"Authorization": f"Bearer {self.admin}"},
        )
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    async def country(self, player: str, country: str) -> None:
        r = await self.client.put(
            f"/v1/players/{player}/profile",
            json={"country": country},
            headers={"Authorization": f"Bearer {self.admin}"},
        )
        assert r.status_code == 204, r.text

    async def get(self, path: str, status: int = 200, **params: Any) -> Any:
        r = await self.client.get(path, params=params)
        assert r.status_code == status, r.text
        return r.json()


@pytest.fixture
async def past(
    config_kind: str, backend_urls: Backends, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[Past]:
    pg, prefix, shards = backend_urls
    settings = settings_for(
        config_kind,
        sqlite_url,
        pg,
        prefix,
        shards=shards,
        boards=BOARDS,
        archive={"dir": str(tmp_path / "standings")},
        server={"page_cache_s": 0},
    )
    # A day a month ahead: Redis expires a closed window's keys by its own clock.
    clock = Clock((int(time.time()) // DAY + 30) * DAY + 3600)
    app = create_app(settings, roles=(), clock=clock)
    async with app.router.lifespan_context(app):
        podium: Service = app.state.podium
        _, game = await podium.keys.create("gs", ["default"], False)
        _, admin = await podium.keys.create("admin", [], True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as client:
            yield Past(app, client, clock, game, admin)


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


async def test_windows_listed_standings_downloaded_and_histories(
    past: Past, tmp_path: Path
) -> None:
    d0 = past.clock.t - 3600  # the first day's midnight
    d1, d2 = d0 + DAY, d0 + 2 * DAY
    first = {"a": 50, "b": 80, "c": 80, "d": 10, "e": 65}
    for i, (p, n) in enumerate(first.items()):
        await past.submit(f"m{i}", d0 + 60 * i, {p: n})
    past.clock.t = d1 + 60  # the first day is closed, still taking late results
    await past.submit("m5", d1 + 30, {"a": 5, "f": 7})

    listed = await past.get("/v1/boards/day/windows")
    assert [(w["id"], w["state"], w["players"]) for w in listed["windows"]] == [
        (_day(d1), "open", 2),
        (_day(d0), "closed", 5),
    ]
    assert listed["windows"][1]["start"].endswith("T00:00:00Z") and "next" not in listed
    assert "sha256" not in listed["windows"][1] and "standings" not in listed["windows"][1]
    # not frozen yet: a 409 that says so; a window nobody played, a 404; a bad id, a 422
    for window, status, says in (
        (_day(d0), 409, "not frozen yet"),
        (_day(d1), 409, "is open"),
        (_day(d0 - 5 * DAY), 404, "nobody played"),
        ("2026-W44", 422, "day window"),
    ):
        r = await past.client.get(f"/v1/boards/day/windows/{window}/standings")
        assert r.status_code == status and says in r.json()["detail"], r.text
    assert (await past.client.get("/v1/boards/ever/windows/all/standings")).status_code == 409
    assert (await past.client.get("/v1/boards/nope/windows")).status_code == 404

    frozen = await past.freeze("day", _day(d0))
    listed = await past.get("/v1/boards/day/windows")
    w0 = listed["windows"][1]
    assert (w0["id"], w0["state"], w0["players"]) == (_day(d0), "frozen", 5)
    assert w0["sha256"] == frozen["sha256"] and len(w0["sha256"]) == 64
    url = w0["standings"]
    assert url == f"/v1/boards/day/windows/{_day(d0)}/standings"
    file = tmp_path / "standings" / frozen["archive"]
    stored = file.read_bytes()
    rows = archive.read(tmp_path / "standings", frozen["archive"])
    assert [(r.rank, r.player_id, r.points) for r in rows] == [
        (1, "b", 80),
        (2, "c", 80),
        (3, "e", 65),
        (4, "a", 50),
        (5, "d", 10),
    ]

    # to a client that takes gzip, the CSV is the file itself: its sha256 is the list's
    async with past.client.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as r:
        assert r.status_code == 200
        raw = b"".join([chunk async for chunk in r.aiter_raw()])
        assert r.headers["content-type"].startswith("text/csv")
        assert r.headers["content-encoding"] == "gzip"
        assert r.headers["etag"] == f'"{w0["sha256"]}"'
        digest = hashlib.sha256(raw).digest()
        assert r.headers["repr-digest"] == f"sha-256=:{base64.b64encode(digest).decode()}:"
    assert raw == stored and hashlib.sha256(raw).hexdigest() == w0["sha256"]
    # to one that does not, the same CSV decoded
    r = await past.client.get(url, headers={"Accept-Encoding": "identity"})
    assert r.status_code == 200 and "content-encoding" not in r.headers
    assert r.content == gzip.decompress(stored)
    assert r.headers["etag"] == f'"{w0["sha256"]}-csv"'
    assert r.text.splitlines()[0] == "position,rank,player_id,points,reached_at"
    # JSON lines, by ?format= or by Accept
    for kwargs in (
        {"params": {"format": "jsonl"}},
        {"headers": {"Accept": "application/x-ndjson"}},
    ):
        r = await past.client.get(url, **kwargs)  # type: ignore[arg-type]
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
        assert r.headers["etag"] == f'"{w0["sha256"]}-jsonl"'
        lines = [json.loads(line) for line in r.text.splitlines()]
        assert [
            FinalEntry(x["position"], x["rank"], x["playerId"], x["points"], 0) for x in lines
        ] == [FinalEntry(e.position, e.rank, e.player_id, e.points, 0) for e in rows]
        assert lines[0]["reachedAt"] == time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(rows[0].reached_at)
        )
    assert (await past.client.get(url, params={"format": "xml"})).status_code == 422

    # an API process whose archive directory lacks the file writes it again, the same bytes
    file.unlink()
    past.podium.past._checked.clear()
    r = await past.client.get(url, params={"format": "jsonl"})
    assert r.status_code == 200 and file.read_bytes() == stored
    # and one whose file is not what the freeze wrote never serves it
    file.write_bytes(gzip.compress(b"position,rank,player_id,points,reached_at\n1,1,z,999,0\n"))
    past.podium.past._checked.clear()
    async with past.client.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as r:
        assert r.status_code == 200 and r.headers["etag"] == f'"{w0["sha256"]}"'
        assert b"".join([c async for c in r.aiter_raw()]) == stored

    # history: a player in the kept top (exact_top = 3), and one below it (from the file)
    b_hist = await past.get("/v1/players/b/history", board="day")
    assert b_hist["windows"] == [
        {
            "window": _day(d0),
            "start": w0["start"],
            "end": w0["end"],
            "rank": 1,
            "points": 80,
            "exact": True,
            "source": "standings",
        }
    ]
    a_hist = await past.get("/v1/players/a/history", board="day")
    assert [(h["rank"], h["points"], h["exact"], h["source"]) for h in a_hist["windows"]] == [
        (4, 50, True, "archive")
    ]
    assert (await past.get("/v1/players/f/history", board="day"))["windows"] == []  # not frozen
    assert (await past.get("/v1/players/zz/history", board="day"))["windows"] == []
    await past.get("/v1/players/a/history", 404, board="nope")
    await past.get("/v1/players/a/history", 422)  # board is required

    # a day later the second day freezes on time; newest first, a page at a time
    past.clock.t = d2 + 601
    await past.submit("m6", d2 + 30, {"a": 1})
    b = past.app.state.backends
    await Freezer(b.settings, b.store, b.clock, b.podium.lifecycle).step()  # and nations'
    seen = []
    cursor = None
    while True:
        params = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        page = await past.get("/v1/boards/day/windows", **params)
        seen += [(w["id"], w["state"]) for w in page["windows"]]
        cursor = page.get("next")
        if cursor is None:
            break
    assert seen == [(_day(d2), "open"), (_day(d1), "frozen"), (_day(d0), "frozen")]
    hist = await past.get("/v1/players/a/history", board="day", limit=1)
    assert [(h["window"], h["rank"], h["points"]) for h in hist["windows"]] == [(_day(d1), 2, 5)]
    hist = await past.get("/v1/players/a/history", board="day", limit=1, cursor=hist["next"])
    assert [(h["window"], h["rank"], h["points"], h["source"]) for h in hist["windows"]] == [
        (_day(d0), 4, 50, "archive")
    ]
    assert "next" not in hist
    # a cursor of another board, or none at all, is refused, saying so
    day_cursor = (await past.get("/v1/boards/day/windows", limit=1))["next"]
    r = await past.client.get(
        "/v1/boards/nations/windows", params={"cursor": day_cursor, "group": "FR"}
    )
    assert r.status_code == 422 and "board day" in r.json()["detail"], r.text
    r = await past.client.get("/v1/boards/day/windows", params={"cursor": "not-one"})
    assert r.status_code == 422 and "cursor" in r.json()["detail"]
    ever = await past.get("/v1/boards/ever/windows")
    assert [(w["id"], w["state"], w["players"]) for w in ever["windows"]] == [("all", "open", 6)]
    assert "end" not in ever["windows"][0]


async def test_grouped_boards_list_a_group_and_history_names_it(past: Past) -> None:
    d0 = past.clock.t - 3600
    for p, c in (("a", "FR"), ("b", "FR"), ("c", "DE")):
        await past.country(p, c)
    await past.submit("m1", d0 + 10, {"a": 30, "b": 20, "c": 50})
    r = await past.client.get("/v1/boards/nations/windows")
    assert r.status_code == 422 and "group" in r.json()["detail"]
    r = await past.client.get("/v1/boards/day/windows", params={"group": "FR"})
    assert r.status_code == 422
    fr = f"{_day(d0)}@FR"
    await past.freeze("nations", fr)
    listed = await past.get("/v1/boards/nations/windows", group="FR")
    assert [(w["id"], w["group"], w["state"], w["players"]) for w in listed["windows"]] == [
        (fr, "FR", "frozen", 2)
    ]
    de = await past.get("/v1/boards/nations/windows", group="DE")
    assert [(w["id"], w["state"]) for w in de["windows"]] == [(f"{_day(d0)}@DE", "open")]
    # b is second in France, below the kept top (exact_top = 1): read from the file
    for player, rank, source in (("a", 1, "standings"), ("b", 2, "archive")):
        h = await past.get(f"/v1/players/{player}/history", board="nations")
        assert [(x["window"], x["group"], x["rank"], x["source"]) for x in h["windows"]] == [
            (fr, "FR", rank, source)
        ]
    assert (await past.get("/v1/players/a/history", board="nations", group="DE"))["windows"] == []
    assert (await past.get("/v1/players/c/history", board="nations"))["windows"] == []
    await past.get("/v1/players/a/history", 422, board="day", group="FR")  # no groups there
    r = await past.client.get(f"/v1/boards/nations/windows/{fr}/standings")
    assert r.status_code == 200 and r.text.splitlines()[1].split(",")[2] == "a"
    r = await past.client.get(f"/v1/boards/nations/windows/{_day(d0)}/standings")
    assert r.status_code == 422  # no group named


async def _frozen_event(past: Past, window: str) -> dict[str, Any]:
    """The data of the window's window.frozen event, as a delivery would send it."""
    store = past.app.state.backends.store
    now = past.clock.now()
    while await store.fan_out({events.WINDOW_FROZEN: ["http://127.0.0.1:9/hook"]}, 0.0, now, 100):
        pass
    due = await store.claim_deliveries(now + 1, now + 600, 1000)
    [data] = [
        json.loads(events.body(d.event_type, d.at, d.data))["data"]
        for d in due
        if d.event_id == events.window_frozen_id("day", window)
    ]
    return data  # type: ignore[no-any-return]


@pytest.mark.parametrize("by", ["freezer", "admin"])
async def test_a_player_banned_before_the_freeze_is_in_none_of_its_standings(
    past: Past, tmp_path: Path, by: str
) -> None:
    """A ban holds through the freeze, whoever freezes (the freezer on time, an admin now):
    the banned player is in no final standings, standings file, history or window.frozen
    event, and the ranks close up behind them (a banned first makes the next player
    first). An unban after the freeze changes none of it (frozen standings are final), nor
    does a rebuild of the window, a second freeze, or the file written again from the store
    by a process that lacks it."""
    d0 = past.clock.t - 3600
    day = _day(d0)
    admin = {"Authorization": f"Bearer {past.admin}"}
    await past.submit("m1", d0 + 10, {"a": 50, "b": 80, "c": 90, "d": 10, "e": 65})
    r = await past.client.post("/v1/admin/players/c/ban", json={"reason": "aimbot"}, headers=admin)
    assert r.status_code == 204, r.text
    if by == "freezer":
        past.clock.t = d0 + DAY + 601
        b = past.app.state.backends
        assert await Freezer(b.settings, b.store, b.clock, b.podium.lifecycle).step() >= 1
        frozen = (await past.get("/v1/boards/day/windows"))["windows"]
        [info] = [w for w in frozen if w["id"] == day]
        assert info["state"] == "frozen"
    else:
        info = await past.freeze("day", day)
    assert info["players"] == 4
    url = f"/v1/boards/day/windows/{day}/standings"
    kept = [(1, "b", 80), (2, "e", 65), (3, "a", 50)]  # exact_top = 3
    everyone = [(1, "b"), (2, "e"), (3, "a"), (4, "d")]

    async def unchanged() -> None:
        past.podium.reads.clear_cache()
        page = await past.get("/v1/boards/day", window=day)
        assert [(e["rank"], e["playerId"], e["points"]) for e in page["entries"]] == kept
        mine = await past.get("/v1/boards/day/players/c", 404, window=day)
        assert "final standings" in mine["detail"]
        lines = (await past.client.get(url, params={"format": "jsonl"})).text.splitlines()
        assert [(x["rank"], x["playerId"]) for x in map(json.loads, lines)] == everyone
        csv = (await past.client.get(url, headers={"Accept-Encoding": "identity"})).text
        assert [row.split(",")[2] for row in csv.splitlines()[1:]] == ["b", "e", "a", "d"]
        assert (await past.get("/v1/players/c/history", board="day"))["windows"] == []
        d = (await past.get("/v1/players/d/history", board="day"))["windows"]
        assert [(h["rank"], h["source"]) for h in d] == [(4, "archive")]
        listed = (await past.get("/v1/boards/day/windows"))["windows"]
        assert [w["players"] for w in listed if w["id"] == day] == [4]

    await unchanged()
    data = await _frozen_event(past, day)
    assert data["players"] == 4
    assert [(x["rank"], x["playerId"]) for x in data["top"]] == [(1, "b"), (2, "e"), (3, "a")]

    r = await past.client.delete("/v1/admin/players/c/ban", headers=admin)
    assert r.status_code == 204, r.text
    await past.submit("m2", past.clock.t - 30, {"f": 1})  # and the updater sends c back
    await past.podium.rebuilds.rebuild("day", day)
    again = await past.freeze("day", day)
    assert again["frozenNow"] is False and again["players"] == 4
    # a process whose archive directory lacks the file writes it again from the store
    file = tmp_path / "standings" / again["archive"]
    stored = file.read_bytes()
    file.unlink()
    past.podium.past._checked.clear()
    await unchanged()
    assert file.read_bytes() == stored
