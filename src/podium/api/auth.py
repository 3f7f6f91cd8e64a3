"""Credentials on requests: game servers write, admins manage, players only read."""

from __future__ import annotations

from fastapi import Request

from podium.domain.models import ApiKey
from podium.errors import Forbidden
from podium.service import Podium


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def game_server(request: Request) -> ApiKey:
    podium: Podium = request.app.state.podium
    return await podium.authenticate(bearer(request))


async def admin(request: Request) -> ApiKey:
    podium: Podium = request.app.state.podium
    key = await podium.authenticate(bearer(request))
    if not key.admin:
        raise Forbidden("this needs an admin credential")
    return key
