"""The two hottest reads, a player's rank and a board's top page, answered without FastAPI's
per-request machinery when the request is a plain one.

A profile of ``benchmarks/reads.py`` (BENCHMARKS.md, "Hot reads") showed a quarter of the
server's busy time in finding the route among every included router and in solving its
parameters, against a fifth in the read itself. ``HotRoute`` is placed first among the
app's routes: it takes a request only when its path and query are in the common form, with
every value already valid (``?neighbors=2``, ``?limit=100&offset=0``); anything else
(another parameter, a value out of range or spelled otherwise) matches
nothing here and goes on to the routes of ``routes.py``, which answer it exactly as before
(a 422 names the field; a key twice never comes this far: ``protocol.QueryKeysOnce``,
a middleware, refuses it first). The handlers do what those routes do, in the same order: the
shared read limiter, the read, the same body and headers; an error raised is translated by
the app's exception handlers into the same problem+json. The routes of ``routes.py`` stay
the published contract (the OpenAPI document is built from them alone).

``HotResults``, a middleware outside all the others, takes a match's results
(``POST /v1/matches/{id}/results``) in their plain form: ``Content-Type: application/json``
exactly, a ``Content-Length`` within the limit, a body that parses (no key twice) and
validates as ``MatchIn``. The profile of the accept path put 40% of its busy time outside
the endpoint (the middlewares, routing, dependency solving); this form goes straight to
``routes.record_match``, the route's own code, after the same credential check, and does
itself what the middlewares do for it (counts it in flight for the load gate, sets
``X-Content-Type-Options``, answers a ``PodiumError`` with the app's own handler). Any
other request, or a body that does not validate, goes to the stack with its body replayed,
and the full route answers it as before (its 413, 415 and 422). The same was tried for the
hot reads (their middlewares were 5.6% of a rank read): no gain showed beyond the runs'
spread, so the reads are not taken there (BENCHMARKS.md, "Four misses of issue 23").
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from podium import metrics
from podium.api import schemas as s
from podium.api.auth import game_server
from podium.api.encode import rank_json
from podium.api.problems import podium_error, replay
from podium.api.protocol import Duplicate, once_each
from podium.api.ratelimit import limit_reads
from podium.api.routes import record_match
from podium.api.shedding import LoadGate
from podium.errors import PodiumError
from podium.service.wiring import Service

_BOARD = s.BOARD.strip("^$")
_ID = s.ID.removeprefix("^").removesuffix("$")
_RANK = re.compile(rf"/v1/boards/({_BOARD})/players/({_ID})")
_PAGE = re.compile(rf"/v1/boards/({_BOARD})")
_RESULTS = re.compile(rf"/v1/matches/({_ID})/results")
# A value taken as is: decimal, no sign, no leading zero, no spaces (pydantic would take
# more spellings: those go to the full route, which reads them its own way).
_NUMBER = re.compile(r"0|[1-9][0-9]{0,2}")
JSON = b"application/json"

Handler = Callable[[Request, dict[str, str], dict[str, int]], Awaitable[tuple[bytes, bytes]]]


def _query(raw: bytes, allowed: dict[str, tuple[int, int]]) -> dict[str, int] | None:
    """The query's numbers, when every key is one of ``allowed`` (once each) and every
    value a plain number within its bounds; None when the full route should read it."""
    out: dict[str, int] = {}
    if not raw:
        return out
    for pair in raw.decode("latin-1").split("&"):
        name, eq, value = pair.partition("=")
        bounds = allowed.get(name)
        if bounds is None or not eq or name in out or not _NUMBER.fullmatch(value):
            return None
        n = int(value)
        if not bounds[0] <= n <= bounds[1]:
            return None
        out[name] = n
    return out


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


async def _rank(request: Request, path: dict[str, str], q: dict[str, int]) -> tuple[bytes, bytes]:
    # As routes.player_rank.
    await limit_reads(request)
    with metrics.READ_SECONDS.labels("rank").time():
        r = await _podium(request).reads.player_rank(
            path["board"], path["playerId"], q.get("neighbors", 2), None
        )
        body = rank_json(r)
    return body, b"no-cache"


async def _page(request: Request, path: dict[str, str], q: dict[str, int]) -> tuple[bytes, bytes]:
    # As routes.board_page, without a cursor, a window or a group.
    await limit_reads(request)
    podium = _podium(request)
    board, offset, limit = path["board"], q.get("offset", 0), q.get("limit", 100)
    with metrics.READ_SECONDS.labels("page").time():
        page = await podium.reads.page(board, None, offset, limit)
        body = request.app.state.encoded_pages.body(page, (board, page.window, offset, limit))
        if offset == 0:  # served stale while pages are shed
            request.app.state.shed_gate.keep_page(request.scope, body)
    return body, f"public, max-age={int(podium.settings.server.page_cache_s)}".encode()


# Each hot route: its path, the names of its groups, its query's bounds, its handler.
_ROUTES: tuple[
    tuple[re.Pattern[str], tuple[str, ...], dict[str, tuple[int, int]], Handler], ...
] = (
    (_RANK, ("board", "playerId"), {"neighbors": (0, 50)}, _rank),
    (_PAGE, ("board",), {"offset": (0, 10**9), "limit": (1, 100)}, _page),
)


def _path(scope: Scope) -> str:
    """The request's path as starlette's routes see it, under a prefix."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


