"""``GET /v1/admin/upkeep``: the rebuilds and reshards running now, wherever they run (each
says how far it is through the index, ``ports/upkeep.py``), and those finished in the last
minute. Read-only: an ops key reads it as the admin's does."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from podium.api.auth import admin_or_ops
from podium.api.problems import responses
from podium.domain.windows import to_rfc3339
from podium.ports.upkeep import Running
from podium.service.wiring import Service

router = APIRouter(tags=["admin"], dependencies=[Depends(admin_or_ops)])


class RunOut(BaseModel):
    id: str
    kind: str = Field(description="rebuild, or reshard (the index's shard count changed)")
    windows: list[str] = Field(description="each board window it rebuilds: board, window id")
    phase: str = Field(
        description="filling, replaying the log, comparing, switching, ...; done or failed"
    )
    window: str | None = Field(None, description="the window being filled")
    done: int = Field(description="players written into that window so far")
    total: int | None = Field(None, description="players the store holds there")
    windowsDone: int = Field(description="windows filled before it")
    shardsFrom: int | None = Field(None, description="a reshard's shard count before")
    shardsTo: int | None = Field(None, description="and after")
    startedAt: str
    updatedAt: str = Field(description="when it last said how far it is (about every second)")
    detail: str | None = Field(None, description="the last line it said, or why it failed")


class UpkeepOut(BaseModel):
    running: list[RunOut] = Field(description="latest started first")


def _run(r: Running) -> RunOut:
    return RunOut(
        id=r.id,
        kind=r.kind,
        windows=r.windows,
        phase=r.phase,
        window=r.window,
        done=r.done,
        total=r.total,
        windowsDone=r.windows_done,
        shardsFrom=r.shards_from,
        shardsTo=r.shards_to,
        startedAt=to_rfc3339(r.started_at),
        updatedAt=to_rfc3339(r.updated_at),
        detail=r.detail,
    )


@router.get(
    "/v1/admin/upkeep",
    response_model=UpkeepOut,
    response_model_exclude_none=True,
    responses=responses(401, 403, 503),
)
async def upkeep(request: Request) -> UpkeepOut:
    """The rebuilds (``podium rebuild``) and reshards (``--shards``) running now, with their
    phase and players done, and those that ended in the last minute (done or failed). An
    admin or an ops key."""
    podium: Service = request.app.state.podium
    found = await podium.upkeep.running(podium.clock.now())
    return UpkeepOut(running=[_run(r) for r in found])
