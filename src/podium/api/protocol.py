"""HTTP's own rules, where the framework leaves them out: ``HEAD`` answered as ``GET``, a 405's
``Allow`` naming the path's methods, no redirect built from the ``Host`` header, JSON
bodies that are JSON: declared as such (else 415) and with each key once (else 422), and a
query with each key once (else 422).

One table of the app's routes (``RouteTable``) answers what each of them asks: which methods
a path has, and whether a route reads a JSON body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from podium.api.problems import _count_rejection, problem, replay

# One reading of JSON bodies, shared with the ingest role.
from podium.service.reports import Duplicate as Duplicate
from podium.service.reports import once_each as once_each

JSON = "application/json"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class _Route:
    path: re.Pattern[str]
    methods: frozenset[str]  # empty for a mount of something other than static files
    json_body: bool  # the handler reads a JSON body


class RouteTable:
    """The app's routes, flattened once on first use (every route is in place by then):
    FastAPI's included routers are routes of their own, whose ``methods`` are empty."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._routes: list[_Route] | None = None

    def _all(self) -> list[_Route]:
        if self._routes is None:
            self._routes = list(self._flatten())
        return self._routes

    def _flatten(self) -> Iterator[_Route]:
        for context in iter_route_contexts(self._app.router.routes):
            regex = getattr(context, "path_regex", None)
            if regex is None:
                continue
            original = context.original_route
            methods = set(context.methods or ())
            if isinstance(original, Mount) and isinstance(original.app, StaticFiles):
                methods = {"GET"}
            if "GET" in methods:
                methods.add("HEAD")  # HeadAsGet answers it wherever GET is
            json_body = isinstance(original, APIRoute) and original.body_field is not None
            yield _Route(regex, frozenset(methods), json_body)

    def allowed(self, path: str) -> list[str]:
        """The methods some route answers at ``path`` (a 405's ``Allow``)."""
        out: set[str] = set()
        for route in self._all():
            if route.path.match(path):
                out |= route.methods
        return sorted(out)

    def takes_json(self, method: str, path: str) -> bool:
        """The route that answers ``method`` at ``path`` reads a JSON body."""
        for route in self._all():
            if method in route.methods and route.path.match(path):
                return route.json_body
        return False

    def without_slash(self, path: str) -> str | None:
        """``path`` less its trailing slash, where a route answers that; None elsewhere. Never
        a path that starts with two slashes (a Location naming another host)."""
        bare = path.rstrip("/")
        if not bare or bare.startswith("//") or bare == path:
            return None
        return bare if any(r.methods and r.path.match(bare) for r in self._all()) else None


class HeadAsGet:
    """``HEAD`` on every ``GET`` route: the app answers a ``GET``, and the client gets its
    status and headers only. The answer ends once its headers are sent; a stream behind
    it (a board's events) sees its client leave, as when a browser closes the page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        done = False
        # At ASGI 2.4 an app learns its client left from send raising OSError; before it,
        # from receive saying http.disconnect (Starlette's streams use whichever applies).
        spec = scope.get("asgi", {}).get("spec_version", "2.0")
        raises = tuple(int(p) for p in spec.split(".")[:2]) >= (2, 4)

        async def headers_only(message: Message) -> None:
            nonlocal done
            if done:
                if raises and message.get("more_body", False):
                    raise OSError("a HEAD request: the answer ended with its headers")
                return
            if message["type"] == "http.response.start":
                await send(message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                done = True

        async def until_done() -> Message:
            return {"type": "http.disconnect"} if done else await receive()

        # A copy: the server keeps its own scope, and so knows to send no body either.
        await self.app({**scope, "method": "GET"}, until_done, headers_only)


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == JSON or (kind.startswith("application/") and kind.endswith("+json"))


class JsonBodies:
    """A route that reads a JSON body gets one: a body of another media type (or none
    named) is a 415 naming ``application/json``, and an object with a key twice a 422
    naming the key, where a JSON parser would keep the last one silently (a ``mode`` given
    twice is not a mode). Both before the handler runs, so nothing is recorded. Inside
    ``BodyLimit``: the bodies read here are already within the limit."""

    def __init__(self, app: ASGIApp, table: RouteTable) -> None:
        self.app = app
        self.table = table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in BODY_METHODS
            or not self.table.takes_json(scope["method"], scope["path"])
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        refusal = self._refusal(scope, body) if body else None
        if refusal is not None:
            _count_rejection(Request(scope), refusal.status_code)
            await refusal(scope, receive, send)
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, replay([whole], receive), send)

    def _refusal(self, scope: Scope, body: bytes) -> Any:
        content_type = ""
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value.decode("latin-1")
        if not _is_json(content_type):
            named = content_type.split(";", 1)[0].strip() or "none"
            return problem(
                415,
                "Unsupported media type",
                f"the body must be {JSON} (Content-Type: {JSON}); it was sent as {named}",
            )
        try:
            json.loads(body, object_pairs_hook=once_each)
        except Duplicate as e:
            message = f'the key "{e.key}" appears more than once in one object'
            return problem(
                422, "Invalid input", message, errors=[{"field": "body", "message": message}]
            )
        except (ValueError, RecursionError):
            pass  # not JSON at all: the framework says where (a 422, as ever)
        return None


# Query parameters a route may be given several times. None: a list is one value,
# comma-separated (``?ids=a,b,c``); a route that reads one as a list names it here.
REPEATABLE: frozenset[str] = frozenset()


def repeated(query: bytes) -> str | None:
    """The first key of ``query`` given more than once, as the app reads keys (percent- and
    plus-decoded, a key without ``=`` included); None when each is there once. A query of
    one pair costs a byte search."""
    if b"&" not in query:
        return None
    if b"%" in query or b"+" in query:  # spelled otherwise: read as Starlette reads it
        keys = [k for k, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)]
        return next((k for i, k in enumerate(keys) if k in keys[:i] and k not in REPEATABLE), None)
    seen: set[bytes] = set()
    for pair in query.split(b"&"):
        key = pair.partition(b"=")[0]
        if key in seen and (name := key.decode("latin-1")) not in REPEATABLE:
            return name
        if pair:  # an empty pair (a=1&&b=2) names no key
            seen.add(key)
    return None


def repeated_key(key: str) -> Any:
    """The 422 of a query key given twice, naming it as a field is named
    (``query.limit``)."""
    shown = key if len(key) <= 64 else f"{key[:64]}..."
    message = (
        f'the query parameter "{shown}" is given more than once; it takes one value '
        "(a list is one value, comma-separated)"
    )
    return problem(
        422, "Invalid input", message, errors=[{"field": f"query.{shown}", "message": message}]
    )


class QueryKeysOnce:
    """A query key given twice is a 422 naming it, on every route, before any handler
    runs: a framework reads a single-valued parameter given twice as its last value, so
    ``?limit=1&limit=500`` would be answered as if the first were not there. The plain
    results taken ahead of the stack (``hot.HotResults``) leave any request with a query
    to it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (key := repeated(scope["query_string"])) is not None:
            refusal = repeated_key(key)
            _count_rejection(Request(scope), refusal.status_code)
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)
