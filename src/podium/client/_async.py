"""``AsyncClient``: the asyncio client, for game servers and tools on an event loop."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import TypeVar

import httpx

from podium.client import calls
from podium.client.errors import PodiumClientError, TransportFailed
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
)
from podium.client.retry import RetryPolicy, why

T = TypeVar("T")
log = logging.getLogger("podium.client")


class AsyncClient:
    """A podium API at ``base_url``. ``key``: a game server's key (only ``submit`` needs
    one; reads take none). ``timeout``: seconds for each request (an httpx.Timeout for
    more control). ``retry``: how ``submit`` retries; reads are tried once. ``sleep`` and
    ``rng``: the waits between tries and their jitter (tests pass their own).
    ``transport``: an httpx transport (httpx.MockTransport in tests)."""

    def __init__(
        self,
        base_url: str,
        key: str | None = None,
        *,
        timeout: float | httpx.Timeout = 5.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=timeout, transport=transport
        )
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: calls.Call[T]) -> T:
        headers = {"Content-Type": "application/json"} if call.body is not None else None
        try:
            r = await self._http.request(
                call.method, call.path, params=call.params, content=call.body, headers=headers
            )
        except httpx.TransportError as e:
            raise TransportFailed(f"{call.method} {call.path}: {e!r}") from e
        return calls.answer(call, r.status_code, r.content, r.headers)

    async def _with_retries(self, call: calls.Call[T]) -> T:
        attempt = 1
        while True:
            try:
                return await self._send(call)
            except PodiumClientError as e:
                wait = self.retry.wait(attempt, e, self._rng)
                if wait is None:
                    raise
                log.warning(
                    "%s %s: try %d failed (%s); again in %.2fs",
                    call.method,
                    call.path,
                    attempt,
                    why(e),
                    wait,
                )
                await self._sleep(wait)
                attempt += 1

    async def submit(
        self,
        match_id: str,
        results: Sequence[Result | tuple[str, int]],
        *,
        duration_seconds: int,
        mode: str = "default",
        ended_at: datetime | str | None = None,
    ) -> Recorded:
        """Record a finished match; retried as ``retry`` says, with the same body each
        time. Raises ``Conflict`` (409), ``Invalid`` (422), ``Forbidden`` (403), ... at once."""
        call = calls.submit(
            match_id, results, mode=mode, duration_seconds=duration_seconds, ended_at=ended_at
        )
        return await self._with_retries(call)

    async def boards(self) -> tuple[Board, ...]:
        return await self._send(calls.boards())

    async def page(
        self,
        board: str,
        *,
        offset: int | None = None,
        limit: int | None = None,
        window: str | None = None,
        cursor: str | None = None,
        group: str | None = None,
    ) -> Page:
        call = calls.page(
            board, offset=offset, limit=limit, window=window, cursor=cursor, group=group
        )
        return await self._send(call)

    async def rank(
        self,
        board: str,
        player_id: str,
        *,
        neighbors: int | None = None,
        above: int | None = None,
        below: int | None = None,
        window: str | None = None,
        group: str | None = None,
    ) -> Rank:
        call = calls.rank(
            board,
            player_id,
            neighbors=neighbors,
            above=above,
            below=below,
            window=window,
            group=group,
        )
        return await self._send(call)

    async def friends(
        self, board: str, player_id: str, *, window: str | None = None, group: str | None = None
    ) -> Page:
        return await self._send(calls.friends(board, player_id, window=window, group=group))

    async def lookup(
        self,
        board: str,
        ids: Sequence[str],
        *,
        window: str | None = None,
        group: str | None = None,
    ) -> Lookup:
        return await self._send(calls.lookup(board, ids, window=window, group=group))

    async def distribution(
        self,
        board: str,
        *,
        buckets: int | None = None,
        window: str | None = None,
        group: str | None = None,
    ) -> Distribution:
        call = calls.distribution(board, buckets=buckets, window=window, group=group)
        return await self._send(call)

    async def windows(
        self,
        board: str,
        *,
        group: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Windows:
        return await self._send(calls.windows(board, group=group, cursor=cursor, limit=limit))

    async def history(
        self,
        player_id: str,
        board: str,
        *,
        group: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> History:
        call = calls.history(player_id, board, group=group, cursor=cursor, limit=limit)
        return await self._send(call)

    async def groups(self, board: str, *, window: str | None = None) -> Groups:
        return await self._send(calls.groups(board, window=window))
