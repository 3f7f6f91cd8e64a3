"""Names and avatars for board entries, held in memory for a few seconds.

Every page and rank shows names, so without a cache each read pays a store round trip for
them (most of an embedded rank read's time, measured in BENCHMARKS.md). A name change shows
at once in the process that made it and within ``TTL_S`` in every other process.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.models import Profile
from podium.ports import Clock, ScoreStore

TTL_S = 5.0
MAX_ENTRIES = 200_000  # beyond this the cache starts over rather than grow without bound


class ProfileCache:
    def __init__(self, store: ScoreStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._held: dict[str, tuple[float, Profile | None]] = {}

    async def get(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        now = self._clock.now()
        out: dict[str, Profile] = {}
        missing: list[str] = []
        for p in player_ids:
            hit = self._held.get(p)
            if hit is not None and hit[0] > now:
                if hit[1] is not None:
                    out[p] = hit[1]
            else:
                missing.append(p)
        if missing:
            found = await self._store.profiles(missing)
            if len(self._held) + len(missing) > MAX_ENTRIES:
                self._held.clear()
            for p in missing:
                self._held[p] = (now + TTL_S, found.get(p))  # absent ones too: no profile yet
            out.update(found)
        return out

    def forget(self, player_id: str) -> None:
        self._held.pop(player_id, None)
