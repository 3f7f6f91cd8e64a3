"""Entry metadata end to end: a result's JSON object (a car, a replay id) shown on the
board entry whose score it set, on every read (a page, a rank with neighbors, friends), on
every configuration; refused with a 422 naming the field, writing nothing, when it is not
an object or past 512 bytes; a retry with it the same in another key order is a retry, one
with other metadata a 409; restored by a rebuild from the store and by the reconciler."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from podium import bootstrap
from podium.bootstrap import Backends
from podium.config.settings import parse
from podium.domain.metadata import METADATA_MAX
from podium.domain.models import PlayerResult
from podium.domain.windows import index_expiry
from podium.errors import InvalidInput
from podium.ports import BoardKey
from podium.workers.reconciler import Reconciler
from podium.workers.updater import Updater
from tests.conftest import REDIS_URL
from tests.integration.conftest import KINDS_WITH_SPLIT, Api

CONFIG_KINDS = KINDS_WITH_SPLIT
BOARDS = [
    {"name": "week", "window": "week"},  # sums: the latest result that moved the total
    {"name": "best", "window": "all", "aggregate": "best"},
    {"name": "last", "window": "week", "aggregate": "last"},
]
MX5 = {"car": "mx5", "replay": "r-1"}
KART = {"car": "kart", "tyres": [1, 2.5, None], "ok": True}


@pytest.fixture
async def api(make_api: Any) -> Api:
    return await make_api(boards=BOARDS)  # type: ignore[no-any-return]


async def post(api: Api, match: str, results: list[dict[str, Any]], **body: Any) -> httpx.Response:
    ended = api.ended.setdefault(match, body.pop("ended_at", time.time()))
    payload = {
        "mode": "default",
        "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended)),
        "durationSeconds": 60,
        "results": results,
        **body,
    }
    return await api.client.post(f"/v1/matches/{match}/results", json=payload, headers=api.auth())


def shown(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["playerId"]: e.get("metadata") for e in entries}


async def test_entries_show_the_metadata_of_the_result_that_set_their_score(api: Api) -> None:
    t = time.time() - 30
    r = await post(
        api,
        "m1",
        [
            {"playerId": "p1", "points": 50, "metadata": MX5},
            {"playerId": "p2", "points": 30},
        ],
        ended_at=t,
    )
    assert r.status_code == 200, r.text
    r = await post(api, "m2", [{"playerId": "p1", "points": 40, "metadata": KART}], ended_at=t + 10)
    assert r.status_code == 200, r.text
    await api.settle()
    # best: 40 did not beat 50, so the first result's; sum and last: the latest's
    assert shown((await api.page("best"))["entries"]) == {"p1": MX5, "p2": None}
    assert shown((await api.page("week"))["entries"]) == {"p1": KART, "p2": None}
    assert shown((await api.page("last"))["entries"]) == {"p1": KART, "p2": None}
    # an entry without metadata has no such field at all
    [p2] = [e for e in (await api.page("best"))["entries"] if e["playerId"] == "p2"]
    assert "metadata" not in p2

    api.podium.reads.clear_cache()
    r = await api.client.get("/v1/boards/best/players/p2", params={"neighbors": 1})
    assert r.status_code == 200, r.text
    assert shown(r.json()["neighbors"]) == {"p1": MX5, "p2": None}

    r = await api.client.put(
        "/v1/players/p2/friends", json={"friends": ["p1"]}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204, r.text
    r = await api.client.get("/v1/boards/week/players/p2/friends")
    assert r.status_code == 200, r.text
    assert shown(r.json()["entries"]) == {"p1": KART, "p2": None}

    # a later result without metadata that sets the score leaves the entry without
    r = await post(api, "m3", [{"playerId": "p1", "points": 60}], ended_at=t + 20)
    assert r.status_code == 200, r.text
    await api.settle()
    assert shown((await api.page("best"))["entries"]) == {"p1": None, "p2": None}
    assert shown((await api.page("week"))["entries"]) == {"p1": None, "p2": None}


@pytest.mark.parametrize(
    "bad, why",
    [
        ([1, 2], "must be a JSON object, not list"),
        ("a car", "must be a JSON object, not str"),
        (7, "must be a JSON object, not int"),
        ({"replay": "x" * (METADATA_MAX - 12)}, "513 bytes"),  # {"replay":"..."}: 13 + n
        ({"name": "é" * 251}, "513 bytes"),  # 251 characters, 2 bytes each in UTF-8
    ],
)
async def test_bad_metadata_is_a_422_naming_the_field_and_writes_nothing(
    api: Api, bad: Any, why: str
) -> None:
    results = [{"playerId": "ok", "points": 5}, {"playerId": "p1", "points": 5, "metadata": bad}]
    r = await post(api, "m1", results)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert "results.1.metadata" in json.dumps(body), body
    assert why in json.dumps(body), body
    assert await api.backends.store.results_of("m1", ["ok", "p1"]) == {}
    assert (await api.backends.store.outbox_backlog(time.time()))[0] == 0
    # the match id was not taken: another server may use it
    _, other = await api.podium.keys.create("gs2", ["default"], False)
    r = await api.client.post(
        "/v1/matches/m1/results",
        json={
            "mode": "default",
            "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(api.ended["m1"])),
            "durationSeconds": 60,
            "results": [{"playerId": "p1", "points": 5}],
        },
        headers=api.auth(other),
    )
    assert r.status_code == 200, r.text


async def test_metadata_exactly_at_the_limit_is_taken(api: Api) -> None:
    exact = {"replay": "x" * (METADATA_MAX - 13)}  # 512 bytes
    wide = {"name": "é" * 250}  # 11 + 500 = 511 bytes, in 261 characters
    assert len(json.dumps(exact, separators=(",", ":")).encode()) == METADATA_MAX
    results = [
        {"playerId": "p1", "points": 5, "metadata": exact},
        {"playerId": "p2", "points": 4, "metadata": wide},
    ]
    r = await post(api, "m1", results)
    assert r.status_code == 200, r.text
    await api.settle()
    assert shown((await api.page("best"))["entries"]) == {"p1": exact, "p2": wide}


async def test_the_service_checks_metadata_whoever_calls_it(api: Api) -> None:
    """Not only the HTTP schema: a call of the use case itself is held to the same rule."""
    key, _ = await api.podium.keys.create("gs-direct", ["default"])
    big = {"x": "y" * METADATA_MAX}
    for bad, why in (([1], "must be a JSON object"), (big, "past the 512 allowed")):
        with pytest.raises(InvalidInput, match=why) as e:
            await api.podium.matches.record(
                key, "m1", "default", int(time.time()), 60, [PlayerResult("p1", 5, bad)]
            )
        assert "results.0.metadata" in str(e.value)
    assert await api.backends.store.results_of("m1", ["p1"]) == {}


async def test_a_retry_is_the_same_object_in_any_key_order(api: Api) -> None:
    one = {"a": 1, "b": {"y": 2, "x": 1}}
    same = {"b": {"x": 1, "y": 2}, "a": 1}
    r1 = await post(api, "m1", [{"playerId": "p1", "points": 5, "metadata": one}])
    r2 = await post(api, "m1", [{"playerId": "p1", "points": 5, "metadata": same}])
    assert r1.status_code == r2.status_code == 200, (r1.text, r2.text)
    assert r1.json() == r2.json()
    for other in ({"a": 2}, None):
        entry: dict[str, Any] = {"playerId": "p1", "points": 5}
        if other is not None:
            entry["metadata"] = other
        r = await post(api, "m1", [entry])
        assert r.status_code == 409, r.text
    await api.settle()
    assert shown((await api.page("best"))["entries"]) == {"p1": one}


# -- restored from the store: a rebuild, and the reconciler ---------------------------------

_T = int(time.time())
_MONDAY = _T - (_T - 345_600) % 604_800  # ISO weeks start on Monday; the epoch a Thursday
NOW = float(max(_T, _MONDAY + 300))


class Clock:
    def now(self) -> float:
        return NOW


@pytest.fixture(params=["memory", "split4", "production"])
def kind(request: pytest.FixtureRequest) -> tuple[str, str | None, str | None]:
    if request.param != "production":
        return request.param, None, None
    pg, prefix = request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_prefix")
    return request.param, pg, prefix


@pytest.fixture
async def backends(
    kind: tuple[str, str | None, str | None], tmp_path: Path
) -> AsyncIterator[Backends]:
    name, pg, prefix = kind
    raw: dict[str, Any] = {"boards": BOARDS}
    if name == "production":
        raw["store"] = {"url": pg}
        raw["index"] = {"url": REDIS_URL, "prefix": prefix}
    else:
        raw["store"] = {"url": f"sqlite:///{tmp_path / 'p.db'}"}
        raw["index"] = {"shards": 4 if name == "split4" else 1}
    b = bootstrap.build(parse(raw), Clock())
    await b.start()
    yield b
    await b.close()


async def _record(b: Backends, match: str, points: dict[str, tuple[int, Any]]) -> None:
    key, _ = await b.podium.keys.create(f"gs-{match}", ["default"])
    results = [PlayerResult(p, n, meta) for p, (n, meta) in points.items()]
    await b.podium.matches.record(key, match, "default", int(NOW) - 100, 60, results)
    up = Updater(b.settings, b.store, b.index, b.copy, b.log, b.clock)
    while await up.step():
        pass


def _key(b: Backends, board: str) -> BoardKey:
    w = b.podium.boards.board(board).rule.window_at(int(NOW))
    assert w is not None
    return BoardKey(board, w.id)


async def _held(b: Backends, board: str) -> dict[str, Any]:
    key = _key(b, board)
    members = [m for m, _ in await b.index.page(key, 0, 100, descending=True)]
    return {m: json.loads(t) for m, t in (await b.index.entry_metadata(key, members)).items()}


async def test_a_rebuild_restores_the_metadata(backends: Backends) -> None:
    b = backends
    await _record(b, "m1", {"p1": (50, MX5), "p2": (30, None), "p3": (20, KART)})
    want = {"p1": MX5, "p3": KART}
    for board in ("week", "best", "last"):
        assert await _held(b, board) == want
        key = _key(b, board)
        await b.index.replace(key, [], expire_at=None, metadata=[])  # the index lost it
        assert await _held(b, board) == {}
        assert await b.podium.rebuilds.rebuild(board, key.window) == 3
        assert await _held(b, board) == want


async def test_the_reconciler_restores_the_metadata(backends: Backends) -> None:
    b = backends
    await _record(b, "m1", {"p1": (50, MX5), "p2": (30, None), "p3": (20, KART)})
    for board in ("week", "last"):
        key = _key(b, board)
        w = b.podium.boards.board(board).rule.window_at(int(NOW))
        assert w is not None
        scores = dict(await b.index.page(key, 0, 100, descending=True))
        # behind podium's back: the scores kept, the metadata wrong, gone, or where none is
        for p, text in (("p1", '{"car":"stolen"}'), ("p2", '{"x":1}')):
            await b.index.write(
                key, [(p, scores[p])], descending=True, expire_at=index_expiry(w),
                versions=[99] if board == "last" else None, metadata=[(99, text)],
            )  # fmt: skip
        await b.index.ban([key], "p3")
        await b.index.unban([key], "p3")
        await b.index.write(key, [("p3", scores["p3"])], descending=True, expire_at=None)
        assert await _held(b, board) == {"p1": {"car": "stolen"}, "p2": {"x": 1}}
    rec = Reconciler(b.settings, b.store, b.index, b.clock, batch=2)
    for _ in range(40):
        await rec.step()
    for board in ("week", "last"):
        assert await _held(b, board) == {"p1": MX5, "p3": KART}
