"""``UpkeepRecords`` in process: what a rebuild in this process says of itself, for this
process's API (the in-process index has no other reader)."""

from __future__ import annotations

from collections.abc import Callable

from podium.ports.upkeep import Running, UpkeepRecords


class MemoryUpkeep(UpkeepRecords):
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._held: dict[str, tuple[float, Running]] = {}

    async def publish(self, run: Running, ttl_s: float) -> None:
        self._held[run.id] = (self._now() + ttl_s, run)

    async def running(self, now: float) -> list[Running]:
        self._held = {k: v for k, v in self._held.items() if v[0] > now}
        return sorted((r for _, r in self._held.values()), key=lambda r: -r.started_at)
