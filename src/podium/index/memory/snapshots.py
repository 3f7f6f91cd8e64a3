"""The aggregator's snapshots and lease (``Snapshots``) in process, for the embedded mode.

The same rules as in Redis (index/redis/snapshots.py): a lease that ends by the clock, a fencing
token that rises with each new holder, and snapshots kept only under the newest token by the
lease's holder, each for its time to live. One process holds them, so its aggregator and its
readers meet here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from podium.domain.marks import newest
from podium.domain.snapshot import Snapshot
from podium.ports import BoardKey
from podium.ports.erasure import ErasedAmong


class MemorySnapshots:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._holder: tuple[str, float] | None = None  # (token, lease end)
        self._fence = 0
        self._held: dict[BoardKey, tuple[bytes, float]] = {}
        self._kept = 0  # snapshots kept: each one's stamp
        self._stamps: dict[BoardKey, bytes] = {}
        self._marks: dict[tuple[str, int], float] = {}  # BoardMarks, domain/marks.py

    async def note_marks(self, marks: Mapping[tuple[str, int], float]) -> None:
        self._marks = newest(self._marks, marks.items())

    async def read_marks(self) -> dict[tuple[str, int], float]:
        return dict(self._marks)

    async def lead(self, token: str, now: float, lease_s: float) -> int | None:
        if self._holder is not None and self._holder[0] != token and self._holder[1] > now:
            return None
        if self._holder is None or self._holder[0] != token or self._holder[1] <= now:
            self._fence += 1  # a new tenure (a lapsed lease taken again is one too)
        self._holder = (token, now + lease_s)
        return self._fence

    async def publish(
        self, key: BoardKey, data: bytes, fence: int, ttl_s: float, token: str
    ) -> bool:
        now = self._clock()
        held = self._holder
        if fence != self._fence or held is None or held[0] != token or held[1] <= now:
            return False
        self._held[key] = (data, now + ttl_s)
        self._kept += 1
        self._stamps[key] = b"%d" % self._kept
        return True

    async def read(self, key: BoardKey) -> bytes | None:
        found = self._held.get(key)
        if found is None:
            return None
        if found[1] <= self._clock():
            del self._held[key]
            return None
        return found[0]

    async def stamp(self, key: BoardKey) -> bytes | None:
        return self._stamps.get(key) if await self.read(key) is not None else None

    async def erase_player(self, player_id: str) -> int:
        """Drop every snapshot that names the player (the next cycle publishes it again)."""
        quoted = f'"{player_id}"'.encode()
        naming = [k for k, (data, _) in self._held.items() if quoted in data]
        for k in naming:
            del self._held[k]
        return len(naming)

    async def sweep_erased(self, erased: ErasedAmong) -> int:
        """Drop every snapshot whose top names an erased player, found by the hash of each
        id (``ports/erasure.py``); the next cycle publishes it again."""
        naming = [k for k, (data, _) in self._held.items() if erased(Snapshot.members_of(data))]
        for k in naming:
            del self._held[k]
        return len(naming)
