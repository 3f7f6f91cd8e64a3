"""Who is let in: scoped keys (invariant 5), revocation across API processes, clients behind
a trusted proxy, and the read limit shared by a fleet."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.integration.conftest import Api
from tests.integration.test_api import problem


async def _key(api: Api, scope: str, modes: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": f"a {scope} key", "scope": scope}
    if modes is not None:
        body["modes"] = modes
    r = await api.client.post("/v1/admin/keys", json=body, headers=api.auth(api.admin_key))
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


# -- scopes ----------------------------------------------------------------------------------


async def test_only_game_server_keys_submit_results(api: Api) -> None:
    ops = (await _key(api, "ops"))["secret"]
    assert (await api.submit("m1", [("p1", 10)])).status_code == 200
    for key in (api.admin_key, ops):
        body = problem(await api.submit("m2", [("p1", 10)], key=key), 403)
        assert "game-server credential" in body["detail"]
    # Refused before the service: the match id was not claimed for the refused keys.
    assert (await api.submit("m2", [("p1", 10)])).status_code == 200


async def test_each_scope_reaches_only_its_own_routes(api: Api) -> None:
    ops = (await _key(api, "ops"))["secret"]
    ban = "/v1/admin/players/p1/ban"
    # The game server's key and the ops key manage nothing.
    for key in (api.game_key, ops):
        problem(await api.client.post(ban, json={"reason": "x"}, headers=api.auth(key)), 403)
        problem(await api.client.get("/v1/admin/keys", headers=api.auth(key)), 403)
    # The ops figures and /metrics take an ops key, and only that.
    for path in ("/metrics", "/v1/admin/ops"):
        problem(await api.client.get(path), 401)
        for key in (api.game_key, api.admin_key):
            problem(await api.client.get(path, headers=api.auth(key)), 403)
        assert (await api.client.get(path, headers=api.auth(ops))).status_code == 200
    assert (await api.client.get("/healthz")).status_code == 200  # health needs no key


async def test_keys_are_created_with_a_scope_and_their_secret_shown_once(api: Api) -> None:
    game = await _key(api, "game", ["default"])
    assert game["scope"] == "game" and game["modes"] == ["default"]
    assert game["revokedAt"] is None and game["secret"].startswith("pdm_")
    assert (await api.submit("m1", [("p1", 10)], key=game["secret"])).status_code == 200
    listed = (await api.client.get("/v1/admin/keys", headers=api.auth(api.admin_key))).json()
    mine = next(k for k in listed["keys"] if k["id"] == game["id"])
    assert "secret" not in mine and mine["name"] == "a game key"
    assert {k["scope"] for k in listed["keys"]} == {"game", "admin"}
    h = api.auth(api.admin_key)
    bad = [
        {"name": "gs", "scope": "game"},  # a game server needs modes
        {"name": "gs", "scope": "game", "modes": ["nope"]},
        {"name": "ops", "scope": "ops", "modes": ["default"]},  # others submit nothing
        {"name": "x", "scope": "root"},
        {"name": "   ", "scope": "ops"},
        {"name": "a\u0000b", "scope": "ops"},
    ]
    for body in bad:
        problem(await api.client.post("/v1/admin/keys", json=body, headers=h), 422)


# -- revocation --------------------------------------------------------------------------------


async def test_a_revoked_key_is_refused_by_every_process_within_key_cache_s(
    make_api: Any,
) -> None:
    """Two API processes on one store: the one that revokes refuses the key at once, the
    other once its cached copy has expired (``key_cache_s``), and not one request later."""
    cache_s = 0.5
    one: Api = await make_api(server={"key_cache_s": cache_s})
    two: Api = await make_api(server={"key_cache_s": cache_s})
    created = await _key(one, "game", ["default"])
    secret = created["secret"]
    # Both processes have verified (and so cached) the key.
    assert (await one.submit("m1", [("p1", 1)], key=secret)).status_code == 200
    assert (await two.submit("m2", [("p1", 1)], key=secret)).status_code == 200

    h = one.auth(one.admin_key)
    revoked_at = time.monotonic()
    assert (
        await one.client.delete(f"/v1/admin/keys/{created['id']}", headers=h)
    ).status_code == 204
    body = problem(await one.submit("m3", [("p1", 1)], key=secret), 401)
    assert "revoked" in body["detail"]
    # The other process: refused within the bound.
    while True:
        r = await two.submit("m4", [("p1", 1)], key=secret)
        if r.status_code == 401:
            break
        assert r.status_code == 200, r.text
        assert time.monotonic() - revoked_at < cache_s + 0.25, "still let in past key_cache_s"
        await asyncio.sleep(0.05)
    await asyncio.sleep(cache_s)
    problem(await two.submit("m5", [("p1", 1)], key=secret), 401)

    listed = (await two.client.get("/v1/admin/keys", headers=two.auth(two.admin_key))).json()
    mine = next(k for k in listed["keys"] if k["id"] == created["id"])
    assert mine["revokedAt"] is not None
    # Revoking again is harmless; an unknown key is 404.
    again = await two.client.delete(
        f"/v1/admin/keys/{created['id']}", headers=two.auth(two.admin_key)
    )
    assert again.status_code == 204
    problem(await one.client.delete("/v1/admin/keys/0123456789ab", headers=h), 404)


async def test_a_revoked_admin_key_manages_nothing(api: Api) -> None:
    other = await _key(api, "admin")
    h = api.auth(other["secret"])
    assert (await api.client.get("/v1/admin/keys", headers=h)).status_code == 200
    r = await api.client.delete(f"/v1/admin/keys/{other['id']}", headers=api.auth(api.admin_key))
    assert r.status_code == 204
    problem(await api.client.get("/v1/admin/keys", headers=h), 401)
