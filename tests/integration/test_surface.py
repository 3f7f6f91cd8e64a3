"""The surface a browser, a careless client and an attacker see: headers, the docs page, and
the smaller holes of issue 13 (ids with a trailing newline, unprintable names, chunked bodies
over the limit, freezing a window not begun, endedAt as a number, unbounded streams)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import uvicorn

from podium.domain.models import Profile
from podium.serve.app import create_app
from tests.integration.conftest import Api, settings_for
from tests.integration.test_api import problem
from tests.integration.test_crash import _free_port

pytestmark = pytest.mark.asyncio


@pytest.fixture
def config_kind() -> str:
    return "embedded"  # the HTTP surface is the same on both configurations


async def test_pages_have_a_csp_and_every_response_nosniff(api: Api) -> None:
    for path in ("/", "/ops", "/docs"):
        r = await api.client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "img-src 'self' data: https:" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
    for r in (
        await api.client.get("/v1/boards"),
        await api.client.get("/v1/boards/nope"),
        await api.client.get("/openapi.json"),
        await api.client.get("/static/app.js"),
        await api.client.post("/v1/matches/m1/results", content=b"x" * 100_000),
    ):
        assert r.headers["x-content-type-options"] == "nosniff", r.url


async def test_the_docs_page_loads_only_scripts_of_its_own_origin(api: Api) -> None:
    page = (await api.client.get("/docs")).text
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(s.startswith("/") and not s.startswith("//") for s in sources)
    assert "<script>" not in page  # no inline script: the CSP's script-src 'self' holds
    for src in sources:
        r = await api.client.get(src)
        assert r.status_code == 200, src
    assert "SwaggerUIBundle" in (await api.client.get("/docs/assets/swagger-ui-bundle.js")).text
    assert (await api.client.get("/redoc")).status_code == 404  # redoc would load a CDN


async def test_every_401_says_bearer(api: Api) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic eDp5"}):
        r = await api.client.post("/v1/matches/m1/results", json={}, headers=headers)
        problem(r, 401)
        assert r.headers["www-authenticate"] == "Bearer"
        r = await api.client.get("/v1/admin/review", params={"board": "week"}, headers=headers)
        problem(r, 401)
        assert r.headers["www-authenticate"] == "Bearer"


async def test_ids_with_a_trailing_newline_are_refused(api: Api) -> None:
    r = await api.client.put(
        "/v1/players/p_1/friends", json={"friends": ["p_2\n"]}, headers=api.auth(api.admin_key)
    )
    assert "friends.0" in problem(r, 422)["detail"]
    for bad in ("p_2\n", "p_2\r\n"):
        with pytest.raises(Exception, match="playerId"):
            await api.podium.player_admin.set_friends("p_1", [bad])
        with pytest.raises(Exception, match="playerId"):
            await api.podium.player_admin.set_friends(bad, [])
    r = await api.client.get("/v1/boards/week/players/p_1%0A")
    problem(r, 422)


@pytest.mark.parametrize("name", ["Vex\x00", "\u202eevil", "a\u2066b", "   ", "\u3000", "a\nb"])
async def test_unprintable_or_blank_names_are_refused(api: Api, name: str) -> None:
    r = await api.client.put(
        "/v1/players/p_1/profile", json={"name": name}, headers=api.auth(api.admin_key)
    )
    body = problem(r, 422)
    assert body["errors"][0]["field"] == "name", body
    with pytest.raises(Exception, match="name"):
        await api.podium.player_admin.set_profile(Profile("p_1", name, None, None))


async def test_names_with_emoji_joiners_are_kept(api: Api) -> None:
    family = "Vex \U0001f468\u200d\U0001f469\u200d\U0001f467"
    r = await api.client.put(
        "/v1/players/p_1/profile", json={"name": family}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204, r.text


async def test_a_chunked_body_over_the_limit_is_413(make_api: Callable[..., Any]) -> None:
    api: Api = await make_api(server={"max_body_bytes": 1024})

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b" " * 1000

    r = await api.client.post(
        "/v1/matches/m1/results", content=chunks(), headers=api.auth(api.game_key)
    )
    problem(r, 413)

    async def small() -> AsyncIterator[bytes]:
        yield b'{"mode": "default", '
        yield b'"endedAt": "' + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()).encode()
        yield b'", "durationSeconds": 300, "results": [{"playerId": "a", "points": 5}]}'

    r = await api.client.post(
        "/v1/matches/m1/results",
        content=small(),
        headers={**api.auth(api.game_key), "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text


async def test_a_window_not_begun_cannot_be_frozen(api: Api) -> None:
    auth = api.auth(api.admin_key)
    r = await api.client.post("/v1/admin/boards/day/windows/2099-01-01/freeze", headers=auth)
    assert "not started" in problem(r, 422)["detail"]
    assert "2099-01-01" not in await api.podium.lifecycle.frozen("day")
    # A window under way may still be frozen early (a tournament ended early).
    today = time.strftime("%Y-%m-%d", time.gmtime())
    r = await api.client.post(f"/v1/admin/boards/day/windows/{today}/freeze", headers=auth)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "ended_at",
    [int(time.time()), str(int(time.time())), "2026-10-28T19:04:11", 1.5e9, None],
    ids=["epoch", "epoch-string", "no-zone", "float", "null"],  # the same in every process
)
async def test_ended_at_is_only_an_rfc3339_string_with_a_zone(api: Api, ended_at: Any) -> None:
    body = {
        "mode": "default",
        "endedAt": ended_at,
        "durationSeconds": 300,
        "results": [{"playerId": "a", "points": 5}],
    }
    r = await api.client.post("/v1/matches/m1/results", json=body, headers=api.auth())
    assert problem(r, 422)["errors"][0]["field"] == "endedAt"


async def test_ended_at_with_an_offset_is_accepted(api: Api) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    body = {
        "mode": "default",
        "endedAt": now,
        "durationSeconds": 300,
        "results": [{"playerId": "a", "points": 5}],
    }
    r = await api.client.post("/v1/matches/m1/results", json=body, headers=api.auth())
    assert r.status_code == 200, r.text


async def test_streams_are_capped_per_client_and_in_all(sqlite_url: str, tmp_path: Any) -> None:
    settings = settings_for(
        "embedded",
        sqlite_url,
        None,
        None,
        server={"max_streams_per_client": 2, "max_streams": 2},
        archive={"dir": str(tmp_path / "standings")},
    )
    app = create_app(settings)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10)
            )
            url = "/v1/boards/week/stream"

            async def open_stream() -> httpx.Response:
                r = await stack.enter_async_context(client.stream("GET", url))
                assert r.status_code == 200
                return r

            hub = app.state.streams
            first = await open_stream()
            other = hub.admit("10.0.0.1")  # another client holds the last stream of all
            full = await client.get(url)
            problem(full, 503)
            assert full.headers["retry-after"]
            other()
            await open_stream()
            over = await client.get(url)  # this client's third
            problem(over, 429)
            assert over.headers["retry-after"]
            # A stream that ends gives its place back.
            await first.aclose()
            async with asyncio.timeout(5):
                while hub.open > 1:
                    await asyncio.sleep(0.01)
            await open_stream()
        async with asyncio.timeout(5):
            while app.state.streams.open:  # every stream closed: none is left counted
                await asyncio.sleep(0.01)
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def chromium() -> str:
    from tests.e2e.conftest import CHROMIUM, _missing

    try:
        import playwright  # noqa: F401
    except ImportError:
        _missing("the playwright package is not installed")
    if not os.path.exists(CHROMIUM):
        _missing(f"no Chromium at {CHROMIUM}")
    return CHROMIUM


@pytest.mark.slow  # a podium process and Chromium
async def test_a_browser_renders_the_docs_and_pages_within_their_csp(
    sqlite_url: str, tmp_path: Any, chromium: str
) -> None:
    """The CSP must not break what it guards, and the vendored Swagger UI must read the
    OpenAPI 3.1 document FastAPI publishes (an older one says it cannot)."""
    from playwright.async_api import async_playwright

    from tests.e2e.conftest import CHROMIUM_ARGS

    settings = settings_for(
        "embedded", sqlite_url, None, None, archive={"dir": str(tmp_path / "standings")}
    )
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                tab = await browser.new_page()
                errors: list[str] = []
                tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                tab.on("pageerror", lambda e: errors.append(str(e)))
                await tab.goto(f"http://127.0.0.1:{port}/docs")
                await tab.wait_for_selector(".opblock", timeout=15_000)
                assert await tab.locator(".opblock").count() >= 10
                for path in ("/", "/ops"):
                    await tab.goto(f"http://127.0.0.1:{port}{path}")
                    await tab.wait_for_load_state("networkidle")
                assert not errors, errors
            finally:
                await browser.close()
    finally:
        server.should_exit = True
        await task


async def test_window_ids_with_a_trailing_newline_are_refused(
    make_api: Callable[..., Any],
) -> None:
    boards = [
        {"name": "week", "window": "week"},
        {"name": "nations", "window": "week", "group_by": "country"},
    ]
    api: Api = await make_api(boards=boards)
    auth = api.auth(api.admin_key)
    week = time.strftime("%G-W%V", time.gmtime())
    # The group's "$" would take "FR\n": a window of its own, frozen and archived.
    r = await api.client.post(f"/v1/admin/boards/nations/windows/{week}@FR%0A/freeze", headers=auth)
    problem(r, 422)
    assert not await api.podium.lifecycle.frozen("nations")
    r = await api.client.get("/v1/boards/nations", params={"window": f"{week}@FR\n"})
    problem(r, 422)
    # A well-formed id of the wrong kind is the service's to name.
    r = await api.client.get("/v1/boards/week", params={"window": "nope"})
    assert "is not a week window id" in problem(r, 422)["detail"]
