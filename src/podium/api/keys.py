"""The admin's key routes: create (the secret answered once), list, revoke.

Their bodies are defined here, beside the routes, since no other route uses them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from podium.api.auth import admin
from podium.api.problems import responses
from podium.api.schemas import shown
from podium.domain import validation as v
from podium.domain.models import ApiKey, Scope
from podium.domain.windows import to_rfc3339
from podium.service.wiring import Service

router = APIRouter(tags=["admin"], dependencies=[Depends(admin)])
KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{12}$", description="a key's id, 12 hex digits")]


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # The rules of a player's name (domain/validation.py); api/contract.py publishes them.
    name: Annotated[str, BeforeValidator(shown)] = Field(min_length=1, max_length=v.KEY_NAME_MAX)
    scope: Literal["game", "admin", "ops"]
    modes: list[str] = Field(default_factory=list, max_length=100)


class KeyOut(BaseModel):
    id: str
    name: str
    scope: Literal["game", "admin", "ops"]
    modes: list[str]
    createdAt: str
    revokedAt: str | None = None


class NewKeyOut(KeyOut):
    secret: str = Field(description="the bearer token; shown only in this answer")


class KeysOut(BaseModel):
    keys: list[KeyOut]


def _out(k: ApiKey) -> KeyOut:
    return KeyOut(
        id=k.id,
        name=k.name,
        scope=k.scope.value,
        modes=list(k.modes),
        createdAt=to_rfc3339(k.created_at),
        revokedAt=None if k.revoked_at is None else to_rfc3339(k.revoked_at),
    )


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


@router.post(
    "/v1/admin/keys",
    status_code=201,
    response_model=NewKeyOut,
    responses=responses(401, 403, 413, 422, 503),
)
async def create_key(request: Request, body: KeyIn) -> NewKeyOut:
    key, secret = await _podium(request).keys.create(body.name, body.modes, scope=Scope(body.scope))
    return NewKeyOut(**_out(key).model_dump(), secret=secret)


@router.get("/v1/admin/keys", response_model=KeysOut, responses=responses(401, 403, 503))
async def list_keys(request: Request) -> KeysOut:
    return KeysOut(keys=[_out(k) for k in await _podium(request).keys.all()])


@router.delete(
    "/v1/admin/keys/{keyId}", status_code=204, responses=responses(401, 403, 404, 422, 503)
)
async def revoke_key(request: Request, keyId: KeyId) -> Response:
    """Revoke a key: this process refuses it at once, every API process within
    ``server.key_cache_s`` (10 s by default). Revoking a revoked key changes nothing."""
    await _podium(request).keys.revoke(keyId)
    return Response(status_code=204)
