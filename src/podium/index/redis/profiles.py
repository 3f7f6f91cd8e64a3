"""The Redis copy of profiles (``ProfileCopy``): one hash in the slot of one shard.

A field per player holds the JSON array ``[version, name, avatar, country]``
(``lua/profiles.lua`` keeps the newest version); the field ``""`` (no player id is empty)
is the copy's mark: ``copying:<token>:<lease end>`` while one copier fills it,
``complete:<run_id>`` once filled (``lua/copy.lua``). The mark lives in the hash, so a Redis
that lost the copy lost the mark too.

The hash is named by ``Keys.profiles(tag)``: a single index's, ``SINGLE``, or a shard's
(``{s03}``). A split board's index keeps one ``RedisProfileCopy`` per shard, each beside its
shard's boards in the same slot, so that ``lua/around.lua`` reads the rows' names in the
same script as the rows (``RedisIndex.around``, with ``decode_held``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster

from podium.domain.models import Profile
from podium.index.redis.errors import translated
from podium.index.redis.keys import Keys
from podium.index.redis.scripts import Script

CHUNK = 1000  # profiles per script call: bounded server-side work
MARK = ""  # the hash's field that holds the mark
COMPLETE = "complete:"
WRITE = Script("profiles")
MARK_SCRIPT = Script("copy")


def decode(player_id: str, held: str) -> Profile:
    """A profile from its field in the hash."""
    _, name, avatar, country = json.loads(held)
    return Profile(player_id, name, avatar, country)


def decode_held(player_ids: Sequence[str], held: Sequence[str | None]) -> dict[str, Profile]:
    """Profiles from an ``HMGET`` of these players' fields (none for a player without one)."""
    return {p: decode(p, v) for p, v in zip(player_ids, held, strict=True) if v}


class RedisProfileCopy:
    """``ProfileCopy`` on one hash of one Redis (or one shard's slot)."""

    def __init__(self, client: Any, keys: Keys, tag: str) -> None:
        self._r = client
        self.key = keys.profiles(tag)

    async def write_profiles(self, entries: Sequence[tuple[Profile, int]]) -> int:
        kept = 0
        with translated:
            for i in range(0, len(entries), CHUNK):
                args: list[str | int] = []
                for p, version in entries[i : i + CHUNK]:
                    held = json.dumps([version, p.name, p.avatar, p.country], separators=(",", ":"))
                    args += (p.player_id, version, held)
                kept += int(await WRITE(self._r, [self.key], args))
        return kept

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile] | None:
        with translated:
            mark, *held = await self._r.hmget(self.key, [MARK, *player_ids])
        if not (mark or "").startswith(COMPLETE):
            return None
        return decode_held(player_ids, held)

    async def begin_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        return await self._set_mark("begin", token, repr(now + lease_s), repr(now))

    async def keep_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        return await self._set_mark("keep", token, repr(now + lease_s))

    async def end_profiles_copy(self, token: str) -> bool:
        return await self._set_mark("end", token, await self._run_id())

    async def profiles_complete(self) -> bool:
        with translated:
            mark = await self._r.hget(self.key, MARK)
        return bool(mark == COMPLETE + await self._run_id())

    async def _set_mark(self, *args: str) -> bool:
        with translated:
            return bool(await MARK_SCRIPT(self._r, [self.key], args))

    async def _run_id(self) -> str:
        """The id Redis draws each time it starts: a copy marked complete under another one
        was marked before a restart (from a snapshot) or on another server (a replica).
        On a cluster, the id of the primary that holds this copy's slot, not of whichever
        node the client would ask."""
        with translated:
            if isinstance(self._r, RedisCluster):
                node = self._r.get_node_from_key(self.key)
                info = await self._r.info("server", target_nodes=node)
            else:
                info = await self._r.info("server")
        return str(info["run_id"])
