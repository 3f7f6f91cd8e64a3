"""Display profiles copied into Redis, one key per player, read before the store.

A key holds the profile as JSON, ``""`` for a player known to have no profile, or the
marker ``CHANGED`` for a few seconds after the profile changed. Reads fill missing keys with
``SET NX``, so a read that fetched the old profile from the store just before the change
committed cannot put it back over the marker; once the marker is gone, the next read fills
the key from the store again. Every key expires (``TTL_S``), which also bounds how long a
copy could outlive a change whose marker was never written (a process that died between its
commit and this call).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from podium.domain.models import Profile
from podium.index.keys import Keys
from podium.index.redis import translated

TTL_S = 3600
CHANGED = "!"
CHANGED_TTL_S = 10  # far longer than a read takes from its store lookup to its fill


def _encode(p: Profile | None) -> str:
    if p is None:
        return ""
    return json.dumps({"n": p.name, "a": p.avatar, "c": p.country}, separators=(",", ":"))


def _decode(player_id: str, raw: str) -> Profile | None:
    if raw == "":
        return None
    d = json.loads(raw)
    return Profile(player_id, d["n"], d["a"], d["c"])


class RedisProfileCopy:
    def __init__(self, client: Any, keys: Keys) -> None:
        self._r = client
        self._keys = keys

    async def get(self, player_ids: Sequence[str]) -> dict[str, Profile | None]:
        ids = list(player_ids)
        if not ids:
            return {}
        async with translated():
            raws = await self._r.mget([self._keys.profile(p) for p in ids])
        return {
            p: _decode(p, raw)
            for p, raw in zip(ids, raws, strict=True)
            if raw not in (None, CHANGED)
        }

    async def fill(self, profiles: dict[str, Profile | None]) -> None:
        if not profiles:
            return
        async with translated():
            pipe = self._r.pipeline(transaction=False)
            for p, profile in profiles.items():
                pipe.set(self._keys.profile(p), _encode(profile), ex=TTL_S, nx=True)
            await pipe.execute()

    async def changed(self, player_ids: Sequence[str]) -> None:
        if not player_ids:
            return
        async with translated():
            pipe = self._r.pipeline(transaction=False)
            for p in player_ids:
                pipe.set(self._keys.profile(p), CHANGED, ex=CHANGED_TTL_S)
            await pipe.execute()
