"""The HTTP holes of the second probe (issue 22): forwarded headers believed from anyone on
loopback, addresses in a 503's detail, a 405 with an empty Allow, HEAD refused, a slash
redirect built from the Host header, JSON bodies under another media type or with a key
twice. The forwarded headers are tested on a real ``podium serve`` (and ``--processes``):
the server in front of the app is what believed them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from podium.config.settings import parse
from podium.serve.app import create_app
from tests.conftest import REDIS_URL
from tests.integration.conftest import Api
from tests.integration.test_api import problem
from tests.ports import free_port
from tests.proxy import Proxy

pytestmark = pytest.mark.asyncio


@pytest.fixture
def config_kind() -> str:
    return "embedded"  # the HTTP surface is the same on every configuration


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- 405 and HEAD ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/v1/boards", "GET, HEAD"),
        ("POST", "/v1/boards/week", "GET, HEAD"),
        ("GET", "/v1/matches/m1/results", "POST"),
        ("PATCH", "/v1/admin/players/p1/ban", "DELETE, POST"),
        ("PUT", "/v1/admin/keys", "GET, HEAD, POST"),
        ("POST", "/healthz", "GET, HEAD"),
        ("POST", "/static/app.js", "GET, HEAD"),
    ],
)
async def test_a_405_names_the_methods_of_its_path(
    api: Api, method: str, path: str, allow: str
) -> None:
    r = await api.client.request(method, path, headers=api.auth(api.admin_key))
    problem(r, 405)
    assert r.headers["allow"] == allow


def _get_paths(api: Api) -> list[str]:
    """A path for every GET route of the app, its parameters filled in with things that
    exist (so that GET answers 200 on most of them)."""
    app = api.client._transport.app  # type: ignore[attr-defined]
    fill = {
        "board": "week",
        "playerId": "a",
        "name": "app.js",
        "window": "2020-W01",
        "tournamentId": "cup",  # live: made by the test below
        "run": "20200101T0000",  # a run of it that never was: a 404, for HEAD as for GET
        "cohortId": "2020-W01.bronze-1",  # no league here: a 404 likewise
        "erasureId": "era_" + "0" * 24,  # no such erasure: a 404
        "matchId": "m1",  # a result to reject that is not there: a 404 likewise
    }
    paths = []
    for route in iter_route_contexts(app.router.routes):
        if "GET" not in (route.methods or ()):
            continue
        path = route.path
        for name, value in fill.items():
            path = path.replace("{" + name + "}", value)
        assert "{" not in path, f"no value to fill in {route.path}"
        paths.append(path)
    return [*paths, "/static/app.js", "/nope", "/v1/boards/nope"]


def _tournament() -> dict[str, Any]:
    """A tournament live for the next hour, of the mode every test here submits."""
    now = time.time()
    at = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    return {
        "id": "cup",
        "title": "Cup",
        "modes": ["default"],
        "startsAt": at(now - 60),
        "endsAt": at(now + 3600),
    }


async def test_head_answers_every_get_route_as_get_without_a_body(api: Api) -> None:
    made = await api.client.post(
        "/v1/admin/tournaments", json=_tournament(), headers=api.auth(api.admin_key)
    )
    assert made.status_code == 201, made.text
    assert (await api.submit("m1", [("a", 5), ("b", 3)])).status_code == 200
    await api.settle()
    paths = _get_paths(api)
    hub = api.client._transport.app.state.streams  # type: ignore[attr-defined]
    assert "/v1/boards/week/stream" in paths and "/v1/boards/week/players/a/friends" in paths
    for path in paths:
        head = await asyncio.wait_for(api.client.head(path), 10)
        assert head.content == b"", path
        if path.endswith("/stream"):
            # A stream never ends by itself: HEAD gets its status and headers, and the
            # stream behind it is closed at once (none left open on the process).
            assert head.status_code == 200
            assert head.headers["content-type"].startswith("text/event-stream")
            assert hub.open == 0
            continue
        get = await api.client.get(path)
        assert head.status_code == get.status_code, path
        assert head.headers["content-type"] == get.headers["content-type"], path
        if "content-length" in get.headers and get.status_code == 200 and "/docs" not in path:
            assert head.headers["content-length"] == get.headers["content-length"], path
    # HEAD where there is no GET is a 405 like any other method.
    r = await api.client.head("/v1/matches/m1/results")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


# -- the slash redirect ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/boards/", "/v1/boards/week/", "/ops/", "//evil.example/"])
async def test_a_trailing_slash_is_a_404_that_names_the_path_not_a_redirect(
    api: Api, path: str
) -> None:
    # A whole URL: a path of its own would be resolved against the base (//host is a host).
    r = await api.client.get(f"http://podium{path}", headers={"Host": "evil.example"})
    assert r.request.url.path == path
    body = problem(r, 404)
    assert "location" not in r.headers
    assert "evil.example" not in body["detail"]
    bare = path.rstrip("/")
    if not bare.startswith("//"):
        assert f"the path is {bare}," in body["detail"]
        assert (await api.client.get(bare)).status_code == 200


# -- JSON bodies -------------------------------------------------------------------------


def _bodies() -> dict[tuple[str, str], dict[str, Any]]:
    """A valid body for every route that reads one."""
    return {
        ("POST", "/v1/matches/{matchId}/results"): {
            "mode": "default",
            "endedAt": _now(),
            "durationSeconds": 300,
            "results": [{"playerId": "a", "points": 5}],
        },
        ("POST", "/v1/admin/keys"): {"name": "k2", "scope": "game", "modes": ["default"]},
        ("PUT", "/v1/players/{playerId}/profile"): {"name": "Vex"},
        ("PUT", "/v1/players/{playerId}/friends"): {"friends": ["b"]},
        ("POST", "/v1/admin/players/{playerId}/ban"): {"reason": "aimbot"},
        ("POST", "/v1/admin/tournaments"): _tournament(),
        ("POST", "/v1/tournaments/{tournamentId}/entrants"): {"playerId": "a"},
        ("POST", "/v1/admin/webhooks/deliveries/{eventId}/retry"): {
            "endpoint": "https://hooks.example/won"
        },
    }


def _url(path: str) -> str:
    return (
        path.replace("{playerId}", "a")
        .replace("{matchId}", "m1")
        .replace("{tournamentId}", "cup")
        .replace("{eventId}", "ev1")
    )


async def _state(api: Api) -> dict[str, Any]:
    """What the bodies above would change, read from the store."""
    store = api.backends.store
    profiles = await store.profiles(["a"])
    return {
        "match": await store.results_of("m1", ["a"]),
        "keys": sorted(k.name for k in await api.podium.keys.all()),
        "profile": profiles.get("a"),
        "friends": await store.friends("a"),
        "banned": await store.banned(["a"]),
        "tournaments": (await api.client.get("/v1/tournaments")).json(),
    }


async def test_every_route_with_a_body_is_listed_here(api: Api) -> None:
    spec = (await api.client.get("/openapi.json")).json()
    with_body = {
        (method.upper(), path)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if "requestBody" in op
    }
    assert with_body == set(_bodies())
    for method, path in with_body:
        declared = spec["paths"][path][method.lower()]["responses"]["415"]
        schema = declared["content"]["application/problem+json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Problem"}


@pytest.mark.parametrize("content_type", ["text/plain", None, "application/x-www-form-urlencoded"])
async def test_a_json_body_under_another_media_type_is_415_and_changes_nothing(
    api: Api, content_type: str | None
) -> None:
    before = await _state(api)
    for (method, path), body in _bodies().items():
        key = api.game_key if path.startswith("/v1/matches") else api.admin_key
        headers = {**api.auth(key)}
        if content_type is not None:
            headers["Content-Type"] = content_type
        r = await api.client.request(
            method, _url(path), content=json.dumps(body).encode(), headers=headers
        )
        detail = problem(r, 415)["detail"]
        assert "application/json" in detail, (path, detail)
        assert (content_type or "none").split(";")[0] in detail
    assert await _state(api) == before


async def test_json_media_types_with_parameters_or_a_suffix_are_json(api: Api) -> None:
    body = json.dumps(_bodies()[("POST", "/v1/matches/{matchId}/results")]).encode()
    url = "/v1/matches/m1/results"
    for kind in ("application/json; charset=utf-8", "Application/JSON", "application/vnd.x+json"):
        r = await api.client.post(url, content=body, headers={**api.auth(), "Content-Type": kind})
        assert r.status_code == 200, (kind, r.text)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (
            '{"mode":"nosuch","mode":"default","endedAt":"%s","durationSeconds":300,'
            '"results":[{"playerId":"a","points":5}]}',
            "mode",
        ),
        (
            '{"mode":"default","endedAt":"%s","durationSeconds":300,'
            '"results":[{"playerId":"a","points":500,"points":5}]}',
            "points",
        ),
    ],
)
async def test_a_key_given_twice_is_422_naming_it_and_records_nothing(
    api: Api, raw: str, key: str
) -> None:
    r = await api.client.post(
        "/v1/matches/m1/results",
        content=(raw % _now()).encode(),
        headers={**api.auth(), "Content-Type": "application/json"},
    )
    body = problem(r, 422)
    assert f'"{key}"' in body["detail"] and "more than once" in body["detail"]
    assert body["errors"][0]["field"] == "body"
    # Nothing recorded, nothing claimed: another content under the same match id is taken.
    assert await api.backends.store.results_of("m1", ["a"]) == {}
    r = await api.submit("m1", [("a", 7)])
    assert r.status_code == 200, r.text
    assert r.json()["players"][0]["totals"]["week"] == 7


async def test_every_json_body_refuses_a_key_twice(api: Api) -> None:
    before = await _state(api)
    for (method, path), body in _bodies().items():
        key = api.game_key if path.startswith("/v1/matches") else api.admin_key
        first = next(iter(body))
        inner = json.dumps(body)[1:-1]
        raw = "{" + json.dumps(first) + ": null, " + inner + "}"
        r = await api.client.request(
            method,
            _url(path),
            content=raw.encode(),
            headers={**api.auth(key), "Content-Type": "application/json"},
        )
        assert f'"{first}"' in problem(r, 422)["detail"], path
    assert await _state(api) == before


# -- 503s say which part, not where -------------------------------------------------------

ADDRESS = re.compile(r"127\.0\.0\.1|:\d{2,5}\b|Errno|Error \d+|redis|postgres|asyncpg|Connect")


async def test_an_index_down_is_a_503_without_its_address(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    closed = free_port()  # nothing listens here
    settings = parse(
        {
            "server": {"read_rate_per_s": 0},
            "store": {"url": sqlite_url},
            "index": {"url": f"redis://127.0.0.1:{closed}/0", "prefix": "probe"},
        }
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://podium") as c:
            with caplog.at_level(logging.WARNING, logger="podium.api"):
                for path in ("/v1/boards/week", "/v1/boards/week/players/a", "/readyz"):
                    r = await c.get(path)
                    body = problem(r, 503)
                    assert int(r.headers["retry-after"]) >= 1
                    assert not ADDRESS.search(f"{body['title']} {body['detail']}"), r.text
                    assert body["detail"].startswith("the rank index is unavailable"), r.text
    logged = "\n".join(rec.getMessage() for rec in caplog.records)
    # The cause is in the log, for whoever runs the service.
    assert f"127.0.0.1:{closed}" in logged, logged
    assert "GET /readyz" in logged


async def test_a_store_down_is_a_503_without_its_address(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    pg = urlparse(postgres_url)
    proxy = Proxy(pg.hostname or "", pg.port or 5432)
    await proxy.start()
    settings = parse(
        {
            "server": {"read_rate_per_s": 0},
            "store": {
                "url": pg._replace(netloc=f"postgres@127.0.0.1:{proxy.port}").geturl(),
                "pool_size": 2,
                "read_pool_size": 2,
            },
        }
    )
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            _, game = await app.state.podium.keys.create("gs", ["default"], False)
            await proxy.cut()
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://podium") as c:
                api = Api(c, app.state.backends, game, "")
                with caplog.at_level(logging.WARNING, logger="podium.api"):
                    for r in (await api.submit("m1", [("a", 5)]), await c.get("/readyz")):
                        body = problem(r, 503)
                        assert not ADDRESS.search(f"{body['title']} {body['detail']}"), r.text
                        assert body["detail"].startswith("the score store is unavailable")
        logged = "\n".join(rec.getMessage() for rec in caplog.records)
        assert "postgres" in logged and "POST /v1/matches/m1/results" in logged, logged
    finally:
        await proxy.cut()


# -- forwarded headers, on the real server ------------------------------------------------

BURST = 6
STREAMS = 2


def _podium(cfg: Path, *args: str) -> subprocess.Popen[bytes]:
    log = open(cfg.parent / "serve.log", "ab")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "podium", *args, "--config", str(cfg)],
        cwd=cfg.parent,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@contextlib.contextmanager
def _serving(cfg: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = _podium(cfg, "serve", *args)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _text(path: Path) -> str:
    return path.read_text()


async def _ready(client: httpx.AsyncClient, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited during start:\n{_text(log)}"
        with contextlib.suppress(httpx.TransportError):
            if (await client.get("/healthz")).status_code == 200:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"server did not become ready:\n{_text(log)}")


def _config(
    tmp: Path, trusted: list[str], store: str, index: str | None = None, prefix: str = ""
) -> Path:
    # A bucket that all but never refills (one token in 1,000 s): what the test counts is
    # the burst, whatever the machine's speed.
    cfg = tmp / "podium.toml"
    index_section = f'[index]\nurl = "{index}"\nprefix = "{prefix}"\n' if index else ""
    cfg.write_text(
        f'[store]\nurl = "{store}"\npool_size = 2\nread_pool_size = 2\n{index_section}'
        f"[server]\nread_rate_per_s = 0.001\nread_burst = {BURST}\n"
        f"max_streams_per_client = {STREAMS}\ntrusted_proxies = {trusted!r}\n".replace("'", '"')
    )
    return cfg


async def _reads_by_forwarded_for(client: httpx.AsyncClient, n: int) -> list[int]:
    """``n`` reads, each saying it is from another client."""
    out = []
    for i in range(n):
        headers = {"X-Forwarded-For": f"203.0.113.{i + 1}", "Forwarded": f"for=198.51.100.{i}"}
        out.append((await client.get("/v1/boards/week", headers=headers)).status_code)
    return out


@pytest.mark.slow
async def test_forwarded_headers_from_an_untrusted_peer_do_not_choose_the_client(
    tmp_path: Path,
) -> None:
    """``podium serve`` with ``trusted_proxies = []``: a client on loopback (a proxy on the
    same host, or anyone) is one client, whatever X-Forwarded-For or Forwarded it sends,
    to the read limit and to the streams' cap."""
    cfg = _config(tmp_path, [], f"sqlite:///{tmp_path}/podium.db")
    port = free_port()
    with _serving(cfg, "--port", str(port)) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            await _ready(c, proc, tmp_path / "serve.log")
            async with contextlib.AsyncExitStack() as streams:
                for i in range(STREAMS):
                    r = await streams.enter_async_context(
                        c.stream("GET", "/v1/boards/week/stream", headers=_from(i))
                    )
                    assert r.status_code == 200
                r = await streams.enter_async_context(
                    c.stream("GET", "/v1/boards/week/stream", headers=_from(STREAMS))
                )
                assert r.status_code == 429, "a stream past the cap, by another X-Forwarded-For"
                assert "streams open already" in json.loads(await r.aread())["detail"]
            # One token went to each stream asked for; the rest of the burst is all any
            # number of forwarded addresses gets.
            served = await _reads_by_forwarded_for(c, 2 * BURST)
            assert served.count(200) == BURST - STREAMS - 1, served
            assert set(served) == {200, 429}, served


