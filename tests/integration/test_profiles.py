"""Names on the boards come from the index's copy of profiles, over every configuration:
the copy is fed by the outbox (and at once by the process that saved the profile), is
filled from the store at start, and when it is lost, reads take names from the store until
an updater has filled it again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import redis.asyncio as aioredis

from podium.domain.models import Profile
from podium.errors import StoreUnavailable
from podium.workers import updater
from tests.conftest import REDIS_URL
from tests.integration.conftest import KINDS_WITH_SPLIT, Api

CONFIG_KINDS = KINDS_WITH_SPLIT


@pytest.fixture(autouse=True)
def quick_copier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(updater, "PROFILE_CHECK_S", 0.05)


async def _board_of_three(api: Api) -> None:
    for i in range(3):
        assert (await api.submit(f"m{i}", [(f"p{i}", 10 * (i + 1))])).status_code == 200
    await api.settle()


def _store_names_down(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the store refuse names, so that a name shown can only come from the index."""

    async def refuse(player_ids: Sequence[str]) -> dict[str, Profile]:
        raise StoreUnavailable("names are not to be read from the store here")

    monkeypatch.setattr(api.backends.store, "profiles", refuse)


async def _names(api: Api, player: str) -> dict[str, Any]:
    r = await api.client.get(f"/v1/boards/week/players/{player}", params={"neighbors": 1})
    assert r.status_code == 200, r.text
    return {n["playerId"]: n.get("name") for n in r.json()["neighbors"]}


async def test_a_rank_read_takes_names_from_the_index(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _board_of_three(api)
    r = await api.client.put(
        "/v1/players/p1/profile", json={"name": "Vex"}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204
    _store_names_down(api, monkeypatch)
    assert await _names(api, "p1") == {"p2": None, "p1": "Vex", "p0": None}
    page = await api.page("week")
    assert [(e["playerId"], e.get("name")) for e in page["entries"]] == [
        ("p2", None),
        ("p1", "Vex"),
        ("p0", None),
    ]


async def test_the_updater_copies_a_profile_change(api: Api) -> None:
    await _board_of_three(api)
    # Straight into the store, as another process would: only the outbox tells this one.
    await api.backends.store.set_profile(Profile("p2", "Nyx", country="FR"), 0.0)
    await api.settle()
    assert await api.backends.copy.profiles(["p2"]) == {"p2": Profile("p2", "Nyx", None, "FR")}
    assert (await _names(api, "p2"))["p2"] == "Nyx"


async def test_a_new_process_fills_a_missing_copy(
    make_api: Callable[..., Any], config_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(updater, "PROFILE_CHECK_S", 3600.0)  # the first one checks once
    first: Api = await make_api()
    await _board_of_three(first)
    for i in range(3):
        await first.backends.store.set_profile(Profile(f"p{i}", f"N{i}"), 0.0)
    await first.settle()
    if config_kind == "production":
        await _drop_copy(first)  # as if Redis had restarted empty (its boards aside)
    monkeypatch.setattr(updater, "PROFILE_CHECK_S", 0.05)
    # Embedded: the new process fills its own copy at start. Production: its updater
    # finds the shared copy missing and fills it (the first process no longer checks).
    second: Api = await make_api()

    async def complete() -> bool:
        return await second.backends.copy.profiles_complete()

    assert await second.until(complete)
    assert await second.backends.copy.profiles(["p0", "p1", "p2"]) == {
        f"p{i}": Profile(f"p{i}", f"N{i}") for i in range(3)
    }


async def _drop_copy(api: Api) -> None:
    r = aioredis.Redis.from_url(REDIS_URL)
    try:
        prefix = api.podium.settings.index.prefix
        assert await r.delete(f"{prefix}:profiles") == 1
    finally:
        await r.aclose()


# Production only: the in-process copy is lost only with its process, and filled at start.
@pytest.mark.parametrize("config_kind", ["production"])
async def test_a_lost_copy_falls_back_to_the_store_until_it_is_filled_again(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _board_of_three(api)
    await api.podium.player_admin.set_profile(Profile("p0", "Vex"))
    # Hold the copier part way, so the copy stays incomplete while we look.
    held, release = asyncio.Event(), asyncio.Event()
    all_profiles = api.backends.store.all_profiles

    async def slow(after: str, limit: int) -> list[tuple[Profile, int]]:
        held.set()
        await release.wait()
        return await all_profiles(after, limit)

    monkeypatch.setattr(api.backends.store, "all_profiles", slow)
    await _drop_copy(api)
    await asyncio.wait_for(held.wait(), 5)
    assert await api.backends.copy.profiles(["p0"]) is None
    # Names still show, from the store, while the copy is incomplete...
    assert (await _names(api, "p0"))["p0"] == "Vex"
    release.set()

    async def complete() -> bool:
        return await api.backends.copy.profiles_complete()

    # ...and an updater fills it again.
    assert await api.until(complete)
    assert await api.backends.copy.profiles(["p0"]) == {"p0": Profile("p0", "Vex")}
