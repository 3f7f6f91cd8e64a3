"""The Redis rank index: one sorted set per board window, written by server-side scripts.

Scores are integers below 2**53 (DESIGN §2), which a Redis double holds exactly; we send
them as decimal strings and read them back through ``int(float(...))``, or ``int(...)`` of
the double a RESP3 reply already holds.

Reads that need more than one command run as one script rather than a MULTI: the same one
instant, and much less client work per call than queueing and parsing a transaction.

The index keeps its copy of profiles (the ``ProfileCopy`` port, ``redis_profiles.py``) as
``copy``, beside its boards, so that ``around`` reads the rows' names in the same script.
Every call goes through one table of errors (errors.py). Every key name comes from keys.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from podium.index.errors import translated
from podium.index.keys import SINGLE, Keys
from podium.index.redis_profiles import RedisProfileCopy, decode_held
from podium.index.scripts import lua
from podium.ports import Around, BoardKey, Placed

CHUNK = 1000  # members per script call or ZADD during rebuilds: bounded server-side work
STAGING_TTL_S = 3600


def _order(descending: bool) -> str:
    return "desc" if descending else "asc"


def _rows(reply: list[Any]) -> list[tuple[str, int]]:
    """(member, score) rows of a ``ZRANGE ... WITHSCORES`` reply: over RESP3 (redis-py's
    default) pairs of member and double; over RESP2, and from any script, a flat list of
    member, score string, ..."""
    if reply and isinstance(reply[0], list):
        return [(m, int(s)) for m, s in reply]
    flat = iter(reply)
    return [(m, int(float(s))) for m, s in zip(flat, flat, strict=True)]


class RedisIndex:
    def __init__(self, client: Any, prefix: str = "podium") -> None:
        self._r = client
        self.keys = Keys(prefix)
        # One Redis is one shard: the copy of profiles beside its boards (keys.py).
        self.copy = RedisProfileCopy(client, self.keys, SINGLE)
        self._write = client.register_script(lua("write"))
        self._ban = client.register_script(lua("ban"))
        self._swap = client.register_script(lua("swap"))
        self._around = client.register_script(lua("around"))
        self._ranks = client.register_script(lua("ranks"))
        self._counts = client.register_script(lua("counts"))

    @staticmethod
    def client_from_url(url: str) -> Any:
        """A client for one Redis, as every index of it is made."""
        return aioredis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=5,
            socket_connect_timeout=2,
            health_check_interval=30,
        )

    @classmethod
    def from_url(cls, url: str, prefix: str = "podium") -> RedisIndex:
        return cls(cls.client_from_url(url), prefix)

    @property
    def client(self) -> Any:
        return self._r

    async def ping(self) -> None:
        with translated:
            await self._r.ping()

    async def close(self) -> None:
        await self._r.aclose()

    async def write(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        descending: bool,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
    ) -> int:
        keys = [self.keys.board(key), self.keys.bans(key), self.keys.versions(key)]
        flag = "V" if versions is not None else "GT" if descending else "LT"
        exp = "" if expire_at is None else str(expire_at)
        written = 0
        with translated:
            for i in range(0, len(entries), CHUNK):
                args: list[str] = [flag, exp]
                for j, (member, score) in enumerate(entries[i : i + CHUNK], start=i):
                    args += (member, str(score))
                    if versions is not None:
                        args.append(str(versions[j]))
                written += int(await self._write(keys=keys, args=args))
        return written

    async def remove(
        self,
        key: BoardKey,
        members: Sequence[str],
        versions: Sequence[int],
        *,
        expire_at: int | None,
    ) -> int:
        keys = [self.keys.board(key), self.keys.bans(key), self.keys.versions(key)]
        exp = "" if expire_at is None else str(expire_at)
        removed = 0
        with translated:
            for i in range(0, len(members), CHUNK):
                args: list[str] = ["R", exp]
                for m, v in zip(members[i : i + CHUNK], versions[i : i + CHUNK], strict=True):
                    args += (m, "", str(v))
                removed += int(await self._write(keys=keys, args=args))
        return removed

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        if start > stop:
            return []
        zkey = self.keys.board(key)
        # The bare command, not ``zrange(withscores=True)``: over RESP3, redis-py turns every
        # score back into bytes and then into a float again, to look like RESP2.
        args = ("REV", "WITHSCORES") if descending else ("WITHSCORES",)
        with translated:
            reply = await self._r.execute_command("ZRANGE", zkey, start, stop, *args)
        return _rows(reply)

    async def around(
        self, key: BoardKey, player_id: str, neighbors: int, *, descending: bool
    ) -> Around | None:
        with translated:
            reply = await self._around(
                keys=[self.keys.board(key), self.copy.key],
                args=[player_id, neighbors, _order(descending)],
            )
        if reply is None:
            return None
        rank, flat = reply[0], reply[1]
        rows = _rows(flat)
        profiles = None
        if len(reply) > 2:
            profiles = decode_held([m for m, _ in rows], reply[2])
        # The script sends no score of its own: the player's row holds it. One sorted set
        # holds the whole board, so every rank is exact.
        score = rows[rank - max(0, rank - neighbors)][1]
        return Around(rank, score, rows, profiles, exact=True)

    async def rank(self, key: BoardKey, player_id: str, *, descending: bool) -> Placed | None:
        return (await self.ranks(key, [player_id], descending=descending))[0]

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[Placed | None]:
        if not player_ids:
            return []
        with translated:
            reply = await self._ranks(
                keys=[self.keys.board(key)], args=[_order(descending), *player_ids]
            )
        flat = iter(reply)
        return [
            None if r is None else Placed(r, int(float(s)), True)
            for r, s in zip(flat, flat, strict=True)
        ]

    async def count(self, key: BoardKey) -> int:
        with translated:
            return int(await self._r.zcard(self.keys.board(key)))

    async def count_between(self, key: BoardKey, bounds: Sequence[int]) -> list[int]:
        if len(bounds) < 2:
            return []
        with translated:
            counts: list[int] = await self._counts(keys=[self.keys.board(key)], args=bounds)
        return counts

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        with translated:
            for key in keys:
                names = [self.keys.board(key), self.keys.bans(key), self.keys.versions(key)]
                await self._ban(keys=names, args=[player_id])

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        with translated:
            for key in keys:
                await self._r.srem(self.keys.bans(key), player_id)

    # -- rebuilds -------------------------------------------------------------------------

    async def replace(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
    ) -> None:
        """Fill a staging set, then swap it in with one script: readers see the old board or
        the new one, never a half-built one, and no ban is lost in between."""
        token = secrets.token_hex(6)
        stage, stage_ver = self.keys.staging(key, token), self.keys.staging(key, token + ":ver")
        bans = self.keys.bans(key)
        with translated:
            banned = set(await self._r.smembers(bans))
            kept = [
                (m, s, versions[i] if versions is not None else 0)
                for i, (m, s) in enumerate(entries)
                if m not in banned
            ]
            try:
                for i in range(0, len(kept), CHUNK):
                    chunk = kept[i : i + CHUNK]
                    pipe = self._r.pipeline(transaction=False)
                    pipe.zadd(stage, {m: s for m, s, _ in chunk})
                    if versions is not None:
                        pipe.hset(stage_ver, mapping={m: v for m, _, v in chunk})
                    # a rebuild that dies half way leaves nothing behind for long
                    pipe.expire(stage, STAGING_TTL_S)
                    pipe.expire(stage_ver, STAGING_TTL_S)
                    await pipe.execute()
                exp = "" if expire_at is None else str(expire_at)
                keys = [stage, self.keys.board(key), bans, stage_ver, self.keys.versions(key)]
                await self._swap(keys=keys, args=[exp])
            finally:
                await self._r.delete(stage, stage_ver)