class HotRoute(BaseRoute):
    """Matches the plain form of the hot reads; every other request matches nothing."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope["method"] != "GET":
            return Match.NONE, {}
        path = _path(scope)
        if not path.startswith("/v1/boards/"):
            return Match.NONE, {}
        for pattern, names, bounds, handler in _ROUTES:
            m = pattern.fullmatch(path)
            if m is None:
                continue
            q = _query(scope["query_string"], bounds)
            if q is None:
                return Match.NONE, {}
            params = dict(zip(names, m.groups(), strict=True))
            return Match.FULL, {"podium.hot": (handler, params, q)}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler, params, q = scope["podium.hot"]
        body, cache_control = await handler(Request(scope, receive), params, q)
        headers = [
            (b"content-length", str(len(body)).encode()),
            (b"content-type", JSON),
            (b"cache-control", cache_control),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class HotResults:
    """The outermost middleware: a match's results in their plain form, answered ahead of
    the stack; everything else passes to the stack untouched."""

    def __init__(self, app: ASGIApp, gate: LoadGate, max_body: int) -> None:
        self.app = app
        self.gate = gate
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Every other scope passes untouched: the lifespan's, a websocket, every other request.
        match_id = _plain_post(scope, self.max_body)
        if match_id is None:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: the stack says so
                await self.app(scope, replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        body = _match_in(whole["body"])
        if body is None:  # the full route names what is wrong (422)
            await self.app(scope, replay([whole], receive), send)
            return
        gate = self.gate
        gate.busy += 1  # as ShedReads counts every request it passes
        try:
            # The server's own receive, the body already read from it: the route reads no
            # body from the request, and a match that waits for its turn looks whether its
            # client left (``PendingMatches``). With the body replayed ahead, that look
            # would take the body for the answer and never see a disconnect.
            request = Request(scope, receive)
            try:
                key = await game_server(request)  # the route's dependency, first as there
                out = await record_match(request, key, match_id, body)
            except PodiumError as e:
                await _problem(e, scope, receive, send)
                return
            # As FastAPI serializes the route's answer (response_model_exclude_none), and
            # as its JSONResponse renders it.
            data = json.dumps(
                out.model_dump(mode="json", exclude_none=True),
                ensure_ascii=False,
                allow_nan=False,
                indent=None,
                separators=(",", ":"),
            ).encode()
            headers = [
                (b"content-length", str(len(data)).encode()),
                (b"content-type", JSON),
                (b"x-content-type-options", b"nosniff"),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": data})
        finally:
            gate.busy -= 1


def _plain_post(scope: Scope, max_body: int) -> str | None:
    """The match id of a results post in the plain form: the path, no query (the route
    reads none, and the stack holds a query to its rules: ``protocol.QueryKeysOnce``), one
    Content-Type of exactly application/json, a Content-Length within ``max_body``; None
    otherwise."""
    if scope["type"] != "http" or scope["method"] != "POST" or scope["query_string"]:
        return None
    m = _RESULTS.fullmatch(_path(scope))
    if m is None:
        return None
    kind = length = None
    for name, value in scope["headers"]:
        if name == b"content-type":
            if kind is not None:
                return None
            kind = value
        elif name == b"content-length":
            if length is not None:
                return None
            length = value
    if kind != JSON or length is None or not length.isdigit() or int(length) > max_body:
        return None
    return m.group(1)


def _match_in(raw: bytes) -> s.MatchIn | None:
    """The body as the route validates it (after ``JsonBodies``' check for a key twice),
    or None where the full route must say what is wrong."""
    try:
        return s.MatchIn.model_validate(json.loads(raw, object_pairs_hook=once_each))
    except (Duplicate, ValueError, RecursionError):  # pydantic's ValidationError too
        return None


async def _problem(e: PodiumError, scope: Scope, receive: Receive, send: Send) -> None:
    """The app's handler, as ExceptionMiddleware would call it; any other error goes up to
    the server's error middleware and its 500 handler, as before."""
    response = await podium_error(Request(scope, receive), e)
    response.headers["x-content-type-options"] = "nosniff"
    await response(scope, receive, send)


def install(routes: list[BaseRoute]) -> None:
    """First among ``routes`` (the app's), so that a plain hot read is found at once."""
    routes.insert(0, HotRoute())
