"""The aggregator's snapshots and lease (``Snapshots``) in Redis, beside the boards.

All three kinds of key share the tag ``{agg}`` (keys.py), so that on a Redis Cluster the
check of the fencing token and the write of a snapshot run in one script, on one node. The
lease is a key with a time to live, so Redis's own clock ends it: the ``now`` the port passes
serves the in-process adapter only. Snapshots are ASCII JSON (``domain.snapshot``), which the
client's decoded replies return unchanged.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Mapping
from typing import Any

from podium.index.redis.erasure import erase_member, sweep_snapshots
from podium.index.redis.errors import translated
from podium.index.redis.keys import Keys
from podium.index.redis.scripts import lua
from podium.ports import BoardKey
from podium.ports.erasure import ErasedAmong


class RedisSnapshots:
    def __init__(self, client: Any, keys: Keys) -> None:
        self._r = client
        self._keys = keys
        self._lead = client.register_script(lua("lead"))
        self._publish = client.register_script(lua("publish"))
        self._marks = client.register_script(lua("marks"))
        # Each snapshot's stamp: this process's own name and how many it published, so no two
        # are ever alike (a counter in Redis could go back with a replica promoted while behind,
        # and a reader would then take a new snapshot for one it holds).
        self._me = secrets.token_hex(6)
        self._published = itertools.count(1)

    async def note_marks(self, marks: Mapping[tuple[str, int], float]) -> None:
        if not marks:
            return
        args: list[str] = []
        for (db, p), at in sorted(marks.items()):
            args += [f"{db}/{p}", repr(float(at))]
        with translated:
            await self._marks(keys=[self._keys.marks()], args=args)

    async def read_marks(self) -> dict[tuple[str, int], float]:
        with translated:
            held = await self._r.hgetall(self._keys.marks())
        out: dict[tuple[str, int], float] = {}
        for field, at in held.items():
            f = field.decode() if isinstance(field, bytes) else str(field)
            db, _, p = f.rpartition("/")
            out[(db, int(p))] = float(at)
        return out

    async def lead(self, token: str, now: float, lease_s: float) -> int | None:
        with translated:
            fence = await self._lead(
                keys=[self._keys.lease(), self._keys.fence()],
                args=[token, max(1, int(lease_s * 1000))],
            )
        return None if fence is None else int(fence)

    async def publish(
        self, key: BoardKey, data: bytes, fence: int, ttl_s: float, token: str
    ) -> bool:
        stamp = f"{self._me}:{next(self._published)}"
        with translated:
            kept = await self._publish(
                keys=[
                    self._keys.fence(),
                    self._keys.snapshot(key),
                    self._keys.snapshot_stamp(key),
                    self._keys.lease(),
                ],
                args=[fence, data, max(1, int(ttl_s * 1000)), token, stamp],
            )
        return bool(kept)

    async def read(self, key: BoardKey) -> bytes | None:
        return await self._bytes(self._keys.snapshot(key))

    async def stamp(self, key: BoardKey) -> bytes | None:
        return await self._bytes(self._keys.snapshot_stamp(key))

    async def _bytes(self, name: str) -> bytes | None:
        with translated:
            data = await self._r.get(name)
        if data is None:
            return None
        return data.encode() if isinstance(data, str) else bytes(data)

    async def erase_player(self, player_id: str) -> int:
        """Drop every snapshot that names the player (the next cycle publishes it again)."""
        return await erase_member(self._r, self._keys.prefix, player_id, "{agg}:snap:*")

    async def sweep_erased(self, erased: ErasedAmong) -> int:
        """Drop every snapshot whose top names an erased player, by the hash of each id."""
        return await sweep_snapshots(self._r, self._keys.prefix, erased)