def _from(i: int) -> dict[str, str]:
    return {"X-Forwarded-For": f"192.0.2.{i + 1}"}


@pytest.mark.slow
async def test_a_trusted_proxy_forwards_its_clients(tmp_path: Path) -> None:
    """The other half of the rule: from a peer in ``trusted_proxies``, each forwarded
    client has a bucket of its own."""
    cfg = _config(tmp_path, ["127.0.0.1/32"], f"sqlite:///{tmp_path}/podium.db")
    port = free_port()
    with _serving(cfg, "--port", str(port)) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            await _ready(c, proc, tmp_path / "serve.log")
            assert await _reads_by_forwarded_for(c, 2 * BURST) == [200] * (2 * BURST)
            # and the proxy's own address is a client like any other
            mine = [(await c.get("/v1/boards/week")).status_code for _ in range(BURST + 1)]
            assert mine.count(200) == BURST and mine[-1] == 429, mine


@pytest.mark.slow
async def test_the_processes_of_serve_believe_no_forwarded_header_either(
    tmp_path: Path, postgres_url: str, redis_prefix: str
) -> None:
    """``podium serve --processes 1``: uvicorn's supervisor starts the API processes with a
    configuration of its own; the fleet's shared bucket (in Redis) counts one client."""
    cfg = _config(tmp_path, [], postgres_url, REDIS_URL, redis_prefix)
    port = free_port()
    with _serving(cfg, "--port", str(port), "--processes", "1", "--no-workers") as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            await _ready(c, proc, tmp_path / "serve.log")
            served = await _reads_by_forwarded_for(c, 2 * BURST)
            assert served.count(200) == BURST, served
            assert set(served) == {200, 429}, served


@pytest.mark.slow
async def test_head_through_the_real_server_ends_with_the_headers(tmp_path: Path) -> None:
    """uvicorn keeps HEAD in its own scope and sends no body either; a stream's HEAD ends at
    once instead of holding the connection (and a stream slot) open."""
    cfg = _config(tmp_path, [], f"sqlite:///{tmp_path}/podium.db")
    port = free_port()
    with _serving(cfg, "--port", str(port)) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            await _ready(c, proc, tmp_path / "serve.log")
            for _ in range(STREAMS + 1):  # past the cap, had any stayed open
                r = await c.head("/v1/boards/week/stream")
                assert r.status_code == 200 and r.content == b""
                assert r.headers["content-type"].startswith("text/event-stream")
            r = await c.head("/v1/boards/week")
            assert r.status_code == 200 and r.content == b""
            assert int(r.headers["content-length"]) > 0
    assert "Traceback" not in _text(tmp_path / "serve.log")
