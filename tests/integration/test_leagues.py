"""Leagues over HTTP, on every configuration (embedded, Postgres + Redis, split), on a clock
the test sets: a board played in cohorts of 3 in three tiers; players placed first come by
their first result (a retry places no one twice; first results racing never overfill a
cohort); a cohort read by player and by id, exact, with its zones; a ban that takes a
player off their cohort; the window's freeze, which freezes every cohort once however many
freezers run, moves its top up and its bottom down, and writes one cohort.frozen event each
(valid against schemas/); the next window's placement in the new tier; members' names and
avatars from their profiles; a refused match that writes nothing to a live tournament's run
or to a cohort."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from podium.domain import cohorts, events
from podium.domain.windows import index_expiry
from podium.ports import BoardKey
from podium.serve.app import create_app
from podium.service.tournaments import Specs
from podium.service.wiring import Service
from podium.store.postgres.cohorts import STRIPES
from podium.workers.reconciler import Reconciler
from podium.workers.updater import Updater
from tests.integration.conftest import KINDS_WITH_SPLIT, Backends, settings_for

CONFIG_KINDS = KINDS_WITH_SPLIT

HOUR = 3600
DAY = 86_400
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "webhook-event.v1.json").read_text())
VALID = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
BOARDS = [
    {"name": "week", "window": "week"},
    {
        "name": "day",
        "window": "day",
        "cohort_size": 3,
        "tiers": ["bronze", "silver", "gold"],
        "promote": 1,
        "demote": 1,
        "freeze_after_s": 60,
    },
]
HOOK = "http://127.0.0.1:9/hook"  # never called: the events are read from the store
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def plain(cohort_id: str) -> str:
    """A cohort id without the suffix of the database that made it (a split store's)."""
    return re.sub(r"x[0-9a-f]{8}$", "", cohort_id)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class League:
    def __init__(
        self, app: Any, client: httpx.AsyncClient, clock: Clock, game: str, admin: str, kind: str
    ):
        self.app, self.client, self.clock, self.kind = app, client, clock, kind
        self.game, self.admin = game, admin
        # Two days ahead of the real time, at the start of a UTC day: Redis expires a
        # window's keys by its own clock.
        self.day0 = (int(time.time()) // DAY + 2) * DAY

    @property
    def podium(self) -> Service:
        return self.app.state.podium  # type: ignore[no-any-return]

    def auth(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    async def submit(self, match_id: str, ended_at: float, results: dict[str, int]) -> Any:
        body = {
            "mode": "default",
            "endedAt": rfc3339(ended_at),
            "durationSeconds": 60,
            "results": [{"playerId": p, "points": n} for p, n in results.items()],
        }
        r = await self.client.post(
            f"/v1/matches/{match_id}/results", json=body, headers=self.auth(self.game)
        )
        assert r.status_code == 200, r.text
        return r.json()

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

    async def cohort_of(self, player: str, status: int = 200, **params: Any) -> Any:
        return await self.get(f"/v1/boards/day/players/{player}/cohort", status, **params)

    @property
    def stripes(self) -> int:
        """How many stripes of players fill cohorts of their own (Postgres stripes them)."""
        return 1 if self.kind == "embedded" else STRIPES

    def numbers(self, player: str) -> list[int]:
        """The numbers of the first cohorts of a tier that ``player``'s stripe makes."""
        s = cohorts.stripe_of(player, self.stripes)
        return [s + 1 + self.stripes * k for k in range(3)]

    def together(self, n: int, prefix: str) -> list[str]:
        """``n`` player ids placed in the same cohorts first come: of one stripe, and on a
        split store on one database (cohorts are made on the database of the players
        placed, so first come is counted there)."""
        store = self.app.state.backends.store

        def where(p: str) -> tuple[str, int]:
            db = store.url_of(p) if self.kind == "split" else ""
            return db, cohorts.stripe_of(p, self.stripes)

        found: list[str] = []
        i = 0
        while len(found) < n:
            p = f"{prefix}{i}"
            if not found or where(p) == where(found[0]):
                found.append(p)
            i += 1
        return found

    async def events(self) -> list[tuple[str, dict[str, Any]]]:
        """Every cohort.frozen event the store holds, as a delivery would send it."""
        store = self.app.state.backends.store
        now = self.clock.now()
        while await store.fan_out({events.COHORT_FROZEN: [HOOK]}, 0.0, now, 100):
            pass
        due = await store.claim_deliveries(now + 1, now + 600, 1000)
        return [(d.event_id, json.loads(events.body(d.event_type, d.at, d.data))) for d in due]


@pytest.fixture
async def league(
    config_kind: str, backend_urls: Backends, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[League]:
    pg, prefix, shards = backend_urls
    settings = settings_for(
        config_kind,
        sqlite_url,
        pg,
        prefix,
        shards=shards,
        boards=BOARDS,
        archive={"dir": str(tmp_path / "standings")},
        # no reads shed: the racing test's burst of results would make the gate shed them
        server={"page_cache_s": 0, "shed_reads": False},
        webhooks=[{"url": HOOK, "secret": SECRET, "events": ["cohort.frozen"]}],
    )
    clock = Clock(time.time())
    app = create_app(settings, roles=(), clock=clock)
    async with app.router.lifespan_context(app):
        podium: Service = app.state.podium
        _, game = await podium.keys.create("gs", ["default"], False)
        _, admin = await podium.keys.create("admin", [], True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as client:
            lg = League(app, client, clock, game, admin, config_kind)
            clock.t = lg.day0 + 2 * HOUR
            yield lg


async def test_placed_first_come_read_exact_then_frozen_with_moves_once(league: League) -> None:
    lg = league
    t = lg.day0 + HOUR
    players = lg.together(7, "p")
    p0, p1, p2, p3, p4, p5, p6 = players
    await lg.cohort_of(p0, 404)  # placed by a first result, not before
    for i, p in enumerate(players):  # one at a time: first come, first placed
        await lg.submit(f"m{i}", t + i, {p: 10 * (i + 1)})
    # a retry of a first result is the same record: placed once
    again = await lg.submit("m0", t, {p0: 10})
    assert again["players"][0]["totals"] == {"week": 10, "day": 10}
    await lg.apply()

    one, two, three = lg.numbers(p0)
    first = await lg.cohort_of(p0)
    window = first["window"]
    assert plain(first["cohortId"]) == f"{window}.bronze-{one}" and first["tier"] == "bronze"
    assert first["size"] == 3 and first["frozen"] is False
    assert first["endsAt"] == rfc3339(lg.day0 + DAY)
    # the lowest tier promotes its top and demotes no one
    assert (first["promoteThrough"], first["demoteFrom"]) == (1, None)
    assert [(m["rank"], m["playerId"], m["points"]) for m in first["members"]] == [
        (1, p2, 30), (2, p1, 20), (3, p0, 10)
    ]  # fmt: skip
    by_id = await lg.get(f"/v1/boards/day/cohorts/{first['cohortId']}")
    assert by_id == first | {"asOf": by_id["asOf"]}
    ids = {p: plain((await lg.cohort_of(p))["cohortId"]) for p in players}
    assert ids == {
        **dict.fromkeys([p0, p1, p2], f"{window}.bronze-{one}"),
        **dict.fromkeys([p3, p4, p5], f"{window}.bronze-{two}"),
        p6: f"{window}.bronze-{three}",
    }
    # more results move the ranks, never the cohort
    await lg.submit("m-late", t + 100, {p0: 50, p4: 1})
    await lg.apply()
    moved = await lg.cohort_of(p0)
    assert moved["cohortId"] == first["cohortId"]
    assert [m["playerId"] for m in moved["members"]] == [p0, p2, p1]

    problem = await lg.get(f"/v1/boards/day/cohorts/{window}.bronze-99", 404)
    assert "no cohort" in problem["detail"]
    await lg.cohort_of("nobody", 404)
    await lg.get(f"/v1/boards/week/players/{p0}/cohort", 404)  # not a league board
    await lg.get(f"/v1/boards/nope/players/{p0}/cohort", 404)
    await lg.get("/v1/boards/day/cohorts/bad id", 422)
    tiers = await lg.get(f"/v1/players/{p0}/tiers")
    assert tiers["boards"] == [{"board": "day", "tier": "bronze", "cohortId": None, "moved": None}]

    # The window closes; past its late time every cohort freezes, once, however many ask.
    lg.clock.t = lg.day0 + DAY + 61
    leagues = lg.podium.leagues
    counts = await asyncio.gather(*(leagues.freeze_due() for _ in range(3)))
    assert sum(counts) == 3
    assert await leagues.freeze_due() == 0
    # the board's own list of frozen windows (the record path's) leaves its cohorts out
    assert not any(cohorts.is_cohort(w) for w in await lg.podium.lifecycle.store.frozen("day"))
    frozen = await lg.cohort_of(p0, window=window)
    assert frozen["frozen"] is True
    assert [(m["rank"], m["playerId"], m["points"]) for m in frozen["members"]] == [
        (1, p0, 60), (2, p2, 30), (3, p1, 20)
    ]  # fmt: skip
    tiers = await lg.get(f"/v1/players/{p0}/tiers")
    assert tiers["boards"] == [
        {"board": "day", "tier": "silver", "cohortId": first["cohortId"], "moved": "up"}
    ]
    stays = (await lg.get(f"/v1/players/{p1}/tiers"))["boards"][0]
    assert (stays["tier"], stays["moved"]) == ("bronze", "stay")

    sent = await lg.events()
    assert sorted(plain(i) for i, _ in sent) == sorted(
        events.cohort_frozen_id("day", f"{window}.bronze-{n}") for n in (one, two, three)
    )
    for _, body in sent:
        VALID.validate(body)
    data = next(b for i, b in sent if plain(i).endswith(f"bronze-{one}"))["data"]
    assert data["tier"] == "bronze" and data["window"] == window
    assert [(m["playerId"], m["rank"], m["move"], m["nextTier"]) for m in data["members"]] == [
        (p0, 1, "up", "silver"), (p2, 2, "stay", "bronze"), (p1, 3, "stay", "bronze")
    ]  # fmt: skip

    # The next window: the promoted play in silver, the rest in bronze again.
    t2 = lg.day0 + DAY + 2 * HOUR
    lg.clock.t = t2
    await lg.submit("n1", t2, {p0: 5, p3: 4, p1: 3})
    await lg.apply()
    mid = await lg.cohort_of(p0)
    assert mid["tier"] == "silver" and mid["window"] != window
    assert (await lg.cohort_of(p1))["tier"] == "bronze"
    # a middle tier has both zones; in a cohort of one, promotion comes first
    assert (mid["promoteThrough"], mid["demoteFrom"]) == (1, None)


async def test_a_banned_player_leaves_their_cohort(league: League) -> None:
    lg = league
    t = lg.day0 + HOUR
    a, b, c = lg.together(3, "x")
    await lg.submit("m1", t, {a: 10, b: 20, c: 30})
    await lg.apply()
    cohort = (await lg.cohort_of(a))["cohortId"]
    r = await lg.client.post(
        f"/v1/admin/players/{c}/ban", json={"reason": "cheat"}, headers=lg.auth(lg.admin)
    )
    assert r.status_code == 204, r.text
    lg.podium.reads.clear_cache()
    after = await lg.get(f"/v1/boards/day/cohorts/{cohort}")
    assert [m["playerId"] for m in after["members"]] == [b, a]
    lg.clock.t = lg.day0 + DAY + 61
    assert await lg.podium.leagues.freeze_due() == 1
    final = await lg.get(f"/v1/boards/day/cohorts/{cohort}")
    assert [(m["playerId"], m["rank"]) for m in final["members"]] == [(b, 1), (a, 2)]
    assert (await lg.get(f"/v1/players/{c}/tiers"))["boards"][0]["cohortId"] is None


async def test_a_window_frozen_by_hand_freezes_its_cohorts_once(league: League) -> None:
    """An admin's freeze of a league board's window freezes its cohorts with it: their
    final standings, every member's tier for the next window, one cohort.frozen event
    each; a second freeze, and the freezer reaching the window's end later, do none of it
    again."""
    lg = league
    t = lg.day0 + HOUR
    a, b, c, d = lg.together(4, "h")
    await lg.submit("m1", t, {a: 10, b: 20, c: 30})
    await lg.submit("m2", t + 1, {d: 40})
    await lg.apply()
    mine = await lg.cohort_of(a)
    window, cohort = mine["window"], mine["cohortId"]
    other = (await lg.cohort_of(d))["cohortId"]
    assert other != cohort
    admin = lg.auth(lg.admin)
    r = await lg.client.post(f"/v1/admin/boards/day/windows/{window}/freeze", headers=admin)
    assert r.status_code == 200 and r.json()["frozenNow"] is True, r.text

    async def frozen_once() -> None:
        final = await lg.get(f"/v1/boards/day/cohorts/{cohort}")
        assert final["frozen"] is True
        assert [(m["rank"], m["playerId"]) for m in final["members"]] == [(1, c), (2, b), (3, a)]
        assert (await lg.get(f"/v1/boards/day/cohorts/{other}"))["frozen"] is True
        moved = {p: (await lg.get(f"/v1/players/{p}/tiers"))["boards"][0] for p in (a, c, d)}
        assert moved[c] == {"board": "day", "tier": "silver", "cohortId": cohort, "moved": "up"}
        assert moved[a] == {"board": "day", "tier": "bronze", "cohortId": cohort, "moved": "stay"}
        assert moved[d] == {"board": "day", "tier": "silver", "cohortId": other, "moved": "up"}

    await frozen_once()
    # a result of the window after the freeze counts for neither the window nor a cohort
    await lg.submit("m3", t + 2, {a: 500, "week-only": 1})
    await lg.apply()
    await frozen_once()
    again = await lg.client.post(f"/v1/admin/boards/day/windows/{window}/freeze", headers=admin)
    assert again.status_code == 200 and again.json()["frozenNow"] is False, again.text
    lg.clock.t = lg.day0 + DAY + 61
    assert await lg.podium.leagues.freeze_due() == 0
    await frozen_once()
    sent = await lg.events()
    assert sorted(plain(i) for i, _ in sent) == sorted(
        events.cohort_frozen_id("day", plain(x)) for x in (cohort, other)
    )


async def test_first_results_racing_never_overfill_a_cohort(league: League) -> None:
    lg = league
    t = lg.day0 + HOUR
    players = [f"r{i:02d}" for i in range(11)]
    await asyncio.gather(*(lg.submit(f"race-{p}", t, {p: 1}) for p in players))
    # and their retries, racing too: no one placed twice
    await asyncio.gather(*(lg.submit(f"race-{p}", t, {p: 1}) for p in players))
    await lg.apply()
    seen: dict[str, list[str]] = {}
    for p in players:
        c = await lg.cohort_of(p)
        seen.setdefault(c["cohortId"], []).append(p)
        assert p in [m["playerId"] for m in c["members"]]
    assert all(len(v) <= 3 for v in seen.values()) and sum(map(len, seen.values())) == 11
    # at most one cohort left part-full by each stripe (on each database of a split store)
    stripes = {
        (
            lg.kind == "split" and lg.app.state.backends.store.url_of(p),
            cohorts.stripe_of(p, lg.stripes),
        )
        for p in players
    }
    assert sum(len(v) < 3 for v in seen.values()) <= len(stripes), seen
    if lg.kind == "embedded":  # one database, no stripes: first come, one cohort left open
        assert sorted(len(v) for v in seen.values()) == [2, 3, 3, 3], seen
    split = lg.app.state.backends.split
    for cohort_id, members in seen.items():
        c = await lg.get(f"/v1/boards/day/cohorts/{cohort_id}")
        assert sorted(m["playerId"] for m in c["members"]) == sorted(members)
        if split is not None:  # a split index: the whole cohort on one shard, one sorted set
            key = BoardKey("day", cohort_id)
            counts = [await shard.count(key) for shard in split.shards]
            assert sorted(counts)[-1] == len(members) and sum(counts) == len(members), counts


async def test_the_reconciler_mends_a_cohort_key(league: League) -> None:
    """A cohort is a window of its board to the reconciler too: a member lost and a score
    written wrong behind podium's back are put back from the store."""
    lg = league
    t = lg.day0 + HOUR
    a, b, c = lg.together(3, "z")
    await lg.submit("m1", t, {a: 10, b: 20, c: 30})
    await lg.apply()
    cohort = (await lg.cohort_of(a))["cohortId"]
    before = (await lg.get(f"/v1/boards/day/cohorts/{cohort}"))["members"]
    back = lg.app.state.backends
    key = BoardKey("day", cohort)
    w = cohorts.window_of(back.settings.board("day").rule, cohort)
    for p in (a, b):  # ban + unban clears a member and its version: then a plain write lands
        await back.index.ban([key], p)
        await back.index.unban([key], p)
    await back.index.write(key, [(b, 1 << 40)], descending=True, expire_at=index_expiry(w))
    broken = (await lg.get(f"/v1/boards/day/cohorts/{cohort}"))["members"]
    assert [m["playerId"] for m in broken] == [b, c]
    rec = Reconciler(back.settings, back.store, back.index, back.clock, batch=5)
    for _ in range(40):
        await rec.step()
    assert (await lg.get(f"/v1/boards/day/cohorts/{cohort}"))["members"] == before


async def test_a_cohort_of_an_index_that_lost_its_data_is_a_503_never_empty(
    league: League,
) -> None:
    """A Redis that came back empty takes the generation markers with the cohorts: a live
    cohort's read is checked against them as a board read is (``service/ranks/marked.py``), so it
    says the board is being rebuilt rather than answer a cohort with nobody in it."""
    lg = league
    if lg.kind == "embedded":
        pytest.skip("the in-process index is rebuilt before the process serves: no markers")
    import redis.asyncio as aioredis

    from tests.conftest import REDIS_URL

    t = lg.day0 + HOUR
    a, b, c = lg.together(3, "g")
    await lg.submit("m1", t, {a: 10, b: 20, c: 30})
    await lg.apply()
    cohort = (await lg.cohort_of(a))["cohortId"]
    assert len((await lg.get(f"/v1/boards/day/cohorts/{cohort}"))["members"]) == 3
    prefix = lg.app.state.backends.settings.index.prefix
    r = aioredis.Redis.from_url(REDIS_URL)
    try:
        markers = [k async for k in r.scan_iter(match=f"{prefix}*:gen", count=1000)]
        assert markers, "no generation marker under the test's prefix"
        await r.delete(*markers)  # what a restart without its data leaves, as to the markers
    finally:
        await r.aclose()
    gone = await lg.get(f"/v1/boards/day/cohorts/{cohort}", 503)
    assert "rebuilt" in gone["detail"]


async def test_cohort_members_carry_their_names_and_avatars(league: League) -> None:
    """A cohort's members come with the name and avatar of their profile, live and frozen;
    a member with no profile with neither."""
    lg = league
    t = lg.day0 + HOUR
    a, b, c = lg.together(3, "n")
    pictures = {p: f"https://cdn.example.com/avatars/{p}.png" for p in (a, b)}
    for p, name in ((a, "Ada"), (b, "Bo")):
        r = await lg.client.put(
            f"/v1/players/{p}/profile",
            json={"name": name, "avatar": pictures[p]},
            headers=lg.auth(lg.admin),
        )
        assert r.status_code in (200, 204), r.text
    await lg.submit("m1", t, {a: 10, b: 20, c: 30})
    await lg.apply()

    def shown(members: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
        return [(m["playerId"], m.get("name"), m.get("avatar")) for m in members]

    expected = [(c, None, None), (b, "Bo", pictures[b]), (a, "Ada", pictures[a])]
    mine = await lg.cohort_of(a)
    assert shown(mine["members"]) == expected
    by_id = await lg.get(f"/v1/boards/day/cohorts/{mine['cohortId']}")
    assert shown(by_id["members"]) == expected
    lg.clock.t = lg.day0 + DAY + 61
    assert await lg.podium.leagues.freeze_due() >= 1
    final = await lg.get(f"/v1/boards/day/cohorts/{mine['cohortId']}")
    assert final["frozen"] is True and shown(final["members"]) == expected


async def test_a_refused_match_writes_nothing_to_a_tournament_or_a_cohort(
    league: League,
) -> None:
    """A match refused (a 409: a part that disagrees with the match as recorded, or a
    player's result that differs from theirs; a 422: a player twice, an endedAt in the
    future) while a live tournament and the league board both take it writes nothing:
    no tally of the run, of the board window or of a cohort, no one placed, no cohort
    made, no attempt used."""
    lg = league
    t = lg.day0 + HOUR
    made = await lg.client.post(
        "/v1/admin/tournaments",
        json={
            "id": "cup",
            "title": "Cup",
            "modes": ["default"],
            "maxAttempts": 5,
            "startsAt": rfc3339(lg.day0),
            "endsAt": rfc3339(lg.day0 + DAY),
        },
        headers=lg.auth(lg.admin),
    )
    assert made.status_code == 201, made.text
    run = made.json()["run"]
    a, b = lg.together(2, "r")
    first = await lg.submit("m1", t, {a: 10, b: 20})
    assert first["players"][0]["tournaments"]["cup"]["points"] in (10, 20)
    await lg.apply()
    window = (await lg.cohort_of(a))["window"]
    store = lg.app.state.backends.store
    newcomers = ["new1", "new2", "new3"]

    async def written() -> tuple[dict[tuple[str, str], list[Any]], list[Any], dict[str, str]]:
        """Every tally of the run, the board window and its cohorts; its cohorts; and
        where anyone is placed."""
        found = await store.cohorts("day", window)
        rows: dict[tuple[str, str], list[Any]] = {}
        for board, wid in [("~cup", run), ("day", window)] + [("day", c.id) for c in found]:
            rows[(board, wid)] = sorted(
                [tuple(r) async for batch in store.tally_rows(board, wid) for r in batch]
            )
        placed = await store.placements("day", window, [a, b, *newcomers])
        return rows, sorted((c.id, c.members) for c in found), placed

    before = await written()
    assert before[0][("~cup", run)] and set(before[2]) == {a, b}
    cup_a = await lg.get(f"/v1/tournaments/cup/players/{a}")

    def body(ended_at: float, duration: int, results: list[tuple[str, int]]) -> dict[str, Any]:
        return {
            "mode": "default",
            "endedAt": rfc3339(ended_at),
            "durationSeconds": duration,
            "results": [{"playerId": p, "points": n} for p, n in results],
        }

    refused = [
        ("m1", body(t, 120, [("new1", 50)]), 409),  # a part saying another duration
        ("m1", body(t, 60, [(a, 99), ("new2", 5)]), 409),  # a's result differs
        ("m2", body(t, 60, [("new3", 5), ("new3", 6)]), 422),  # a player twice
        ("m3", body(lg.clock.t + HOUR, 60, [(a, 5), ("new3", 5)]), 422),  # in the future
    ]
    for match_id, sent, status in refused:
        r = await lg.client.post(
            f"/v1/matches/{match_id}/results", json=sent, headers=lg.auth(lg.game)
        )
        assert r.status_code == status, (match_id, r.text)
    await lg.apply()
    assert await written() == before
    assert await lg.get(f"/v1/tournaments/cup/players/{a}") == cup_a  # no attempt used
    for p in newcomers:
        await lg.get(f"/v1/tournaments/cup/players/{p}", 404)
        await lg.cohort_of(p, 404)
