"""Tournaments over HTTP, on every configuration (embedded, Postgres + Redis, split), on a
clock the test sets: created (and each 422 naming its field, nothing half made), listed and
read; joined (the same join twice, full, ended, racing for the last place); results counted
where the player joined, up to maxAttempts, answered beside the board totals and the same
on a retry; the board and a player's rank read like a board's; ended early by the admin and
at its time by the freezer, exactly once, then read from the final standings."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from podium.domain import events
from podium.domain.tournaments import Tournament
from podium.ports import BoardKey
from podium.serve.app import create_app
from podium.service.tournaments import Specs, TournamentFreezer, freeze_due
from podium.service.wiring import Service
from podium.workers.updater import Updater
from tests.integration.conftest import KINDS_WITH_SPLIT, Backends, settings_for
from tests.integration.test_web import RawStream

CONFIG_KINDS = KINDS_WITH_SPLIT

HOUR = 3600
DAY = 86_400
MODES = [{"name": "default"}, {"name": "event"}]
BOARDS = [{"name": "day", "window": "day", "modes": ["default"]}]


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Cup:
    """The app on a clock the test sets, with a game server's key and an admin's; the
    updater and the tournaments' freezer run a pass at a time, when the test says."""

    def __init__(self, app: Any, client: httpx.AsyncClient, clock: Clock, game: str, admin: str):
        self.app, self.client, self.clock = app, client, clock
        self.settings = app.state.backends.settings
        self.game, self.admin = game, admin
        # A day or two ahead of the real time (Redis expires a run's keys by its own clock, a
        # week after the run's end), at 02:00 UTC: the runs and their late grace then lie
        # within one day board window, whatever the hour the suite runs at (at a whole hour
        # a day ahead, a run made between 23:00 and 00:00 crossed midnight, and a result of
        # its last hour was late for the day board).
        self.t0 = (int(time.time()) // DAY + 2) * DAY + 2 * HOUR

    @property
    def podium(self) -> Service:
        return self.app.state.podium  # type: ignore[no-any-return]

    def auth(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    async def create(self, status: int = 201, **fields: Any) -> Any:
        body = {
            "id": "cup",
            "title": "The Cup",
            "modes": ["default"],
            "startsAt": rfc3339(self.t0),
            "endsAt": rfc3339(self.t0 + 2 * HOUR),
            **fields,
        }
        r = await self.client.post(
            "/v1/admin/tournaments", json=body, headers=self.auth(self.admin)
        )
        assert r.status_code == status, r.text
        return r.json()

    async def join(self, tid: str, player: str, status: int = 201) -> Any:
        r = await self.client.post(
            f"/v1/tournaments/{tid}/entrants",
            json={"playerId": player},
            headers=self.auth(self.game),
        )
        assert r.status_code == status, r.text
        return r.json()

    async def submit(
        self, match_id: str, ended_at: float, results: dict[str, int], mode: str = "default"
    ) -> dict[str, Any]:
        body = {
            "mode": mode,
            "endedAt": rfc3339(ended_at),
            "durationSeconds": 60,
            "results": [{"playerId": p, "points": n} for p, n in results.items()],
        }
        r = await self.client.post(
            f"/v1/matches/{match_id}/results", json=body, headers=self.auth(self.game)
        )
        assert r.status_code == 200, r.text
        await self.apply()
        return {p["playerId"]: p for p in r.json()["players"]}

    async def apply(self) -> None:
        b = self.app.state.backends
        up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock, Specs(b.store, b.clock))
        while await up.step():
            pass
        self.podium.reads.clear_cache()

    async def get(self, path: str, status: int = 200, **params: Any) -> Any:
        r = await self.client.get(path, params=params)
        assert r.status_code == status, r.text
        return r.json()

    async def top(self, tid: str, **params: Any) -> list[tuple[int, str, int]]:
        page = await self.get(f"/v1/tournaments/{tid}/board", **params)
        assert page["board"] == tid
        return [(e["rank"], e["playerId"], e["points"]) for e in page["entries"]]


@pytest.fixture
async def cup(
    config_kind: str, backend_urls: Backends, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[Cup]:
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
    clock = Clock(time.time())
    app = create_app(settings, roles=(), clock=clock)
    async with app.router.lifespan_context(app):
        podium: Service = app.state.podium
        _, game = await podium.keys.create("gs", ["default", "event"], False)
        _, admin = await podium.keys.create("admin", [], True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as client:
            c = Cup(app, client, clock, game, admin)
            clock.t = c.t0 - HOUR
            yield c


async def test_create_list_get_and_what_is_refused(cup: Cup) -> None:
    made = await cup.create(category="weekly", maxAttempts=3, metadata={"prize": "gold"})
    assert made["state"] == "upcoming" and made["nextStartsAt"] == rfc3339(cup.t0)
    assert (made["maxAttempts"], made["entrants"], made["metadata"]) == (3, 0, {"prize": "gold"})
    assert made["run"] is None  # none has begun
    # the same create again is the same create; another definition under its id a 409
    again = await cup.create(200, category="weekly", maxAttempts=3, metadata={"prize": "gold"})
    assert again == made
    conflict = await cup.create(409, category="weekly", maxAttempts=4)
    assert "another definition" in conflict["detail"]

    refused: list[tuple[dict[str, Any], str]] = [
        ({"id": "no spaces"}, "id"),
        ({"id": "b", "endsAt": rfc3339(cup.t0 - 60)}, "endsAt"),
        ({"id": "b", "modes": ["chess"]}, "modes"),
        ({"id": "b", "modes": []}, "modes"),
        ({"id": "b", "maxAttempts": 0}, "maxAttempts"),
        ({"id": "b", "maxEntrants": 0}, "maxEntrants"),
        ({"id": "b", "aggregate": "median"}, "aggregate"),
        ({"id": "b", "startsAt": "tomorrow"}, "startsAt"),
        ({"id": "b", "category": "Has Caps"}, "category"),
        ({"id": "b", "startsAt": None}, "startsAt"),  # required without a schedule
        ({"id": "b", "schedule": "every day"}, "schedule"),
        ({"id": "b", "schedule": "0 * * * *"}, "durationSeconds"),  # required with one
        ({"id": "b", "schedule": "0 * * * *", "durationSeconds": 7200}, "durationSeconds"),
        ({"id": "b", "durationSeconds": 60}, "durationSeconds"),  # only with a schedule
    ]
    for fields, named in refused:
        problem = await cup.create(422, **fields)
        assert named in problem["detail"] or named in str(problem.get("errors")), (fields, problem)
    listed = (await cup.get("/v1/tournaments"))["tournaments"]
    assert [t["id"] for t in listed] == ["cup"]  # nothing half made

    await cup.create(id="open", aggregate="best", startsAt=rfc3339(cup.t0 - HOUR))
    states = {t["id"]: t["state"] for t in (await cup.get("/v1/tournaments"))["tournaments"]}
    assert states == {"cup": "upcoming", "open": "live"}
    live = await cup.get("/v1/tournaments", state="live")
    assert [t["id"] for t in live["tournaments"]] == ["open"]
    weekly = await cup.get("/v1/tournaments", category="weekly")
    assert [t["id"] for t in weekly["tournaments"]] == ["cup"]
    upcoming = await cup.get("/v1/tournaments", state="upcoming")
    assert [t["id"] for t in upcoming["tournaments"]] == ["cup"]
    assert (await cup.get("/v1/tournaments", state="upcoming", category="none"))[
        "tournaments"
    ] == []
    assert (await cup.get("/v1/tournaments", state="ended"))["tournaments"] == []
    await cup.get("/v1/tournaments", 422, state="soon")
    assert (await cup.get("/v1/tournaments/open"))["aggregate"] == "best"
    await cup.get("/v1/tournaments/nope", 404)
    r = await cup.client.post("/v1/admin/tournaments", json={"id": "x"}, headers=cup.auth(cup.game))
    assert r.status_code == 403, r.text


async def test_join_same_full_ended_and_racing(cup: Cup) -> None:
    await cup.create(joinRequired=True, maxEntrants=2)
    first = await cup.join("cup", "a")
    assert first["joined"] and first["tournament"]["entrants"] == 1
    again = await cup.join("cup", "a", 200)
    assert not again["joined"] and again["tournament"]["entrants"] == 1
    await cup.join("cup", "b")
    full = await cup.join("cup", "c", 409)
    assert "full" in full["detail"]
    await cup.join("nope", "a", 404)
    r = await cup.client.post(
        "/v1/tournaments/cup/entrants", json={"playerId": "d"}, headers=cup.auth(cup.admin)
    )
    assert r.status_code == 403, r.text  # players never write; only a game server joins them

    # joins racing for the last three places: three get in, never more
    await cup.create(id="race", joinRequired=True, maxEntrants=3)
    answers = await asyncio.gather(
        *(
            cup.client.post(
                "/v1/tournaments/race/entrants",
                json={"playerId": f"p{i}"},
                headers=cup.auth(cup.game),
            )
            for i in range(12)
        )
    )
    assert sorted(r.status_code for r in answers) == [201] * 3 + [409] * 9
    assert (await cup.get("/v1/tournaments/race"))["entrants"] == 3

    # ended: by the admin (before it began), or by its time
    ended = await cup.client.delete("/v1/admin/tournaments/race", headers=cup.auth(cup.admin))
    assert ended.status_code == 200 and ended.json()["state"] == "ended", ended.text
    assert "ended" in (await cup.join("race", "late", 409))["detail"]
    cup.clock.t = cup.t0 + 2 * HOUR
    assert "ended" in (await cup.join("cup", "late", 409))["detail"]


async def test_results_count_where_joined_up_to_max_attempts(cup: Cup) -> None:
    await cup.create(joinRequired=True, maxAttempts=2)
    await cup.create(id="open", aggregate="best")
    await cup.join("cup", "a")
    cup.clock.t = cup.t0 + 600
    t = cup.t0 + 60

    before = await cup.submit("m0", cup.t0 - 60, {"a": 1})  # before the run: boards only
    assert "tournaments" not in before["a"]
    m1 = await cup.submit("m1", t, {"a": 10, "b": 20})
    assert m1["a"]["tournaments"] == {
        "cup": {"points": 10, "attemptsLeft": 1},
        "open": {"points": 10},
    }
    assert m1["b"]["tournaments"] == {"open": {"points": 20}}  # b never joined the cup
    assert m1["a"]["totals"] == {"day": 11}
    m2 = await cup.submit("m2", t + 60, {"a": 5, "b": 30})
    assert m2["a"]["tournaments"]["cup"] == {"points": 15, "attemptsLeft": 0}
    # past maxAttempts: still counted for the boards (and the open tournament), not the cup
    m3 = await cup.submit("m3", t + 120, {"a": 100})
    assert m3["a"]["tournaments"] == {
        "cup": {"points": 15, "attemptsLeft": 0},
        "open": {"points": 100},
    }
    assert m3["a"]["totals"] == {"day": 116}
    # a retry is the same answer, and changes nothing
    assert await cup.submit("m3", t + 120, {"a": 100}) == m3
    # another mode counts for no tournament of these
    other = await cup.submit("e1", t, {"a": 7}, mode="event")
    assert "tournaments" not in other["a"]

    assert await cup.top("cup") == [(1, "a", 15)]
    assert await cup.top("open") == [(1, "a", 100), (2, "b", 30)]
    me = await cup.get("/v1/tournaments/cup/players/a")
    assert (me["board"], me["rank"], me["points"], me["attemptsLeft"]) == ("cup", 1, 15, 0)
    b = await cup.get("/v1/tournaments/open/players/b", neighbors=1)
    assert (b["rank"], [n["playerId"] for n in b["neighbors"]]) == (2, ["a", "b"])
    assert "attemptsLeft" not in b
    await cup.get("/v1/tournaments/cup/players/b", 404)
    await cup.get("/v1/tournaments/cup/board", 404, run="20000101T0000")
    friends = await cup.get("/v1/tournaments/open/players/b/friends")
    assert [e["playerId"] for e in friends["entries"]] == ["b"]


async def test_ended_early_and_at_its_time_freeze_once(cup: Cup) -> None:
    await cup.create()
    await cup.create(id="short", endsAt=rfc3339(cup.t0 + HOUR))
    cup.clock.t = cup.t0 + 600
    await cup.submit("m1", cup.t0 + 60, {"a": 10, "b": 20})

    r = await cup.client.delete("/v1/admin/tournaments/cup", headers=cup.auth(cup.admin))
    assert r.status_code == 200 and r.json()["state"] == "ended", r.text
    assert r.json()["endedAt"] == rfc3339(cup.clock.t)
    # frozen as if its time were up: a result that ended during the run no longer counts
    late = await cup.submit("m2", cup.t0 + 120, {"a": 50})
    assert late["a"]["tournaments"] == {"short": {"points": 60}}
    assert late["a"]["totals"] == {"day": 60}
    assert await cup.top("cup") == [(1, "b", 20), (2, "a", 10)]  # the final standings
    again = await cup.client.delete("/v1/admin/tournaments/cup", headers=cup.auth(cup.admin))
    assert again.json()["endedAt"] == r.json()["endedAt"]  # the first end stays
    ended = await cup.get("/v1/tournaments", state="ended")
    assert [t["id"] for t in ended["tournaments"]] == ["cup"]

    # at its time: closed, late results taken for the grace, then frozen exactly once
    b = cup.app.state.backends
    cup.clock.t = cup.t0 + HOUR + 60
    assert (await cup.get("/v1/tournaments/short"))["state"] == "ended"
    grace = await cup.submit("m3", cup.t0 + HOUR - 1, {"c": 5})
    assert grace["c"]["tournaments"] == {"short": {"points": 5}}
    assert await freeze_due(b.store, cup.podium.lifecycle, cup.clock) == 0  # not yet due
    cup.clock.t = cup.t0 + HOUR + 600
    assert await freeze_due(b.store, cup.podium.lifecycle, cup.clock) == 1
    assert await freeze_due(b.store, cup.podium.lifecycle, cup.clock) == 0
    after = await cup.submit("m4", cup.t0 + HOUR - 1, {"c": 5})
    assert "tournaments" not in after["c"]
    assert await cup.top("short") == [(1, "a", 60), (2, "b", 20), (3, "c", 5)]
    me = await cup.get("/v1/tournaments/short/players/c")
    assert (me["rank"], me["points"]) == (3, 5)


async def test_a_player_banned_before_the_end_is_in_none_of_its_standings(cup: Cup) -> None:
    """Ending a tournament freezes its run without the players banned before: the final
    board, the standings file and the tournament.ended event prizes are paid from leave
    them out, ranks closed up behind them; an unban after the end changes none of it."""
    await cup.create()
    cup.clock.t = cup.t0 + 600
    await cup.submit("m1", cup.t0 + 60, {"a": 10, "b": 20, "cheat": 99})
    admin = cup.auth(cup.admin)
    r = await cup.client.post("/v1/admin/players/cheat/ban", json={"reason": "x"}, headers=admin)
    assert r.status_code == 204, r.text
    r = await cup.client.delete("/v1/admin/tournaments/cup", headers=admin)
    assert r.status_code == 200, r.text
    run = (await cup.get("/v1/tournaments/cup/runs"))["windows"][0]
    assert (run["state"], run["players"]) == ("frozen", 2)

    async def unchanged() -> None:
        cup.podium.reads.clear_cache()
        assert await cup.top("cup") == [(1, "b", 20), (2, "a", 10)]
        await cup.get("/v1/tournaments/cup/players/cheat", 404)
        lines = (await cup.client.get(run["standings"], params={"format": "jsonl"})).text
        assert [(x["rank"], x["playerId"]) for x in map(json.loads, lines.splitlines())] == [
            (1, "b"),
            (2, "a"),
        ]

    await unchanged()
    store = cup.app.state.backends.store
    now = cup.clock.now()
    while await store.fan_out({events.TOURNAMENT_ENDED: ["http://127.0.0.1:9/h"]}, 0, now, 100):
        pass
    [ended] = await store.claim_deliveries(now + 1, now + 600, 100)
    data = json.loads(events.body(ended.event_type, ended.at, ended.data))["data"]
    assert data["players"] == 2
    assert [(x["rank"], x["playerId"]) for x in data["top"]] == [(1, "b"), (2, "a")]
    r = await cup.client.delete("/v1/admin/players/cheat/ban", headers=admin)
    assert r.status_code == 204, r.text
    await cup.apply()
    await unchanged()


async def test_a_restarted_process_reads_the_runs_it_had(cup: Cup) -> None:
    """The in-process index is rebuilt from the store at every start: runs included."""
    await cup.create(aggregate="best")
    cup.clock.t = cup.t0 + 600
    await cup.submit("m1", cup.t0 + 60, {"a": 10, "b": 20})
    again = create_app(cup.settings, roles=(), clock=cup.clock)
    async with again.router.lifespan_context(again):
        transport = httpx.ASGITransport(app=again)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as client:
            r = await client.get("/v1/tournaments/cup/board")
            assert r.status_code == 200, r.text
            assert [(e["playerId"], e["points"]) for e in r.json()["entries"]] == [
                ("b", 20),
                ("a", 10),
            ]


async def test_a_live_tournament_streams_its_top(cup: Cup) -> None:
    await cup.create()
    await cup.create(id="later", startsAt=rfc3339(cup.t0 + HOUR))
    cup.clock.t = cup.t0 + 600
    await cup.submit("m1", cup.t0 + 60, {"a": 10})
    cup.app.state.streams.heartbeat_s = 0.05
    watch = RawStream(cup.app, "/v1/tournaments/cup/stream")
    assert (await asyncio.wait_for(watch.sent.get(), 5))["status"] == 200
    first = await watch.event(timeout=5)
    assert first["board"] == "cup" and [e["playerId"] for e in first["entries"]] == ["a"]
    await cup.submit("m2", cup.t0 + 120, {"b": 30})
    deadline = time.monotonic() + 10
    while True:  # the broadcaster reads the top about once a second
        frame = await watch.event(timeout=5)
        if [(e["playerId"], e["points"]) for e in frame["entries"]] == [("b", 30), ("a", 10)]:
            break
        assert time.monotonic() < deadline, frame
    watch.hang_up.set()
    await asyncio.wait_for(watch.task, 5)
    for tid, says in (("later", "upcoming, not live"), ("nope", "no tournament")):
        problem = await cup.get(f"/v1/tournaments/{tid}/stream", 404)
        assert says in problem["detail"], problem


async def test_a_recurring_tournament_runs_on_its_schedule(cup: Cup) -> None:
    """Every hour on the hour, for 30 minutes: each run its own standings and attempts, a
    result between two runs counts for none, a past run is read with ?run= and frozen once,
    and an end by the admin freezes the open run and opens no more."""
    made = await cup.create(
        id="hourly", schedule="0 * * * *", durationSeconds=1800, endsAt=None, maxAttempts=2
    )
    assert (made["endsAt"], made["state"], made["run"]) == (None, "upcoming", None)
    assert made["nextStartsAt"] == rfc3339(cup.t0)
    first, second = (time.strftime("%Y%m%dT%H%M", time.gmtime(cup.t0 + h * HOUR)) for h in (0, 1))

    cup.clock.t = cup.t0 + 600
    live = await cup.get("/v1/tournaments/hourly")
    assert (live["state"], live["run"], live["nextStartsAt"]) == (
        "live",
        first,
        rfc3339(cup.t0 + HOUR),
    )
    m1 = await cup.submit("m1", cup.t0 + 60, {"a": 10, "b": 5})
    assert m1["a"]["tournaments"] == {"hourly": {"points": 10, "attemptsLeft": 1}}
    b = cup.app.state.backends
    # a freezer that has had its first pass looks at the last runs only, and finds it due
    freezer = TournamentFreezer(b.store, cup.podium.lifecycle, cup.clock)
    assert await freezer.step() == 0
    cup.clock.t = cup.t0 + 2400  # between two runs
    gap = await cup.submit("gap", cup.t0 + 2000, {"a": 7})
    assert "tournaments" not in gap["a"]
    between = await cup.get("/v1/tournaments/hourly")
    assert (between["state"], between["run"]) == ("upcoming", first)

    cup.clock.t = cup.t0 + HOUR + 600
    m2 = await cup.submit("m2", cup.t0 + HOUR + 60, {"a": 3})
    assert m2["a"]["tournaments"] == {"hourly": {"points": 3, "attemptsLeft": 1}}
    assert await cup.top("hourly") == [(1, "a", 3)]
    assert await cup.top("hourly", run=first) == [(1, "a", 10), (2, "b", 5)]
    assert await freezer.step() == 1  # the first run
    assert await freezer.step() == 0
    assert await freeze_due(b.store, cup.podium.lifecycle, cup.clock) == 0
    assert await cup.top("hourly", run=first) == [(1, "a", 10), (2, "b", 5)]  # final standings
    me = await cup.get("/v1/tournaments/hourly/players/a", run=first)
    assert (me["rank"], me["points"], me["attemptsLeft"]) == (1, 10, 1)
    for run in (time.strftime("%Y%m%dT%H%M", time.gmtime(cup.t0 + 2 * HOUR)), "20000101T0000"):
        await cup.get("/v1/tournaments/hourly/board", 404, run=run)

    r = await cup.client.delete("/v1/admin/tournaments/hourly", headers=cup.auth(cup.admin))
    assert r.status_code == 200 and r.json()["state"] == "ended", r.text
    assert r.json()["nextStartsAt"] is None
    assert await cup.top("hourly", run=second) == [(1, "a", 3)]  # frozen now
    cup.clock.t = cup.t0 + 2 * HOUR + 60  # no run opens after the end
    after = await cup.submit("m3", cup.t0 + 2 * HOUR + 30, {"a": 1})
    assert "tournaments" not in after["a"]


async def test_past_runs_listed_and_their_standings_downloaded(cup: Cup) -> None:
    """A recurring tournament's runs listed newest first, by a cursor, each frozen one with
    its standings file (CSV, the file itself, JSON lines) and the sha256 of that file."""
    await cup.create(id="hourly", schedule="0 * * * *", durationSeconds=1800, endsAt=None)
    first, second = (time.strftime("%Y%m%dT%H%M", time.gmtime(cup.t0 + h * HOUR)) for h in (0, 1))
    cup.clock.t = cup.t0 + 600
    await cup.submit("m1", cup.t0 + 60, {"a": 10, "b": 5, "c": 5})
    listed = await cup.get("/v1/tournaments/hourly/runs")
    assert listed["board"] == "hourly"
    assert [(w["id"], w["state"], w["players"]) for w in listed["windows"]] == [(first, "open", 3)]
    problem = await cup.get(f"/v1/tournaments/hourly/runs/{first}/standings", 409)
    assert "is open" in problem["detail"] and "tournament hourly" in problem["detail"]

    cup.clock.t = cup.t0 + HOUR + 600
    await cup.submit("m2", cup.t0 + HOUR + 60, {"a": 3})
    b = cup.app.state.backends
    assert await freeze_due(b.store, cup.podium.lifecycle, cup.clock) == 1  # the first run
    page = await cup.get("/v1/tournaments/hourly/runs", limit=1)
    assert [(w["id"], w["state"]) for w in page["windows"]] == [(second, "open")]
    rest = await cup.get("/v1/tournaments/hourly/runs", limit=1, cursor=page["next"])
    [run] = rest["windows"]
    assert "next" not in rest
    assert (run["id"], run["state"], run["players"]) == (first, "frozen", 3)
    url = run["standings"]
    assert url == f"/v1/tournaments/hourly/runs/{first}/standings"
    frozen = (await cup.podium.lifecycle.frozen("~hourly"))[first]
    assert run["sha256"] == frozen.checksum and len(run["sha256"]) == 64

    r = await cup.client.get(url, headers={"Accept-Encoding": "identity"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert 'filename="hourly-' in r.headers["content-disposition"]
    # equal points reached in the same second: the board's order of ids (invariant 4)
    assert r.text.strip().splitlines()[1:] == [
        f"1,1,a,10,{cup.t0 + 60}",
        f"2,2,c,5,{cup.t0 + 60}",
        f"3,3,b,5,{cup.t0 + 60}",
    ]
    async with cup.client.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as s:
        assert s.status_code == 200 and s.headers["content-encoding"] == "gzip"
        raw = b"".join([chunk async for chunk in s.aiter_raw()])
    assert hashlib.sha256(raw).hexdigest() == run["sha256"]
    jl = await cup.client.get(url, params={"format": "jsonl"})
    assert jl.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(x)["playerId"] for x in jl.text.splitlines()] == ["a", "c", "b"]

    for path, status in (
        (f"/v1/tournaments/hourly/runs/{second}/standings", 409),  # open
        ("/v1/tournaments/hourly/runs/20000101T0000/standings", 404),  # not a run
        (f"/v1/tournaments/nope/runs/{first}/standings", 404),
        ("/v1/tournaments/nope/runs", 404),
        ("/v1/tournaments/hourly/runs/tomorrow/standings", 422),
    ):
        await cup.get(path, status)
    await cup.get("/v1/tournaments/hourly/runs", 422, cursor="garbage!")


async def test_a_lost_index_gets_its_runs_back_with_the_boards(cup: Cup) -> None:
    """What the mender rebuilds after an index lost its data (and the in-process index at
    start) is every live window, a tournament's live runs among them."""
    await cup.create()
    cup.clock.t = cup.t0 + 600
    await cup.submit("m1", cup.t0 + 60, {"a": 10, "b": 20})
    b = cup.app.state.backends
    run = (await cup.get("/v1/tournaments/cup"))["run"]
    key = BoardKey("~cup", run)
    for p in ("a", "b"):  # gone from the index, as from a Redis that restarted empty
        await b.index.ban([key], p)
        await b.index.unban([key], p)
    cup.podium.reads.clear_cache()
    assert await cup.top("cup") == []
    assert await b.rebuild_live() >= 2
    cup.podium.reads.clear_cache()
    assert await cup.top("cup") == [(1, "b", 20), (2, "a", 10)]


async def test_a_key_joins_only_to_tournaments_of_its_modes(cup: Cup) -> None:
    """A game server's key joins players only to tournaments it could submit results to;
    the admin removes an entrant, which frees the place and stops their results counting
    where joining is required."""
    await cup.create(joinRequired=True, maxEntrants=2)  # modes: default
    _, casual = await cup.podium.keys.create("casual", ["event"], False)
    r = await cup.client.post(
        "/v1/tournaments/cup/entrants", json={"playerId": "a"}, headers=cup.auth(casual)
    )
    assert r.status_code == 403, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "default" in r.json()["detail"] and "event" in r.json()["detail"]
    assert (await cup.get("/v1/tournaments/cup"))["entrants"] == 0  # nothing changed
    await cup.create(id="mixed", modes=["default", "event"], joinRequired=True)
    r = await cup.client.post(
        "/v1/tournaments/mixed/entrants", json={"playerId": "a"}, headers=cup.auth(casual)
    )
    assert r.status_code == 201, r.text  # one mode in common: its results count there

    await cup.join("cup", "a")
    await cup.join("cup", "b")
    await cup.join("cup", "c", 409)  # full
    path = "/v1/admin/tournaments/cup/entrants"
    r = await cup.client.delete(f"{path}/b", headers=cup.auth(cup.game))
    assert r.status_code == 403, r.text  # only the admin removes
    r = await cup.client.delete(f"{path}/b", headers=cup.auth(cup.admin))
    assert r.status_code == 200, r.text
    assert (r.json()["playerId"], r.json()["tournament"]["entrants"]) == ("b", 1)
    again = await cup.client.delete(f"{path}/b", headers=cup.auth(cup.admin))
    assert again.status_code == 404 and "not joined" in again.json()["detail"], again.text
    r = await cup.client.delete(
        "/v1/admin/tournaments/nope/entrants/b", headers=cup.auth(cup.admin)
    )
    assert r.status_code == 404, r.text
    await cup.join("cup", "c")  # the place is free again

    cup.clock.t = cup.t0 + 600
    m1 = await cup.submit("m1", cup.t0 + 60, {"a": 10, "b": 20, "c": 5})
    assert "cup" in m1["a"]["tournaments"] and "cup" in m1["c"]["tournaments"]
    assert "tournaments" not in m1["b"]  # removed: no longer counts there
    assert await cup.top("cup") == [(1, "a", 10), (2, "c", 5)]


async def test_a_tournament_board_pages_both_ways_by_cursor(cup: Cup) -> None:
    await cup.create()
    cup.clock.t = cup.t0 + 600
    await cup.submit("m1", cup.t0 + 60, {p: 100 - i for i, p in enumerate("abcde")})
    first = await cup.get("/v1/tournaments/cup/board", limit=2)
    assert [e["playerId"] for e in first["entries"]] == ["a", "b"]
    second = await cup.get("/v1/tournaments/cup/board", limit=2, cursor=first["next"])
    assert second["board"] == "cup"
    assert [(e["rank"], e["playerId"]) for e in second["entries"]] == [(3, "c"), (4, "d")]
    back = await cup.get("/v1/tournaments/cup/board", limit=2, cursor=second["prev"])
    assert [e["playerId"] for e in back["entries"]] == ["a", "b"]
    # a cursor of another tournament's board is refused, saying why
    await cup.create(id="other")
    problem = await cup.get("/v1/tournaments/other/board", 422, limit=2, cursor=first["next"])
    assert "cursor" in problem["detail"], problem


async def test_times_out_of_range_are_refused_naming_the_field(cup: Cup) -> None:
    for fields, named in (
        ({"startsAt": "0001-01-01T00:00:00Z", "endsAt": "0001-01-01T01:00:00Z"}, "startsAt"),
        ({"startsAt": "1999-12-31T23:00:00Z", "endsAt": "2000-01-01T01:00:00Z"}, "startsAt"),
        ({"startsAt": "9998-06-01T00:00:00Z", "endsAt": "9998-06-02T00:00:00Z"}, "startsAt"),
        ({"endsAt": "9999-01-01T00:00:00Z", "schedule": "0 0 * * *", "durationSeconds": 60},
         "endsAt"),
    ):  # fmt: skip
        problem = await cup.create(422, id="old", **fields)
        assert problem["detail"].startswith(named), problem
        assert "2000-01-01T00:00:00Z" in problem["detail"], problem
    assert (await cup.get("/v1/tournaments"))["tournaments"] == []  # nothing made
    # the earliest start taken, rendered with its four-digit year
    made = await cup.create(
        id="y2k", startsAt="2000-01-01T00:00:00Z", endsAt="2000-01-02T00:00:00Z"
    )
    assert (made["startsAt"], made["endsAt"]) == ("2000-01-01T00:00:00Z", "2000-01-02T00:00:00Z")


async def test_the_list_pages_by_cursor_with_its_filters(cup: Cup) -> None:
    """By start, ``limit`` at a time, ``next`` absent on the last page, every page of a
    filtered list full but the last (ended tournaments between the live ones included)."""
    for i in range(7):  # t0..t6 an hour apart; the even ones weekly
        await cup.create(
            id=f"t{i}",
            startsAt=rfc3339(cup.t0 - 3 * HOUR + i * HOUR),
            endsAt=rfc3339(cup.t0 - 2 * HOUR + i * HOUR + (HOUR if i % 2 else 0)),
            category="weekly" if i % 2 == 0 else None,
        )
    # now: t0..t2 ended, t3 live (and t2's odd sibling t1 ended too), t4..t6 upcoming
    seen, cursor, pages = [], None, 0
    while True:
        params: dict[str, Any] = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = await cup.get("/v1/tournaments", **params)
        seen += [t["id"] for t in page["tournaments"]]
        pages += 1
        if "next" not in page:
            break
        assert len(page["tournaments"]) == 3
        cursor = page["next"]
    assert (seen, pages) == ([f"t{i}" for i in range(7)], 3)
    assert all("endsAt" in t and "endedAt" in t for t in page["tournaments"])  # nulls stay

    async def every(**params: Any) -> list[str]:
        out, cursor = [], None
        while True:
            page = await cup.get(
                "/v1/tournaments", limit=1, **params, **({"cursor": cursor} if cursor else {})
            )
            assert len(page["tournaments"]) == 1 or "next" not in page
            out += [t["id"] for t in page["tournaments"]]
            if "next" not in page:
                return out
            cursor = page["next"]

    states = {t["id"]: t["state"] for t in (await cup.get("/v1/tournaments"))["tournaments"]}
    for state in ("ended", "live", "upcoming"):
        assert await every(state=state) == [i for i, s in states.items() if s == state]
    assert await every(category="weekly", state="upcoming") == [
        i for i in ("t4", "t6") if states[i] == "upcoming"
    ]
    for bad in ({"cursor": "garbage!"}, {"limit": 0}, {"limit": 101}, {"cursor": "W10"}):
        problem = await cup.get("/v1/tournaments", 422, **bad)
        assert problem["status"] == 422, problem


class Loaded:
    """A store whose tournaments each call answered are noted by id: what a path read."""

    def __init__(self, store: Any) -> None:
        self._store, self.ids = store, set[str]()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if not asyncio.iscoroutinefunction(found):
            return found

        async def noted(*args: Any, **kwargs: Any) -> Any:
            answer = await found(*args, **kwargs)
            for t in answer if isinstance(answer, list) else [answer]:
                if isinstance(t, Tournament):
                    self.ids.add(t.id)
            return answer

        return noted


async def test_ended_tournaments_are_out_of_the_record_path_and_the_freezer(cup: Cup) -> None:
    """A result reads only the tournaments still open for its mode; the freezer settles a
    tournament once every run is frozen and no result can count, and walks it no more."""
    for i in range(3):  # ended long ago, played in, frozen by no one yet
        await cup.create(
            id=f"old{i}", startsAt=rfc3339(cup.t0 - 3 * DAY), endsAt=rfc3339(cup.t0 - 2 * DAY)
        )
    await cup.create(id="cup")
    await cup.create(id="other", modes=["event"], endsAt=rfc3339(cup.t0 + DAY))
    b = cup.app.state.backends
    cup.clock.t = cup.t0 - 3 * DAY + 60
    await cup.submit("m0", cup.t0 - 3 * DAY + 30, {"a": 4})
    cup.clock.t = cup.t0 + 600
    seen = Loaded(b.store)
    cup.podium.tournaments.store = seen
    m1 = await cup.submit("m1", cup.t0 + 60, {"a": 10})
    assert m1["a"]["tournaments"] == {"cup": {"points": 10}}
    assert seen.ids == {"cup"}  # neither the ended ones nor another mode's

    walked = Loaded(b.store)
    freezer = TournamentFreezer(walked, cup.podium.lifecycle, cup.clock)
    assert await freezer.step() == 3  # the old ones' runs, at last
    assert walked.ids == {"old0", "old1", "old2", "cup", "other"}  # the first pass: all
    walked.ids.clear()
    assert await freezer.step() == 0
    assert walked.ids == {"cup", "other"}  # the ended ones were settled
    assert await cup.top("old0") == [(1, "a", 4)]  # read from its final standings
    old = await cup.get("/v1/tournaments/old0")
    assert old["state"] == "ended"

    # the cup settles an hour after its late time, and not before
    cup.clock.t = cup.t0 + 2 * HOUR + 600 + HOUR - 1
    assert await freezer.step() == 1
    walked.ids.clear()
    assert await freezer.step() == 0 and "cup" in walked.ids
    cup.clock.t += 1
    await freezer.step()
    walked.ids.clear()
    await freezer.step()
    assert walked.ids == {"other"}
    assert await cup.top("cup") == [(1, "a", 10)]


async def test_a_schedule_too_frequent_is_refused(cup: Cup) -> None:
    """Each run is a window frozen, archived and announced once: a run every minute is a
    422 naming the schedule and the setting (server.tournament_min_period_s, an hour)."""
    for cron in ("* * * * *", "*/30 * * * *", "0,59 * * * *"):
        problem = await cup.create(422, id="fast", schedule=cron, durationSeconds=30, endsAt=None)
        assert problem["detail"].startswith("schedule:"), problem
        assert "tournament_min_period_s" in problem["detail"], problem
    made = await cup.create(id="hourly", schedule="0 * * * *", durationSeconds=60, endsAt=None)
    assert made["schedule"] == "0 * * * *"
