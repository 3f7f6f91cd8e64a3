"""The bare-framework reference: FastAPI on uvicorn, the same routes and request model as
podium, and no work behind them.

POST parses the body with podium's own ``MatchIn`` pydantic model (so the parsing cost is
identical) and returns a constant; the two GETs return constants of the size and shape of
podium's answers (a rank with 2 neighbours on each side, a page of 100). It is started the
way ``podium serve`` starts uvicorn: ``uvicorn.run(app, ...)``, loop and HTTP parser on
"auto" (uvloop and httptools here), no access log.

    python benchmarks/_bare_app.py --port 8001
"""

from __future__ import annotations

import argparse
from typing import Annotated, Any

import uvicorn
from fastapi import FastAPI, Path, Query

from podium.api.schemas import ID, MatchIn

app = FastAPI()

_RANK: dict[str, Any] = {
    "board": "week",
    "window": "2026-W48",
    "rank": 51234,
    "exact": True,
    "points": 48211,
    "neighbors": [
        {"rank": 51232 + i, "playerId": f"p_{40000 + i:06d}", "points": 48215 - i} for i in range(5)
    ],
}
_PAGE: dict[str, Any] = {
    "board": "week",
    "window": "2026-W48",
    "asOf": "2026-11-29T18:00:00Z",
    "entries": [
        {"rank": i + 1, "playerId": f"p_{10000 + i:06d}", "points": 99999 - i} for i in range(100)
    ],
}


@app.post("/v1/matches/{matchId}/results")
async def post_results(body: MatchIn, matchId: Annotated[str, Path(pattern=ID)]) -> Any:
    return {
        "matchId": matchId,
        "players": [
            {"playerId": r.playerId, "totals": {"season": 1, "week": 1, "day": 1}}
            for r in body.results
        ],
    }


@app.get("/v1/boards/{board}/players/{playerId}")
async def player_rank(
    board: str,
    playerId: Annotated[str, Path(pattern=ID)],
    neighbors: Annotated[int, Query(ge=0, le=50)] = 2,
) -> Any:
    return _RANK


@app.get("/v1/boards/{board}")
async def board_page(
    board: str,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
) -> Any:
    return _PAGE


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
