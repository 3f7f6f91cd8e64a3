"""The admin's routes about a player's data (issue 35): everything podium holds on them as
one JSON document (``GET /v1/admin/players/{playerId}/export``, streamed), their erasure
(``DELETE /v1/admin/players/{playerId}``, answered 202 with a receipt at once) and the
receipt polled (``GET /v1/admin/erasures/{id}``). The document's schema is
``schemas/player-export.v1.json`` (docs/export.md); ``EXPORT_SCHEMA`` names its keys, and a
unit test keeps the two the same."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from podium.api import schemas as s
from podium.api.auth import admin
from podium.api.problems import responses
from podium.domain.erasure import EXPORT_SECTIONS, Erasure, Step
from podium.domain.models import ApiKey
from podium.domain.validation import ID_IS
from podium.domain.windows import to_rfc3339
from podium.errors import NotFound
from podium.service.wiring import Service

router = APIRouter(tags=["admin"], dependencies=[Depends(admin)])
PlayerId = Annotated[str, Path(pattern=s.ID, description=ID_IS)]
ErasureId = Annotated[str, Path(pattern=r"^era_[0-9a-f]{24}$", description="a receipt's id")]

_ROWS = {"type": "array", "items": {"type": "object"}}
EXPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["format", "playerId", "exportedAt", "erased", *EXPORT_SECTIONS,
                 "archivedResults"],
    "properties": {
        "format": {"const": "podium.player-export/1"},
        "playerId": {"type": "string"},
        "exportedAt": {"type": "string", "format": "date-time"},
        "erased": {"type": "boolean", "description": "the id is one the store keeps as erased"},
        **{section: _ROWS for section in EXPORT_SECTIONS},
        "archivedResults": _ROWS,
    },
    "description": "every section is an array of rows, columns in camelCase, times in epoch "
    "seconds; each section's columns and their types: the JSON Schema "
    "schemas/player-export.v1.json (urn:podium:schema:player-export:v1), described in "
    "docs/export.md",
}  # fmt: skip


class ErasureOut(BaseModel):
    id: str = Field(description="the receipt: poll GET /v1/admin/erasures/{id}")
    state: str = Field(description="pending (being carried out) or done")
    step: str = Field(description="the step it is at: " + ", ".join(s.value for s in Step))
    requestedAt: str
    requestedBy: str = Field(description="the id of the admin key that asked")
    doneAt: str | None = None
    counts: dict[str, int] = Field(description="what was touched, by kind, so far")


def _out(e: Erasure) -> ErasureOut:
    return ErasureOut(
        id=e.id,
        state="done" if e.done_at is not None else "pending",
        step=e.step.value,
        requestedAt=to_rfc3339(e.requested_at),
        requestedBy=e.requested_by,
        doneAt=None if e.done_at is None else to_rfc3339(e.done_at),
        counts=e.counts,
    )


def _podium(request: Request) -> Service:
    return request.app.state.podium  # type: ignore[no-any-return]


@router.get(
    "/v1/admin/players/{playerId}/export",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "everything podium holds on the player, streamed",
            "content": {"application/json": {"schema": EXPORT_SCHEMA}},
        },
        **responses(401, 403, 422, 503),
    },
)
async def export_player(request: Request, playerId: PlayerId) -> StreamingResponse:
    """One JSON document with everything podium holds on the player: profile, results with
    their metadata and the claims of their matches, archived results, tallies, final
    standings, cohort placements and tiers, tournament entries, friends both ways, ban,
    flags, outbox rows, and the reward events and webhook deliveries that name them.
    Streamed a page at a time (docs/export.md)."""
    chunks = await _podium(request).erasures.export(playerId)
    return StreamingResponse(
        chunks,
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{playerId}.json"'},
    )


@router.delete(
    "/v1/admin/players/{playerId}",
    status_code=202,
    response_model=ErasureOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 422, 503),
)
async def erase_player(
    request: Request, playerId: PlayerId, key: Annotated[ApiKey, Depends(admin)]
) -> JSONResponse:
    """Erase the player everywhere, for good: answered at once with a receipt, carried out
    by the eraser role. From this answer on, a result for the player is refused (403
    "Player erased"). Again for the same player: the same receipt."""
    e = await _podium(request).erasures.request(playerId, key.id)
    body = _out(e).model_dump(exclude_none=True)
    return JSONResponse(body, status_code=202, headers={"Location": f"/v1/admin/erasures/{e.id}"})


@router.get(
    "/v1/admin/erasures/{erasureId}",
    response_model=ErasureOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 404, 422, 503),
)
async def erasure(request: Request, erasureId: ErasureId) -> ErasureOut:
    """An erasure's state: its step, and the counts of what it touched. Never names the
    player: the store keeps only a keyed hash of the id."""
    e = await _podium(request).erasures.status(erasureId)
    if e is None:
        raise NotFound(f"no erasure {erasureId}")
    return _out(e)
