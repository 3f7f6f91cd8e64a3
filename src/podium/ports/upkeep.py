"""``UpkeepRecords``: where a running rebuild or reshard says how far it is, so that every API
process can tell (``GET /v1/admin/upkeep``, the console's boards page), whichever process
runs it (``podium rebuild`` is a command of its own). Kept in the index, beside what the
rebuild itself holds there (its generation pointers, the layout record's next count): each
record lives a few seconds unless its run renews it, so a run that died leaves nothing for
long; a finished one stays a minute, to be seen done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Running:
    """One run as it last said: what runs, its phase, and its count of players done."""

    id: str
    kind: str  # "rebuild" or "reshard"
    windows: list[str]  # "<board> <window>", each window it rebuilds
    started_at: float
    updated_at: float
    phase: str  # "filling", "replaying", "comparing", "switching", ..., "done", "failed"
    window: str | None = None  # the window being filled
    done: int = 0  # players written into that window so far
    total: int | None = None  # players the store holds there (None: not known yet)
    windows_done: int = 0  # windows filled before it
    shards_from: int | None = None  # a reshard's count before
    shards_to: int | None = None  # and after
    detail: str | None = None  # the last thing the run said, or why it failed


class UpkeepRecords(Protocol):
    async def publish(self, run: Running, ttl_s: float) -> None:
        """Say how far a run is (replacing what it said before), for ``ttl_s`` seconds."""
        ...

    async def running(self, now: float) -> list[Running]:
        """Every run whose record has not run out at ``now``, the latest started first."""
        ...
