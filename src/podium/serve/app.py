"""``create_app``: the ASGI application, with its backends started in the lifespan."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from podium import __version__, bootstrap, metrics
from podium.api import contract, docs, hot, problems, protocol, shedding
from podium.api.encode import EncodedPages
from podium.api.ratelimit import ClientAddress, PendingMatches
from podium.api.routes import ROUTERS
from podium.config import settings as config
from podium.config.settings import Settings
from podium.domain.admission import Limits
from podium.ports import Clock
from podium.serve import demo as demo_mode
from podium.serve import gcpolicy, orphans
from podium.web import routes as web
from podium.web import tournaments as web_tournaments


def create_app(
    settings: Settings,
    *,
    roles: Sequence[str] = bootstrap.ROLES,
    clock: Clock | None = None,
    demo: bool = False,
) -> FastAPI:
    """The API; ``roles`` are the background roles run in this process (none for an
    API-only process in a fleet); ``demo`` also runs simulated game servers (``demo.py``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backends = bootstrap.build(settings, clock)
        app.state.backends = backends
        app.state.podium = backends.podium
        app.state.read_limiter = backends.read_limiter
        for kind in ("off", "process", "redis"):  # which limiter is in force, on /metrics
            metrics.READ_LIMITER.labels(kind).set(int(kind == backends.read_limiter.kind))
        thresholds = gc.get_threshold()
        try:
            await backends.start()
            gcpolicy.settle()
            backends.start_roles(roles)
            async with (
                shedding.ticking(app.state.shed_gate),
                web.serving(app, backends.podium),
                demo_mode.running(backends.podium, enabled=demo),
            ):
                yield
        finally:
            gcpolicy.release(thresholds)
            await backends.close()

    app = FastAPI(
        title="podium",
        version=__version__,
        summary="Real-time leaderboards for games",
        lifespan=lifespan,
        # FastAPI's docs pages load their scripts from a CDN: on the origin whose pages hold
        # a credential, podium serves its own copy instead (``docs.py``).
        docs_url=None,
        redoc_url=None,
        # Starlette's redirect builds its Location from the Host header: a 404 names the
        # path without the slash instead (api/protocol.py).
        redirect_slashes=False,
    )
    app.openapi = lambda: _openapi(app, settings)  # type: ignore[method-assign]
    # The process's own buckets until the lifespan puts the configured ones in place.
    app.state.read_limiter = bootstrap.process_limiter(settings)
    app.state.client_address = ClientAddress(settings.server.trusted_proxies)
    app.state.encoded_pages = EncodedPages()
    # A match's statements run one after another, so it holds about one store connection
    # at a time: as many turns as the process has connections (domain/intake.py).
    app.state.pending_matches = PendingMatches(
        settings.server.max_pending_matches,
        turns=settings.store.pool_size + settings.store.read_pool_size,
        wait_ms=settings.server.match_wait_ms,
    )
    app.state.route_table = protocol.RouteTable(app)
    app.state.shed_gate = shedding.LoadGate(  # results before reads (api/shedding.py)
        Limits.of(
            settings.server.shed_lag_ms,
            settings.server.max_pending_matches,
            settings.server.shed_accept_ms,
        ),
        lambda: app.state.pending_matches.now,
        oldest=app.state.pending_matches.oldest_s,
        enabled=settings.server.shed_reads and settings.server.api != "write",
    )
    problems.install(app)
    kinds = {
        "all": ("read", "write", "admin", "ops"),
        "read": ("read", "ops"),
        "write": ("write", "admin", "ops"),
    }[settings.server.api]
    for kind in kinds:
        app.include_router(ROUTERS[kind])
    if "read" in kinds:
        hot.install(app.router.routes)  # the plain hot reads, found first (api/hot.py)
        web.install(app)  # the browser pages read boards
        app.include_router(web_tournaments.router)  # a live tournament's stream
    docs.install(app)
    app.add_middleware(protocol.JsonBodies, table=app.state.route_table)
    app.add_middleware(problems.BodyLimit, limit=settings.server.max_body_bytes)
    app.add_middleware(protocol.HeadAsGet)
    app.add_middleware(shedding.ShedReads, gate=app.state.shed_gate)
    app.add_middleware(protocol.QueryKeysOnce)  # refused, never shed: it is bad input
    app.add_middleware(web.Headers)  # on every response, the 413s included
    if "write" in kinds:  # outermost: plain results, ahead of the stack (api/hot.py)
        app.add_middleware(
            hot.HotResults, gate=app.state.shed_gate, max_body=settings.server.max_body_bytes
        )
    return app


def _openapi(app: FastAPI, settings: Settings) -> dict[str, Any]:
    """The published contract: errors as ``application/problem+json``, the bearer
    credential on every operation that can answer 401, and the rules of the settings and
    the domain that the models cannot hold (``contract.py``)."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, summary=app.summary, routes=app.routes
    )
    for operations in schema.get("paths", {}).values():
        for op in operations.values():
            for status, response in op.get("responses", {}).items():
                content = response.get("content", {})
                if int(status) >= 400 and "application/json" in content:
                    response["content"] = {problems.PROBLEM: content.pop("application/json")}
            if "401" in op.get("responses", {}):
                op["security"] = [{"bearer": []}]
            if "requestBody" in op:  # every JSON body is held to its media type (protocol.py)
                op["responses"].setdefault("415", problems.unsupported_media_type())
    components = schema.setdefault("components", {})
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "a key from `podium keys create`",
        }
    }
    contract.publish(schema, settings)
    app.openapi_schema = schema
    return schema


def from_environment() -> FastAPI:
    """An API-only app with settings from ``PODIUM_CONFIG`` and the ``PODIUM_*`` environment:
    what each process of ``podium serve --processes N`` runs."""
    orphans.die_with_parent()  # the supervisor that started this process
    return create_app(config.load(), roles=())
