"""JSON bodies of the two hot read routes, written straight from the read results.

Building a pydantic model per entry and validating it against ``response_model`` cost more
CPU than the rest of a cached page read (BENCHMARKS.md, "Where the time goes"). These
functions emit the same JSON as ``schemas.PageOut`` and ``schemas.RankOut`` with
``exclude_none`` (the routes keep those models for the OpenAPI document, and a test holds
the two to the same output). A page also keeps its encoded body for as long as the read
side keeps the page itself, so a cached page is encoded once per refill, not per request.
"""

from __future__ import annotations

import json
import time
from typing import Any

from podium.domain.metadata import shown
from podium.domain.windows import to_rfc3339
from podium.service.views import Entry, Page, PlayerRank
from podium.util.caching import Cache

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# Bodies held: one per (board, window, offset, limit) asked for lately, the one written
# longest ago going first past the bound. A body is served only with the very page it was encoded
# from, so HELD_S only frees the memory of slots nobody asks for any more: the read side
# replaces a page every ``server.page_cache_s`` (1 s by default).
MAX_HELD = 10_000
HELD_S = 60.0


def _entry(e: Entry) -> dict[str, Any]:
    out: dict[str, Any] = {"rank": e.rank, "playerId": e.player_id, "points": e.points}
    if e.name is not None:
        out["name"] = e.name
    if e.avatar is not None:
        out["avatar"] = e.avatar
    if e.global_rank is not None:
        out["globalRank"] = e.global_rank
    if e.global_exact is not None:
        out["globalExact"] = e.global_exact
    if e.metadata is not None:
        out["metadata"] = shown(e.metadata)
    return out


def page_body(p: Page) -> dict[str, Any]:
    """A page as ``GET /v1/boards/{board}`` answers it; the live stream sends the same."""
    return {
        "board": p.board,
        "window": p.window,
        "asOf": to_rfc3339(p.as_of),
        "entries": [_entry(e) for e in p.entries],
        **({"next": p.next} if p.next is not None else {}),
        **({"prev": p.prev} if p.prev is not None else {}),
    }


def page_json(p: Page) -> bytes:
    return _dumps(page_body(p)).encode()


def rank_json(r: PlayerRank) -> bytes:
    body: dict[str, Any] = {
        "board": r.board,
        "window": r.window,
        "rank": r.rank,
        "exact": r.exact,
        "points": r.points,
    }
    if r.rank_low is not None:
        body["rankLow"] = r.rank_low
    if r.rank_high is not None:
        body["rankHigh"] = r.rank_high
    if r.top_percent is not None:
        body["topPercent"] = r.top_percent
    if r.as_of is not None:
        body["asOf"] = to_rfc3339(r.as_of)
    body["neighbors"] = [_entry(e) for e in r.neighbors]
    return _dumps(body).encode()


class EncodedPages:
    """The body of each page the read side hands out, encoded on first use.

    Held per slot, with the page it was encoded from: the read side returns the very same
    page object while it caches a page, and a refill is a new object, so a stale body is
    never served.
    """

    def __init__(self) -> None:
        self._held: Cache[tuple[str, str, int, int], tuple[Page, bytes]] = Cache(
            MAX_HELD, HELD_S, time.monotonic
        )

    def body(self, page: Page, slot: tuple[str, str, int, int]) -> bytes:
        """``slot``: what the page was asked by (board, window, offset, limit); a newer
        page of the same slot replaces the older one's body."""
        hit = self._held.get(slot)
        if hit is not None and hit[0] is page:
            return hit[1]
        body = page_json(page)
        self._held.put(slot, (page, body))
        return body
