"""``--verify``: after the load, every submitted player's total on each board read back and
held to what their acknowledged submissions answered (invariant 2 of docs/architecture.md:
an acknowledged result is never lost, never doubled). The index is a copy brought up to
date a moment after each answer, so each is read until it agrees or a deadline passes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from podium.client import AsyncClient, Board, NotFound, PodiumClientError
from podium.loadgen.mix import player_id
from podium.loadgen.setup import direction
from podium.loadgen.stats import Verified

POLL_S = 0.1
CONCURRENCY = 16


async def verify(
    apis: tuple[str, ...],
    expected: dict[tuple[int, str], int],
    boards_then: list[Board],
    *,
    deadline_s: float,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Verified:
    """Reads each (player, board) of ``expected`` on the API that player's reads went to.
    A board whose window changed during the run (midnight UTC, say) is skipped, saying so:
    its totals started again."""
    out = Verified(players=len({p for p, _ in expected}))
    readers = [AsyncClient(api, timeout=timeout_s) for api in apis]
    try:
        now_boards = {b.name: b for b in await readers[0].boards()}
        judged: set[str] = set()
        for b in boards_then:
            if direction(b) is None:
                out.skipped.append(f"{b.name}: a {b.aggregate} board's total is not one-way")
            elif (
                now_boards.get(b.name) is None
                or now_boards[b.name].current_window != b.current_window
            ):
                out.skipped.append(f"{b.name}: its window changed during the run")
            else:
                judged.add(b.name)
        gate = asyncio.Semaphore(CONCURRENCY)
        end = clock() + deadline_s

        async def one(p: int, board: str, total: int) -> None:
            reader = readers[p % len(readers)]
            seen: int | str = "absent"
            while True:
                async with gate:
                    try:
                        seen = (await reader.rank(board, player_id(p), neighbors=0)).points
                    except NotFound:
                        seen = "absent"
                    except PodiumClientError as e:
                        seen = f"unread: {e}"
                if seen == total:
                    out.checked += 1
                    return
                if clock() > end:
                    break
                await asyncio.sleep(POLL_S)
            out.checked += 1
            out.mismatches.append(
                {"player": player_id(p), "board": board, "answered": total, "read": seen}
            )

        await asyncio.gather(
            *(one(p, b, total) for (p, b), total in sorted(expected.items()) if b in judged)
        )
    finally:
        for r in readers:
            await r.aclose()
    out.mismatches.sort(key=lambda x: (x["player"], x["board"]))
    return out
