"""The copy of profiles on a split index: each shard keeps its own players' profiles.

A player's rows live only on their shard, so their name is needed only there (keys.py), and
each shard's copy has its own completeness mark and copier's lease. This puts them together
behind the one ``ProfileCopy`` port: a write goes to each profile's shard, a read asks the
shards holding the players asked for (at once), and the copy is complete only when every
shard's is. The copier takes every shard's lease, the first shard's first: two copiers that
start together meet on that one, and one of them gives way before touching the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from podium.domain.models import Profile
from podium.domain.sharding import shard_of
from podium.ports import ProfileCopy


class SplitProfileCopy:
    def __init__(self, copies: Sequence[ProfileCopy]) -> None:
        self.copies = list(copies)

    def _groups(self, player_ids: Sequence[str]) -> dict[int, list[str]]:
        groups: dict[int, list[str]] = {}
        for p in player_ids:
            groups.setdefault(shard_of(p, len(self.copies)), []).append(p)
        return groups

    async def write_profiles(self, entries: Sequence[tuple[Profile, int]]) -> int:
        groups: dict[int, list[tuple[Profile, int]]] = {}
        for entry in entries:
            groups.setdefault(shard_of(entry[0].player_id, len(self.copies)), []).append(entry)
        kept = await asyncio.gather(
            *(self.copies[s].write_profiles(part) for s, part in groups.items())
        )
        return sum(kept)

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile] | None:
        groups = self._groups(player_ids)
        found = await asyncio.gather(*(self.copies[s].profiles(ids) for s, ids in groups.items()))
        out: dict[str, Profile] = {}
        for part in found:
            if part is None:
                return None  # one shard's copy is not complete: the store answers instead
            out.update(part)
        return out

    async def begin_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        first, *rest = self.copies
        if not await first.begin_profiles_copy(token, now, lease_s):
            return False
        taken = await asyncio.gather(*(c.begin_profiles_copy(token, now, lease_s) for c in rest))
        return all(taken)

    async def keep_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        kept = await asyncio.gather(
            *(c.keep_profiles_copy(token, now, lease_s) for c in self.copies)
        )
        return all(kept)

    async def end_profiles_copy(self, token: str) -> bool:
        ended = await asyncio.gather(*(c.end_profiles_copy(token) for c in self.copies))
        return all(ended)

    async def profiles_complete(self) -> bool:
        done = await asyncio.gather(*(c.profiles_complete() for c in self.copies))
        return all(done)
