"""The in-process copy of profiles (``ProfileCopy``), kept beside the in-process boards.

The same rules as the Redis copy (index/redis/profiles.py): a profile is kept only if its
version is newer than the one held; the copy is complete only once one copier, under a
lease it keeps, filled it and marked it so; until then reads are told None (unknown), not
"no profile". ``MemoryIndex.around`` reads the rows' names from it in the same step.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.models import Profile


class MemoryProfileCopy:
    def __init__(self) -> None:
        self._held: dict[str, tuple[Profile, int]] = {}
        self._complete = False
        self._copier: tuple[str, float] | None = None  # (token, lease end) while filled

    def clear(self) -> None:
        self._held.clear()
        self._complete = False
        self._copier = None

    def forget(self, player_id: str) -> int:
        """The player's profile out of the copy (an erasure); 1 if it was held."""
        return 0 if self._held.pop(player_id, None) is None else 1

    def ids(self) -> list[str]:
        """Every player whose profile is held (a sweep's walk)."""
        return list(self._held)

    def held(self, player_ids: Sequence[str]) -> dict[str, Profile] | None:
        """The profiles of these players, or None while the copy is not complete."""
        if not self._complete:
            return None
        out = {}
        for p in player_ids:
            found = self._held.get(p)
            if found is not None:
                out[p] = found[0]
        return out

    async def write_profiles(self, entries: Sequence[tuple[Profile, int]]) -> int:
        kept = 0
        for profile, version in entries:
            found = self._held.get(profile.player_id)
            if found is None or version > found[1]:
                self._held[profile.player_id] = (profile, version)
                kept += 1
        return kept

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile] | None:
        return self.held(player_ids)

    async def begin_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        if self._copier is not None and self._copier[0] != token and self._copier[1] > now:
            return False
        self._copier = (token, now + lease_s)
        self._complete = False
        return True

    async def keep_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        if self._copier is None or self._copier[0] != token:
            return False
        self._copier = (token, now + lease_s)
        return True

    async def end_profiles_copy(self, token: str) -> bool:
        if self._copier is None or self._copier[0] != token:
            return False
        self._copier = None
        self._complete = True
        return True

    async def profiles_complete(self) -> bool:
        return self._complete
