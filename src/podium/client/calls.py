"""Every call of the client as data: its method, path, query and body, and how its answer
is read. The sync and async clients only send these, so the routes, the parameters and the
parsing live here once.

Paths are built with each segment quoted: an id podium would refuse is then refused by
podium (a 422 or 404 naming it), never sent to another route.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from podium.client.errors import PodiumClientError, problem
from podium.client.models import (
    Board,
    Distribution,
    Groups,
    History,
    Lookup,
    Page,
    Rank,
    Recorded,
    Result,
    Windows,
    boards_from_json,
)

T = TypeVar("T")
Params = dict[str, str | int]


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[Any], T]
    params: Params = field(default_factory=dict)
    body: bytes | None = None


def _seg(value: str) -> str:
    return quote(value, safe="")


def _params(**given: str | int | None) -> Params:
    """The query parameters that were given (None: left to the server's default)."""
    return {k: v for k, v in given.items() if v is not None}


def answer(call: Call[T], status: int, content: bytes, headers: Mapping[str, str]) -> T:
    """The call's value from a 2xx answer; the typed exception of any other."""
    if not 200 <= status < 300:
        raise problem(status, content, headers)
    try:
        data = json.loads(content)
        return call.read(data)
    except (ValueError, KeyError, TypeError) as e:
        # A 2xx that is not podium's JSON: a proxy's page, or a server of another version.
        raise PodiumClientError(
            f"{call.method} {call.path}: an answer this client cannot read ({e!r})"
        ) from e


def _ended_at(value: datetime | str | None) -> str:
    if value is None:
        value = datetime.now(UTC).replace(microsecond=0)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("ended_at: a datetime with a time zone (UTC), not a naive one")
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def submit(
    match_id: str,
    results: Sequence[Result | tuple[str, int]],
    *,
    mode: str,
    duration_seconds: int,
    ended_at: datetime | str | None,
) -> Call[Recorded]:
    """The submission, its body encoded once: every retry sends these very bytes. Without
    ``ended_at`` the match ended now; to send the same match again in a later call, pass
    the ``ended_at`` of the first (another is a 409)."""
    body = {
        "mode": mode,
        "endedAt": _ended_at(ended_at),
        "durationSeconds": duration_seconds,
        "results": [(r if isinstance(r, Result) else Result(*r)).to_json() for r in results],
    }
    content = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return Call("POST", f"/v1/matches/{_seg(match_id)}/results", Recorded.from_json, body=content)


def boards() -> Call[tuple[Board, ...]]:
    return Call("GET", "/v1/boards", boards_from_json)


def page(
    board: str,
    *,
    offset: int | None,
    limit: int | None,
    window: str | None,
    cursor: str | None,
    group: str | None,
) -> Call[Page]:
    params = _params(offset=offset, limit=limit, window=window, cursor=cursor, group=group)
    return Call("GET", f"/v1/boards/{_seg(board)}", Page.from_json, params)


def rank(
    board: str,
    player_id: str,
    *,
    neighbors: int | None,
    above: int | None,
    below: int | None,
    window: str | None,
    group: str | None,
) -> Call[Rank]:
    params = _params(neighbors=neighbors, above=above, below=below, window=window, group=group)
    path = f"/v1/boards/{_seg(board)}/players/{_seg(player_id)}"
    return Call("GET", path, Rank.from_json, params)


def friends(board: str, player_id: str, *, window: str | None, group: str | None) -> Call[Page]:
    path = f"/v1/boards/{_seg(board)}/players/{_seg(player_id)}/friends"
    return Call("GET", path, Page.from_json, _params(window=window, group=group))


def lookup(
    board: str, ids: Sequence[str], *, window: str | None, group: str | None
) -> Call[Lookup]:
    if isinstance(ids, str):
        raise TypeError("ids: a sequence of player ids, not one string")
    params = _params(ids=",".join(ids), window=window, group=group)
    return Call("GET", f"/v1/boards/{_seg(board)}/players", Lookup.from_json, params)


def distribution(
    board: str, *, buckets: int | None, window: str | None, group: str | None
) -> Call[Distribution]:
    params = _params(buckets=buckets, window=window, group=group)
    return Call("GET", f"/v1/boards/{_seg(board)}/distribution", Distribution.from_json, params)


def windows(
    board: str, *, group: str | None, cursor: str | None, limit: int | None
) -> Call[Windows]:
    params = _params(group=group, cursor=cursor, limit=limit)
    return Call("GET", f"/v1/boards/{_seg(board)}/windows", Windows.from_json, params)


def history(
    player_id: str, board: str, *, group: str | None, cursor: str | None, limit: int | None
) -> Call[History]:
    params = _params(board=board, group=group, cursor=cursor, limit=limit)
    return Call("GET", f"/v1/players/{_seg(player_id)}/history", History.from_json, params)


def groups(board: str, *, window: str | None) -> Call[Groups]:
    path = f"/v1/boards/{_seg(board)}/groups"
    return Call("GET", path, Groups.from_json, _params(window=window))
