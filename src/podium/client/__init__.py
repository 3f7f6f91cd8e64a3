"""podium's client for game servers and tools: ``Client`` (blocking) and ``AsyncClient``
(asyncio), over httpx.

``submit`` records a match and retries safely (the same match id and body each time; the
server's idempotency key is the player and the match); the reads return frozen values;
every refusal is a typed ``ProblemError``. See the README, "Client".
"""

from podium.client._async import AsyncClient
from podium.client._sync import Client
from podium.client.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    PodiumClientError,
    ProblemError,
    RateLimited,
    ServerError,
    TransportFailed,
    Unauthorized,
    Unavailable,
)
from podium.client.models import (
    Board,
    Bucket,
    Distribution,
    Entry,
    Found,
    Group,
    Groups,
    History,
    Lookup,
    Page,
    Played,
    PlayerTotals,
    Rank,
    Recorded,
    Result,
    Window,
    Windows,
)
from podium.client.retry import RetryPolicy

__all__ = [
    "AsyncClient",
    "Board",
    "Bucket",
    "Client",
    "Conflict",
    "Distribution",
    "Entry",
    "Forbidden",
    "Found",
    "Group",
    "Groups",
    "History",
    "Invalid",
    "Lookup",
    "NotFound",
    "Page",
    "Played",
    "PlayerTotals",
    "PodiumClientError",
    "ProblemError",
    "Rank",
    "RateLimited",
    "Recorded",
    "Result",
    "RetryPolicy",
    "ServerError",
    "TransportFailed",
    "Unauthorized",
    "Unavailable",
    "Window",
    "Windows",
]
