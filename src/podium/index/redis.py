"""The Redis rank index: one sorted set per board window, written by server-side scripts.

Scores are integers below 2**53 (DESIGN §2), which a Redis double holds exactly; we send
them as decimal strings and read them back through ``int(float(...))``.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from podium.errors import IndexUnavailable
from podium.index.keys import Keys
from podium.ports import BoardKey

CHUNK = 1000  # members per script call or ZADD during rebuilds: bounded server-side work
STAGING_TTL_S = 3600


def _lua(name: str) -> str:
    return (resources.files("podium.index") / "lua" / f"{name}.lua").read_text()


@asynccontextmanager
async def _translated() -> AsyncIterator[None]:
    try:
        yield
    except ResponseError:
        raise  # a bug on our side (bad script or arguments), not an outage
    except RedisError as e:
        raise IndexUnavailable(f"redis: {e}") from e
    except OSError as e:
        raise IndexUnavailable(f"redis: {e}") from e


class RedisIndex:
    def __init__(self, client: Any, prefix: str = "podium") -> None:
        self._r = client
        self.keys = Keys(prefix)
        self._write = client.register_script(_lua("write"))
        self._ban = client.register_script(_lua("ban"))
        self._swap = client.register_script(_lua("swap"))

    @classmethod
    def from_url(cls, url: str, prefix: str = "podium") -> RedisIndex:
        client = aioredis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=5,
            socket_connect_timeout=2,
            health_check_interval=30,
        )
        return cls(client, prefix)

    async def ping(self) -> None:
        async with _translated():
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
        async with _translated():
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
        async with _translated():
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
        async with _translated():
            rows = await self._r.zrange(
                self.keys.board(key), start, stop, desc=descending, withscores=True
            )
        return [(m, int(s)) for m, s in rows]

    async def rank(
        self, key: BoardKey, player_id: str, *, descending: bool
    ) -> tuple[int, int] | None:
        return (await self.ranks(key, [player_id], descending=descending))[0]

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[tuple[int, int] | None]:
        if not player_ids:
            return []
        zkey = self.keys.board(key)
        async with _translated():
            # One MULTI: the scores (one ZMSCORE) and the ranks are read at the same instant.
            pipe = self._r.pipeline(transaction=True)
            pipe.zmscore(zkey, list(player_ids))
            for p in player_ids:
                (pipe.zrevrank if descending else pipe.zrank)(zkey, p)
            replies = await pipe.execute()
        scores, ranks = replies[0], replies[1:]
        return [
            None if s is None or r is None else (int(r), int(s))
            for s, r in zip(scores, ranks, strict=True)
        ]

    async def count(self, key: BoardKey) -> int:
        async with _translated():
            return int(await self._r.zcard(self.keys.board(key)))

    async def count_between(self, key: BoardKey, bounds: Sequence[int]) -> list[int]:
        if len(bounds) < 2:
            return []
        zkey = self.keys.board(key)
        async with _translated():
            pipe = self._r.pipeline(transaction=True)
            for lo, hi in itertools.pairwise(bounds):
                pipe.zcount(zkey, lo, f"({hi}")
            return [int(n) for n in await pipe.execute()]

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        async with _translated():
            for key in keys:
                names = [self.keys.board(key), self.keys.bans(key), self.keys.versions(key)]
                await self._ban(keys=names, args=[player_id])

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        async with _translated():
            for key in keys:
                await self._r.srem(self.keys.bans(key), player_id)

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
        async with _translated():
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
