"""Nothing half-written (invariants 2 and 7 of docs/architecture.md), end to end on every
configuration: a refused match writes nothing and claims nothing, and a match is a unit."""

from __future__ import annotations

import time
from typing import Any

import pytest

from podium.config.settings import parse
from podium.errors import ConfigError
from tests.conftest import stored_results
from tests.integration.conftest import KINDS_WITH_SPLIT, Api

CONFIG_KINDS = KINDS_WITH_SPLIT

pytestmark = pytest.mark.asyncio


def problem(r: Any, status: int) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return str(r.json()["detail"])


def season_limit() -> int:
    """|points| on the default season board stay below this."""
    season = parse({}).board("season")
    assert season is not None
    return season.codec.points_limit


async def big_api(make_api: Any) -> tuple[Api, int]:
    """An API whose mode allows one match of the season board's whole capacity."""
    limit = season_limit()
    return await make_api(modes=[{"name": "default", "max_points": limit - 1}]), limit


async def test_a_codec_overflow_refuses_the_whole_match(make_api: Any) -> None:
    api, limit = await big_api(make_api)
    assert (await api.submit("m1", [("a", limit - 1)])).status_code == 200
    # b is listed first and fits; a's season total would not: nothing of the match is written
    detail = problem(await api.submit("m2", [("b", 1), ("a", 1)]), 422)
    assert "season" in detail and "capacity" in detail and str(limit - 1) in detail
    assert await stored_results(api.backends.store, "m2", ["a", "b"]) == {}
    assert await api.backends.store.player_standings("b") == []


async def test_a_rejection_after_the_claim_claims_nothing(make_api: Any) -> None:
    api, limit = await big_api(make_api)
    _, other = await api.podium.keys.create("gs2", ["default"], False)
    assert (await api.submit("m1", [("a", limit - 1)])).status_code == 200
    problem(await api.submit("m2", [("a", 1)]), 422)
    # the match id is free for a correct submission under another key
    r = await api.submit("m2", [("b", 5)], key=other)
    assert r.status_code == 200, r.text


async def test_a_capped_request_claims_nothing(make_api: Any) -> None:
    api: Api = await make_api(modes=[{"name": "default", "max_results_per_player_per_hour": 1}])
    _, other = await api.podium.keys.create("gs2", ["default"], False)
    assert (await api.submit("m1", [("a", 1)])).status_code == 200
    problem(await api.submit("m2", [("a", 1), ("b", 1)]), 429)
    assert await stored_results(api.backends.store, "m2", ["a", "b"]) == {}
    assert (await api.submit("m2", [("b", 1)], key=other)).status_code == 200


async def test_a_conflict_claims_nothing_either(api: Api) -> None:
    _, other = await api.podium.keys.create("gs2", ["default"], False)
    ended = time.time() - 60
    assert (await api.submit("m1", [("a", 1)], ended_at=ended)).status_code == 200
    # a 422 before the claim, and a refused retry of m1 with a different content
    problem(await api.submit("m2", [("a", -5)]), 422)
    problem(await api.submit("m1", [("a", 2)], ended_at=ended), 409)
    assert (await api.submit("m2", [("a", 1)], key=other)).status_code == 200
    problem(await api.submit("m1", [("c", 1)], ended_at=ended, key=other), 403)


async def test_a_match_is_a_unit(make_api: Any) -> None:
    api: Api = await make_api(modes=[{"name": "default"}, {"name": "casual"}])
    _, both = await api.podium.keys.create("gs2", ["default", "casual"], False)
    ended = time.time() - 60
    assert (await api.submit("m1", [("a", 3)], ended_at=ended, key=both)).status_code == 200
    # its mode, endedAt and duration are fixed, even for players not in it yet
    for change in ({"ended_at": ended + 10}, {"duration": 301}, {"mode": "casual"}):
        detail = problem(
            await api.submit("m1", [("b", 1)], key=both, **{"ended_at": ended, **change}), 409
        )
        assert "m1" in detail
    assert await stored_results(api.backends.store, "m1", ["b"]) == {}
    # its results may arrive in parts, each saying the same
    r = await api.submit("m1", [("b", 4)], ended_at=ended, key=both)
    assert r.status_code == 200, r.text
    stored = await stored_results(api.backends.store, "m1", ["a", "b"])
    assert {p: x.points for p, x in stored.items()} == {"a": 3, "b": 4}
    # and a retry of either part is the same answer
    assert (await api.submit("m1", [("a", 3)], ended_at=ended, key=both)).status_code == 200


async def test_config_refuses_a_mode_no_board_can_hold() -> None:
    limit = season_limit()
    parse({"modes": [{"name": "big", "max_points": limit - 1}]})
    with pytest.raises(ConfigError, match=rf"season.*big.*{limit - 1}"):
        parse({"modes": [{"name": "big", "max_points": limit}]})
    with pytest.raises(ConfigError, match="season"):
        parse({"modes": [{"name": "neg", "min_points": -limit}]})
    # a board the mode does not count for does not limit it
    parse(
        {
            "modes": [{"name": "big", "max_points": limit}, {"name": "small"}],
            "boards": [
                {"name": "season", "window": "season", "modes": ["small"]},
                {"name": "all", "window": "all", "ties": "shared"},
            ],
        }
    )
