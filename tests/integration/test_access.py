"""Who is let in: scoped keys (invariant 5), revocation across API processes, clients behind
a trusted proxy, and the read limit shared by a fleet."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import time
from typing import Any

import asyncpg
import pytest

from podium import metrics
from podium.api.ratelimit import ClientAddress
from podium.domain.models import Scope
from podium.index.redis.ratelimit import RedisReadLimiter
from podium.ports import ScoreStore
from podium.store import common as store_common
from podium.store.postgres import PostgresStore
from podium.store.postgres import pool as postgres_pool
from podium.store.sqlite import SqliteStore
from podium.store.sqlite import db as sqlite_db
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


# -- clients behind a load balancer -----------------------------------------------------------

# httpx's ASGI transport presents every request as from this peer: the proxy, here.
PROXY = "127.0.0.1"
LOW_LIMIT = {"read_rate_per_s": 0.01, "read_burst": 2}


async def _reads(api: Api, headers: list[dict[str, str]]) -> list[int]:
    return [(await api.client.get("/v1/boards", headers=h)).status_code for h in headers]


async def test_clients_behind_a_trusted_proxy_each_have_their_own_bucket(make_api: Any) -> None:
    api: Api = await make_api(server={**LOW_LIMIT, "trusted_proxies": [PROXY, "10.0.0.0/8"]})
    clients = [f"198.51.100.{i}" for i in range(150)]
    # 150 players through one load balancer: none is limited.
    got = await _reads(api, [{"X-Forwarded-For": c} for c in clients])
    assert got == [200] * 150
    # The same through RFC 7239's Forwarded, and through a second proxy of our own.
    got = await _reads(
        api, [{"Forwarded": f'for="[2001:db8::{i:x}]:4711";proto=https'} for i in range(150)]
    )
    assert got == [200] * 150
    got = await _reads(api, [{"X-Forwarded-For": f"203.0.113.{i}, 10.1.2.3"} for i in range(150)])
    assert got == [200] * 150
    # Each is still limited: a third read from one client is refused.
    one = {"X-Forwarded-For": clients[0]}
    assert 429 in await _reads(api, [one, one, one])
    # What a client writes into the header itself is not believed: the proxy appended the
    # address it saw, and that is the one counted.
    forged = [{"X-Forwarded-For": f"192.0.2.{i}, 198.51.100.7"} for i in range(5)]
    assert 429 in await _reads(api, forged)


async def test_forwarded_headers_from_an_untrusted_peer_are_ignored(make_api: Any) -> None:
    api: Api = await make_api(server={**LOW_LIMIT, "trusted_proxies": ["10.0.0.0/8"]})
    got = await _reads(api, [{"X-Forwarded-For": f"198.51.100.{i}"} for i in range(10)])
    assert got[:2] == [200, 200] and set(got[2:]) == {429}  # one bucket: the peer's
    r = await api.client.get("/v1/boards", headers={"Forwarded": "for=198.51.100.99"})
    problem(r, 429)
    assert int(r.headers["Retry-After"]) >= 1


def test_forwarded_hops_are_read_right_to_left() -> None:
    who = ClientAddress(["10.0.0.0/8", "::1"])
    assert who.resolve("10.0.0.1", "1.1.1.1, 2.2.2.2, 10.9.9.9", None) == "2.2.2.2"
    assert who.resolve("10.0.0.1", "10.0.0.2, 10.0.0.3", None) == "10.0.0.1"  # all inside
    assert who.resolve("10.0.0.1", None, "for=1.1.1.1, for=2.2.2.2:80;by=x") == "2.2.2.2"
    assert who.resolve("::1", None, 'for="[2001:db8::1]:443"') == "2001:db8::1"
    assert who.resolve("10.0.0.1", None, "for=unknown") == "unknown"
    assert who.resolve("10.0.0.1", None, None) == "10.0.0.1"
    assert who.resolve("192.0.2.1", "1.1.1.1", "for=2.2.2.2") == "192.0.2.1"  # untrusted
    assert ClientAddress([]).resolve("192.0.2.1", "1.1.1.1", None) == "192.0.2.1"


# -- a limit shared by the fleet -----------------------------------------------------------


async def test_the_read_limit_is_shared_by_every_api_process_on_redis(
    make_api: Any, config_kind: str
) -> None:
    limit = {"read_rate_per_s": 0.01, "read_burst": 4}
    one: Api = await make_api(server=limit)
    two: Api = await make_api(server=limit)
    text = (await one.client.get("/metrics", headers=one.auth(await _ops(one)))).text
    kind = "process" if config_kind == "embedded" else "redis"
    assert f'podium_read_limiter{{kind="{kind}"}} 1.0' in text, text
    h = [{}] * 3
    got = await _reads(one, h) + await _reads(two, h)
    if config_kind == "embedded":
        assert got == [200] * 6  # each process its own bucket: what "process" means
    else:
        assert got == [200] * 4 + [429] * 2  # one bucket for the client, whichever process


async def test_the_shared_limiter_fails_open_when_its_redis_is_down() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    limiter = RedisReadLimiter.from_url(f"redis://127.0.0.1:{port}/0", "podium-test", 0.01, 1)

    def failopen() -> float:
        return metrics.REGISTRY.get_sample_value("podium_read_limiter_failopen_total") or 0.0

    before = failopen()
    try:
        for _ in range(3):
            await limiter.take("198.51.100.1")  # no RateLimited, no error: served
    finally:
        await limiter.close()
    assert failopen() == before + 3


async def _ops(api: Api) -> str:
    _, secret = await api.podium.keys.create("ops", [], scope=Scope.OPS)
    return secret


# -- keys made before scopes -----------------------------------------------------------------

OLD_KEYS = [("k1", "boss", "hash-1", True), ("k2", "eu-1", "hash-2", False)]


def _before_009(dialect: str) -> list[tuple[int, str]]:
    return [(v, sql) for v, sql in store_common.migrations(dialect) if v < 9]


async def test_an_admin_key_made_before_scopes_stays_an_admin_key(
    sqlite_url: str, monkeypatch: Any
) -> None:
    # The schema as it was, with one admin and one game-server key in it...
    monkeypatch.setattr(sqlite_db, "migrations", _before_009)
    store = SqliteStore.from_url(sqlite_url)
    await store.migrate()
    await store.close()
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as c:
        for kid, name, digest, admin in OLD_KEYS:
            modes = "" if admin else "default"
            c.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, 1.0)",
                (kid, name, digest, modes, admin),
            )
    # ... and then migration 009.
    monkeypatch.undo()
    await _check_upgraded(SqliteStore.from_url(sqlite_url))


@pytest.mark.empty_database
async def test_an_admin_key_made_before_scopes_stays_an_admin_key_on_postgres(
    postgres_url: str, monkeypatch: Any
) -> None:
    monkeypatch.setattr(postgres_pool, "migrations", _before_009)
    store = PostgresStore.from_url(postgres_url)
    await store.migrate()
    await store.close()
    c = await asyncpg.connect(postgres_url)
    try:
        for kid, name, digest, admin in OLD_KEYS:
            modes = [] if admin else ["default"]
            await c.execute(
                "INSERT INTO api_keys VALUES ($1, $2, $3, $4, $5, 1.0)",
                kid,
                name,
                digest,
                modes,
                admin,
            )
    finally:
        await c.close()
    monkeypatch.undo()
    await _check_upgraded(PostgresStore.from_url(postgres_url))


async def _check_upgraded(store: ScoreStore) -> None:
    try:
        await store.migrate()
        boss, server = await store.key_by_hash("hash-1"), await store.key_by_hash("hash-2")
        assert boss is not None and boss.scope is Scope.ADMIN and not boss.revoked
        assert server is not None and server.scope is Scope.GAME and server.modes == ("default",)
    finally:
        await store.close()
