"""A board window rebuilt on Redis beside the live one (the ``Rebuilding`` port,
``service/upkeep/gapless.py`` runs the procedure): a new generation of its keys
(``Keys.of_generation``), filled in bulk, then switched in by one script.

- ``begin_build`` sets the window's pointer (``Keys.next_generation``, SET NX with a time to
  live the rebuild renews): from then on write.lua and ban.lua apply every change to both
  generations, in the same step.
- ``fill_build`` writes a page of the store's entries into the new generation: ``ZADD GT``
  (``LT``; plain on a versioned board) of 2,500 members a command, the versions and the
  metadata in ``HSET``s beside, every command of a page packed here as RESP bytes and sent in
  one write on one connection, the replies read after. redis-py's own packing is pure
  Python on its asyncio connections and cost a fifth of a rebuild's time (issue 19); a
  page is packed with one ``%`` format per member.
- ``switch_build`` renames the new generation over the live one (switch.lua), the live
  keys renamed aside; ``drop_build`` unlinks those after the grace period (UNLINK frees them
  off Redis's main thread).

On Redis Cluster each command goes to the node of its key's slot (every key of one shard's
part of a window shares the shard's tag, keys.py), over that node's own connections.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster

from podium.errors import IndexUnavailable
from podium.index.redis.errors import translated
from podium.index.redis.keys import Keys
from podium.index.redis.scripts import Script
from podium.ports import BoardKey, Meta

FILL_CHUNK = 2500  # members per ZADD or HSET of a fill: bounded work per command on Redis
STAGING_TTL_S = 3600  # what a new generation lives at most until its switch (write.lua too)
RETIRED_TTL_S = 3600  # what the retired generation lives at most past the grace period

SWITCH = Script("switch")
KEEP = Script("keep")
UNLOCK = Script("unlock")


def _bulk(arg: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(arg), arg)


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(_bulk(a) for a in args)


def _zadd(key: bytes, flag: bytes | None, rows: Sequence[tuple[str, int]]) -> bytes:
    """``ZADD key [GT|LT] score member ...`` in RESP."""
    head = [b"*%d\r\n" % (2 + (flag is not None) + 2 * len(rows)), _bulk(b"ZADD"), _bulk(key)]
    if flag is not None:
        head.append(_bulk(flag))
    body = []
    for member, score in rows:
        m, s = member.encode(), b"%d" % score
        body.append(b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(s), s, len(m), m))
    return b"".join(head) + b"".join(body)


def _hset(key: bytes, pairs: Sequence[tuple[str, str]]) -> bytes:
    head = b"*%d\r\n" % (2 + 2 * len(pairs)) + _bulk(b"HSET") + _bulk(key)
    body = []
    for field, value in pairs:
        f, v = field.encode(), value.encode()
        body.append(b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(f), f, len(v), v))
    return head + b"".join(body)


class RedisRebuild:
    """The ``Rebuilding`` half of ``RedisIndex`` (which sets these attributes, and gives
    the new generation's reads, ``built``)."""

    _r: Any
    keys: Keys
    shard: int | None
    layout: int | None

    def _next(self, key: BoardKey, token: str) -> tuple[str, str, str]:
        g = self.keys.of_generation(token)
        return g.board(key), g.versions(key), g.meta(key)

    def _pointer(self, key: BoardKey, token: str) -> str:
        return "\n".join(self._next(key, token))

    async def begin_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        ms = max(1, int(ttl_s * 1000))
        with translated:
            await self._r.unlink(*self._next(key, token))  # nothing of a token seen before
            return bool(
                await self._r.set(
                    self.keys.next_generation(key), self._pointer(key, token), nx=True, px=ms
                )
            )

    async def keep_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        ms = max(1, int(ttl_s * 1000))
        with translated:
            held = await KEEP(
                self._r, [self.keys.next_generation(key)], [self._pointer(key, token), ms]
            )
        return bool(held)

    async def fill_build(
        self,
        key: BoardKey,
        token: str,
        entries: Sequence[tuple[str, int]],
        *,
        descending: bool,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> int:
        if not entries:
            return 0
        z, ver, meta = (n.encode() for n in self._next(key, token))
        # On a board whose totals only move with its order, GT (LT) keeps a newer total that
        # an updater already wrote into the new generation; on a versioned board the fill
        # writes the store's, and the replay after it brings back any newer one (the
        # versions held say which is newer).
        flag = None if versions is not None else b"GT" if descending else b"LT"
        out, n = [], 0
        for i in range(0, len(entries), FILL_CHUNK):
            part = entries[i : i + FILL_CHUNK]
            out.append(_zadd(z, flag, part))
            n += 1
            if versions is not None:
                vs = versions[i : i + FILL_CHUNK]
                out.append(_hset(ver, [(m, str(v)) for (m, _), v in zip(part, vs, strict=True)]))
                n += 1
            if metadata is not None:
                held = [
                    (m, f"{v}:{t}")
                    for (m, _), (v, t) in zip(part, metadata[i : i + FILL_CHUNK], strict=True)
                    if t is not None
                ]
                if held:
                    out.append(_hset(meta, held))
                    n += 1
        ttl = b"%d" % STAGING_TTL_S
        out += [_command(b"EXPIRE", k, ttl) for k in (z, ver, meta)]
        with translated:
            await self._send(z.decode(), b"".join(out), n + 3)
        return len(entries)

    async def switch_build(
        self, key: BoardKey, token: str, *, expire_at: int | None, grace_s: float
    ) -> bool:
        old = self.keys.retired(token)
        keys = [
            self.keys.next_generation(key),
            self.keys.bans(key),
            self.keys.board(key),
            self.keys.versions(key),
            self.keys.meta(key),
            *self._next(key, token),
            old.board(key),
            old.versions(key),
            old.meta(key),
            self.keys.changes(key),
            self.keys.moves(key),
        ]
        args = [
            self._pointer(key, token),
            "" if expire_at is None else str(expire_at),
            int((grace_s + RETIRED_TTL_S) * 1000),
        ]
        with translated:
            return bool(await SWITCH(self._r, keys, args))

    async def drop_build(self, key: BoardKey, token: str) -> None:
        old = self.keys.retired(token)
        with translated:
            await self._r.unlink(old.board(key), old.versions(key), old.meta(key))

    async def abort_build(self, key: BoardKey, token: str) -> None:
        with translated:
            await UNLOCK(self._r, [self.keys.next_generation(key)], [self._pointer(key, token)])
            await self._r.unlink(*self._next(key, token))

    async def _send(self, route: str, payload: bytes, replies: int) -> list[Any]:
        """Send commands packed as RESP in one write on one connection to the node that
        holds ``route``'s slot, then read their ``replies`` (an error reply raises)."""
        r = self._r
        if isinstance(r, RedisCluster):
            await r.initialize()  # at once when it knows the slots already
            node = r.get_node_from_key(route)
            if node is None:  # no primary serves the slot: a failover under way
                raise IndexUnavailable("no node serves the slot of an index shard")
            conn = node.acquire_connection()
            try:
                return await self._exchange(conn, payload, replies)
            finally:
                node.release(conn)
        pool = r.connection_pool
        conn = await pool.get_connection()
        try:
            return await self._exchange(conn, payload, replies)
        finally:
            await pool.release(conn)

    @staticmethod
    async def _exchange(conn: Any, payload: bytes, replies: int) -> list[Any]:
        try:
            await conn.send_packed_command(payload, check_health=False)
            return [await conn.read_response() for _ in range(replies)]
        except BaseException:
            # replies may be left unread on it: never hand such a connection back as is
            await conn.disconnect()
            raise
