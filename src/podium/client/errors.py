"""What a call to podium can fail with: a problem+json answer as a typed exception, or no
answer at all.

Every refusal of podium is an RFC 9457 ``application/problem+json`` body with its status,
title and detail (docs/architecture.md, invariant 7). Each status a caller handles
differently has a class of its own, so that ``except Conflict`` catches a 409 and nothing
else; a status without one is a plain ``ProblemError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class PodiumClientError(Exception):
    """Anything a podium client raises."""


class TransportFailed(PodiumClientError):
    """No answer: the connection failed, or the request timed out (its cause is httpx's
    error). A submission that ends so may or may not have been recorded; sending the same
    match again is safe and says which."""


class ProblemError(PodiumClientError):
    """An answer with an error status. ``retry_after``: the seconds of its ``Retry-After``
    (429, 503), when it gave one."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        type: str = "about:blank",
        errors: tuple[Mapping[str, str], ...] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.errors = errors  # a 422 of a malformed request names each field at fault
        self.retry_after = retry_after


class Unauthorized(ProblemError):
    """401: no key, or an unknown or revoked one."""


class Forbidden(ProblemError):
    """403: a key that may not do this (another mode, another server's match, not a game
    server's key)."""


class NotFound(ProblemError):
    """404: an unknown board, window or player."""


class Conflict(ProblemError):
    """409: the match was recorded with other content, or standings not frozen yet."""


class Invalid(ProblemError):
    """422: invalid input; ``detail`` (and ``errors``) say which field and why."""


class RateLimited(ProblemError):
    """429: over a rate (a player's hourly cap, or the read rate); see ``retry_after``."""


class Unavailable(ProblemError):
    """503: a backend is out or the process is overloaded; nothing was recorded."""


class ServerError(ProblemError):
    """Any other 5xx: a bug on the server (logged there), or a proxy's answer."""


_BY_STATUS: dict[int, type[ProblemError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
    429: RateLimited,
    503: Unavailable,
}


def retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds. podium sends whole seconds; an HTTP date (which a proxy
    might send) or anything else unreadable counts as absent, and the backoff applies."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def problem(status: int, body: bytes, headers: Mapping[str, str]) -> ProblemError:
    """The exception for an error answer. A body that is not problem+json (a proxy's HTML
    page, say) still gives the status, with the text as the detail."""
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ProblemError)
    title, detail, kind = "", "", "about:blank"
    errors: tuple[Mapping[str, str], ...] = ()
    try:
        data: Any = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        title = str(data.get("title", ""))
        detail = str(data.get("detail", ""))
        kind = str(data.get("type", kind))
        if isinstance(data.get("errors"), list):
            errors = tuple(e for e in data["errors"] if isinstance(e, dict))
    else:
        detail = body[:500].decode("utf-8", "replace")
    return cls(
        status,
        title or f"HTTP {status}",
        detail or "(no detail)",
        type=kind,
        errors=errors,
        retry_after=retry_after(headers.get("retry-after")),
    )
