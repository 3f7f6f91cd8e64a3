"""Names and avatars for board entries: held in memory for a few seconds, and in
production read from a copy shared by every process (``ProfileCopy``) before the store.

Every page and rank shows names, so without a cache each read pays a store round trip for
them (most of an embedded rank read's time, measured in BENCHMARKS.md), and in production a
read would wait on Postgres, behind whatever the writes are doing there. A name change shows
at once in the process that made it and within ``ttl_s`` in every other process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from podium.domain.models import Profile
from podium.errors import Unavailable
from podium.ports import Clock, ProfileCopy, ScoreStore

TTL_S = 5.0  # the default of server.name_cache_s
MAX_ENTRIES = 200_000  # beyond this the cache starts over rather than grow without bound

log = logging.getLogger("podium.profiles")


class ProfileCache:
    def __init__(
        self,
        store: ScoreStore,
        clock: Clock,
        copy: ProfileCopy | None = None,
        ttl_s: float = TTL_S,
    ) -> None:
        self._store = store
        self._clock = clock
        self._copy = copy
        self._ttl = ttl_s
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
            found = await self._fetch(missing)
            if len(self._held) + len(missing) > MAX_ENTRIES:
                self._held.clear()
            for p in missing:
                profile = found.get(p)  # absent ones too: no profile yet
                self._held[p] = (now + self._ttl, profile)
                if profile is not None:
                    out[p] = profile
        return out

    async def _fetch(self, player_ids: list[str]) -> dict[str, Profile | None]:
        found: dict[str, Profile | None] = {}
        if self._copy is not None:
            try:
                found = await self._copy.get(player_ids)
            except Unavailable as e:  # the copy is only a shortcut: the store answers
                log.warning("profile copy unreachable, reading the store: %s", e)
        rest = [p for p in player_ids if p not in found]
        if rest:
            stored = await self._store.profiles(rest)
            fresh = {p: stored.get(p) for p in rest}
            found.update(fresh)
            if self._copy is not None:
                try:
                    await self._copy.fill(fresh)
                except Unavailable as e:
                    log.warning("profile copy unreachable, not filled: %s", e)
        return found

    async def changed(self, player_id: str) -> None:
        """After a profile change committed: forget it here, and mark it changed in the
        shared copy (an outage there is an error: the caller retries, which is safe)."""
        self._held.pop(player_id, None)
        if self._copy is not None:
            await self._copy.changed([player_id])
