"""Names on board entries across processes: in production every API process reads them
from a copy next to the ranks before the store, and a change shows everywhere."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podium.index import profile_copy
from tests.integration.conftest import Api


@pytest.fixture
def config_kind() -> str:
    return "production"  # the embedded mode is one process: nothing to share


async def _names(api: Api) -> dict[str, str | None]:
    page = await api.page()
    return {e["playerId"]: e.get("name") for e in page["entries"]}


async def test_a_second_process_reads_names_from_the_copy_and_sees_a_change(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a change the copy holds a marker, and reads go to the store, for this long.
    monkeypatch.setattr(profile_copy, "CHANGED_TTL_S", 1)
    first: Api = await make_api(server={"name_cache_s": 0.2})
    second: Api = await make_api(server={"name_cache_s": 0.2})
    admin = first.auth(first.admin_key)
    r = await first.client.put("/v1/players/p1/profile", json={"name": "Vex"}, headers=admin)
    assert r.status_code == 204
    await first.submit("m1", [("p1", 10), ("p2", 5)])
    await first.settle()
    await asyncio.sleep(1.1)  # the marker of the change above is gone
    assert await _names(first) == {"p1": "Vex", "p2": None}  # fills the copy

    # The second process answers from the copy: not one store lookup for names.
    store = second.podium.store
    lookups = 0
    real = store.profiles

    async def counted(ids: Any) -> Any:
        nonlocal lookups
        lookups += 1
        return await real(ids)

    store.profiles = counted  # type: ignore[method-assign]
    assert await _names(second) == {"p1": "Vex", "p2": None}
    assert lookups == 0

    r = await first.client.put("/v1/players/p1/profile", json={"name": "Vexa"}, headers=admin)
    assert r.status_code == 204
    assert (await _names(first))["p1"] == "Vexa"  # at once where it was made
    await asyncio.sleep(0.3)  # the second process's own hold runs out
    assert (await _names(second))["p1"] == "Vexa"
    assert lookups == 1  # the changed name came from the store, once
