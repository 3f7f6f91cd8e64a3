"""Credentials on requests, one scope each (invariant 5 of docs/architecture.md): game
servers submit results in their modes, admins manage players, bans, freezes and keys, ops
keys read the ops figures and ``/metrics``. No scope includes another; players need none."""

from __future__ import annotations

from fastapi import Request

from podium.domain.models import ApiKey, Scope
from podium.errors import Forbidden
from podium.service.wiring import Service


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def _scoped(request: Request, scope: Scope, needs: str) -> ApiKey:
    podium: Service = request.app.state.podium
    key = await podium.keys.authenticate(bearer(request))
    if key.scope is not scope:
        raise Forbidden(f"this needs {needs}; this key's scope is {key.scope.value!r}")
    return key


async def game_server(request: Request) -> ApiKey:
    return await _scoped(request, Scope.GAME, "a game-server credential")


async def admin(request: Request) -> ApiKey:
    return await _scoped(request, Scope.ADMIN, "an admin credential")


async def ops(request: Request) -> ApiKey:
    return await _scoped(request, Scope.OPS, "an ops credential")


async def admin_or_ops(request: Request) -> ApiKey:
    """What an operator reads as well as the admin (a rebuild's progress): no game server."""
    podium: Service = request.app.state.podium
    key = await podium.keys.authenticate(bearer(request))
    if key.scope not in (Scope.ADMIN, Scope.OPS):
        raise Forbidden(
            f"this needs an admin or an ops credential; this key's scope is {key.scope.value!r}"
        )
    return key
