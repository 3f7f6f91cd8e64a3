"""The Redis rank index: one sorted set per board window, written by server-side scripts.

Scores are integers below 2**53 (docs/architecture.md §2), which a Redis double holds
exactly; we send them as decimal strings and read them back through ``int(float(...))``, or
``int(...)`` of the double a RESP3 reply already holds.

Reads that need more than one command run as one script rather than a MULTI: the same one
instant, and much less client work per call than queueing and parsing a transaction.

The index keeps its copy of profiles (the ``ProfileCopy`` port, ``index/redis/profiles.py``) as
``copy``, beside its boards, so that ``around`` reads the rows' names in the same script:
of the composite reads written once for every index (``index/reads.py``), it keeps its own
``around`` (around.lua, one round trip where the shared one would take three); its
``page_after`` and ``rank`` are the shared ones, one script each (slice.lua, ranks.lua).
Every call goes through one table of errors (errors.py). Every key name comes from keys.py.

With ``shard=n`` the index is one shard's part of every board (``ShardIndex``, for a board
split by player): its keys carry the shard's hash tag (``{s03}``), so on Redis Cluster each
shard lives in one slot and every script of it runs there (keys.py); S such indexes share
one client (``cluster.py``). Without a shard it is today's single index, under the names it
has always had; Redis Cluster needs a shard, since a single index reads a board and the copy
of profiles (two slots) in one script.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from podium.domain.changes import RENEWAL
from podium.domain.recount import Move
from podium.errors import ConfigError
from podium.index.reads import ComposedReads
from podium.index.redis.erasure import erase_member, shard_match, sweep_members
from podium.index.redis.errors import translated
from podium.index.redis.keys import SINGLE, Keys, shard_tag
from podium.index.redis.nodes import describe
from podium.index.redis.profiles import RedisProfileCopy, decode_held
from podium.index.redis.rebuild import RedisRebuild
from podium.index.redis.scripts import Script
from podium.ports import (
    Around,
    BoardKey,
    MarkedScore,
    Meta,
    Near,
    Placed,
    Recounted,
    ShardIndex,
    Slice,
)
from podium.ports.erasure import ErasedAmong
from podium.ports.status import IndexNode

CHUNK = 1000  # members per script call or ZADD during rebuilds: bounded server-side work
PROBES = 500  # probes per ahead.lua call: each costs a few O(log N) steps (place.lua)
STAGING_TTL_S = 3600
# The same timeouts for one Redis and for a cluster's nodes (cluster.py).
TIMEOUTS: dict[str, Any] = {"socket_timeout": 5, "socket_connect_timeout": 2}
POOL_CONNECTIONS = 256  # per process, shared by every shard index of one Redis


def stale_retry() -> Retry:
    """A command whose connection failed, tried once more at once on a fresh one: a pooled
    connection that died while Redis was away (a restart, a failover, a cut link) fails its
    next command, and without this each such connection answered one read with a 503 after
    Redis was back (redis-py retries none by default on one Redis; a cluster's client does,
    three times). Every index command is safe to run twice (absolute totals with GT/LT,
    versions, counts moved only by a change). Not after a timeout: a Redis that hangs is
    given up after one ``socket_timeout``, not two."""
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


WRITE = Script("write")
BAN = Script("ban")
SWAP = Script("swap")
RENEW = Script("renew")
AROUND = Script("around", readonly=True)
RANKS = Script("ranks", readonly=True)
COUNTS = Script("counts", readonly=True)
RECOUNT = Script("recount", readonly=True)
AHEAD = Script("ahead", readonly=True)
NEAR = Script("near", readonly=True)
SCORES_AT = Script("scores_at", readonly=True)
SLICE = Script("slice", readonly=True)
MARKED_SCORE = Script("marked_score", readonly=True)


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


def _args(
    flag: str,
    exp: str,
    entries: Sequence[tuple[str, int]],
    part: range,
    versions: Sequence[int] | None,
    metadata: Sequence[Meta] | None = None,
) -> list[str]:
    """write.lua's arguments for ``entries[part]``: member, score, and the version (on a
    versioned board), or with ``metadata`` the tally's version and its metadata ('' none)."""
    args = [flag, exp]
    for j in part:
        member, score = entries[j]
        args += (member, str(score))
        if metadata is not None:
            # the tally's own version orders metadata on every board (write.lua)
            version, text = metadata[j]
            args += (str(version), text or "")
        elif versions is not None:
            args.append(str(versions[j]))
    return args


def _meta(members: Sequence[str], held: Sequence[Any]) -> dict[str, str]:
    """Entry metadata as write.lua holds it (``<version>:<json>``, or ``<version>:`` for
    none), by member."""
    out = {}
    for m, h in zip(members, held, strict=True):
        if h:
            text = h.partition(":")[2]
            if text:
                out[m] = text
    return out


def _token(marker: str | None) -> str | None:
    """The token of a generation marker as a script read it (None where it is gone). The
    marker is "<token> <node>" (generations.py); a read compares tokens only."""
    return (marker.partition(" ")[0] or None) if marker else None


def _move(held: bytes | str) -> Move:
    """One entry of the list of moves (write.lua): ``'<old> <new>'``, '' for none."""
    text = held.decode() if isinstance(held, bytes) else held
    old, new = text.split(" ")
    return (int(old) if old else None, int(new) if new else None)


def _score(held: Any) -> int | None:
    """A score as a script or ZMSCORE sends it: a decimal string, a RESP3 double, or none."""
    return None if held is None else int(float(held))


class RedisIndex(ComposedReads, RedisRebuild):
    def __init__(
        self,
        client: Any,
        prefix: str = "podium",
        shard: int | None = None,
        generation: str | None = None,
        layout: int | None = None,
    ) -> None:
        """``layout``: the shard count of a layout a reshard built, whose tags carry it
        (``keys.shard_tag``); None: the configured layout's plain tags."""
        if shard is None and isinstance(client, RedisCluster):
            raise ConfigError("a rank index on Redis Cluster is split into shards (keys.py)")
        self._r = client
        self.shard = shard
        self.layout = layout
        tag = None if shard is None else shard_tag(shard, layout)
        # With a generation: the reads of that generation of every board window, as a
        # rebuild compares it with the live one (``built``).
        self.keys = Keys(prefix, tag, generation)
        # The copy of profiles beside the boards, in the same slot (keys.py): a single
        # Redis's one copy, or this shard's.
        self.copy = RedisProfileCopy(client, self.keys, SINGLE if tag is None else tag)

    @staticmethod
    def client_from_url(url: str) -> Any:
        """A client for one Redis, as every index of it (a shard each, or the one) shares."""
        # A pool that makes a caller wait for a free connection rather than fail: a split
        # board's read sends one command per shard at once, so a few dozen concurrent reads
        # want more connections than redis-py's default pool (which raises when it runs out:
        # 78 to 86 % of exact reads failed at 32 readers on 16 shards, BENCHMARKS.md).
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=POOL_CONNECTIONS,
            timeout=TIMEOUTS["socket_timeout"],
            decode_responses=True,
            health_check_interval=30,
            retry=stale_retry(),
            **TIMEOUTS,
        )
        return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose closes it

    @classmethod
    def from_url(cls, url: str, prefix: str = "podium", shard: int | None = None) -> RedisIndex:
        return cls(cls.client_from_url(url), prefix, shard)

    def built(self, token: str) -> RedisIndex:
        """The reads of a rebuild's new generation (``Rebuilding.built``, ``rebuild.py``)."""
        return RedisIndex(
            self._r, self.keys.prefix, self.shard, generation=token, layout=self.layout
        )

    @property
    def client(self) -> Any:
        return self._r

    async def ping(self) -> None:
        with translated:
            await self._r.ping()

    async def nodes(self) -> list[IndexNode]:
        # The copy of profiles' key is in this shard's slot (keys.py), as its boards are.
        tag = SINGLE if self.keys.shard is None else self.keys.shard
        return [await describe(self._r, self.keys.profiles(tag), self.shard)]

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
        metadata: Sequence[Meta] | None = None,
    ) -> int:
        keys = self._sidecars(key)
        flag = "V" if versions is not None else "GT" if descending else "LT"
        exp = "" if expire_at is None else str(expire_at)
        written = 0
        with translated:
            for i in range(0, len(entries), CHUNK):
                part = range(i, min(i + CHUNK, len(entries)))
                if metadata is not None and all(metadata[j][1] is None for j in part):
                    # none to keep: the plain layout, unless the board holds metadata that
                    # these entries may have to clear (write.lua answers -1 then)
                    n = int(
                        await WRITE(self._r, keys, _args(flag + "N", exp, entries, part, versions))
                    )
                    if n >= 0:
                        written += n
                        continue
                plain = metadata is None
                args = _args(flag if plain else flag + "M", exp, entries, part, versions, metadata)
                written += int(await WRITE(self._r, keys, args))
        return written

    def _sidecars(self, key: BoardKey) -> list[str]:
        """A board window's sorted set and what write.lua and ban.lua keep beside it, and
        the pointer to the generation a rebuild fills (``index/redis/rebuild.py``)."""
        k = self.keys
        return [
            k.board(key),
            k.bans(key),
            k.versions(key),
            k.meta(key),
            k.next_generation(key),
            k.changes(key),
            k.moves(key),
        ]

    async def remove(
        self,
        key: BoardKey,
        members: Sequence[str],
        versions: Sequence[int],
        *,
        expire_at: int | None,
    ) -> int:
        keys = self._sidecars(key)
        exp = "" if expire_at is None else str(expire_at)
        removed = 0
        with translated:
            for i in range(0, len(members), CHUNK):
                args: list[str] = ["R", exp]
                for m, v in zip(members[i : i + CHUNK], versions[i : i + CHUNK], strict=True):
                    args += (m, "", str(v))
                removed += int(await WRITE(self._r, keys, args))
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

    async def page_from(
        self, key: BoardKey, at: tuple[str, int], n: int, *, descending: bool, before: bool
    ) -> Slice:
        if n < 0:
            raise ValueError(f"page_from: n must not be negative, not {n}")
        member, score = at
        args = [member, str(score), n, _order(descending), "before" if before else "after"]
        with translated:
            ahead, on, rows = await SLICE(self._r, [self.keys.board(key)], args)
        return Slice(int(ahead), bool(on), _rows(rows))

    async def around(
        self, key: BoardKey, player_id: str, neighbors: int, *, descending: bool
    ) -> Around | None:
        with translated:
            reply = await AROUND(
                self._r,
                [self.keys.board(key), self.copy.key, self.keys.meta(key), self.keys.generation()],
                [player_id, neighbors, _order(descending)],
            )
        if reply is None:
            return None
        rank, flat, names, meta, marker = reply
        rows = _rows(flat)
        members = [m for m, _ in rows]
        profiles = None if names is None else decode_held(members, names)
        token = _token(marker)
        # The script sends no score of its own: the player's row holds it. One sorted set
        # holds the whole board, so every rank is exact.
        score = rows[rank - max(0, rank - neighbors)][1]
        return Around(
            rank,
            score,
            rows,
            profiles,
            exact=True,
            metadata={} if meta is None else _meta(members, meta),
            generation=None if self.keys.shard is not None else (token,),
        )

    async def entry_metadata(self, key: BoardKey, members: Sequence[str]) -> dict[str, str]:
        if not members:
            return {}
        with translated:
            held = await self._r.hmget(self.keys.meta(key), list(members))
        return _meta(members, held)

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[Placed | None]:
        if not player_ids:
            return []
        with translated:
            reply = await RANKS(self._r, [self.keys.board(key)], [_order(descending), *player_ids])
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
            counts: list[int] = await COUNTS(self._r, [self.keys.board(key)], bounds)
        return counts

    async def recount(
        self,
        key: BoardKey,
        since: int | None,
        runs: Sequence[Sequence[int]],
        *,
        generation: int | None = None,
    ) -> Recounted:
        args: list[int | str] = ["" if since is None else since]
        args.append("" if generation is None else generation)
        for i, run in enumerate(runs):
            if i:
                args.append("")  # recount.lua: a run ends here
            args.extend(run)
        k = self.keys
        with translated:
            reply = await RECOUNT(self._r, [k.board(key), k.changes(key), k.moves(key)], args)
        n, g, held, at = int(reply[0]), int(reply[1]), int(reply[2]), 3
        moves: list[Move] | None = None
        if held:
            count = int(reply[3])
            moves = [_move(m) for m in reply[4 : 4 + count]]
            at = 4 + count
        out = []
        for run in runs:
            size = max(0, len(run) - 1)
            out.append([int(c) for c in reply[at : at + size]])
            at += size
        return Recounted(n, moves, out, g)

    async def renew_counts(self, windows: Sequence[tuple[BoardKey, int | None]]) -> None:
        k = self.keys
        with translated:
            for key, expire_at in windows:
                bump = 1 + secrets.randbelow(RENEWAL)
                exp = "" if expire_at is None else str(expire_at)
                await RENEW(self._r, [k.changes(key), k.moves(key)], [bump, exp])

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        with translated:
            for key in keys:
                await BAN(self._r, self._sidecars(key), [player_id])

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        with translated:
            for key in keys:
                await self._r.srem(self.keys.bans(key), player_id)

    async def forget(self, keys: Sequence[BoardKey], player_id: str) -> None:
        with translated:
            for key in keys:
                await BAN(self._r, self._sidecars(key), [player_id, "forget"])

    async def erase_player(self, player_id: str) -> int:
        """Out of every key under the prefix (``index/redis/erasure.py``): every shard's
        and every generation's, so one call on any shard of a Redis does all of them."""
        return await erase_member(self._r, self.keys.prefix, player_id)

    async def sweep_erased(self, erased: ErasedAmong) -> int:
        """This index's keys (``index/redis/erasure.py``): a shard's those of its tag in
        every layout, so that the shards of one Redis share the walk out between them; an
        unsplit index every key under the prefix."""
        match = "*" if self.shard is None else shard_match(self.shard)
        return await sweep_members(self._r, self.keys.prefix, erased, match)

    # -- the reads a merge of shards needs (ShardIndex) ------------------------------------

    async def scores(self, key: BoardKey, members: Sequence[str]) -> list[int | None]:
        if not members:
            return []
        with translated:
            held = await self._r.execute_command("ZMSCORE", self.keys.board(key), *members)
        return [_score(h) for h in held]

    async def marked_score(self, key: BoardKey, member: str) -> MarkedScore:
        with translated:
            score, marker = await MARKED_SCORE(
                self._r, [self.keys.board(key), self.keys.generation()], [member]
            )
        return MarkedScore(_score(score), _token(marker), True)

    async def changes(self, key: BoardKey) -> dict[str, int]:
        with translated:
            held = await self._r.hgetall(self.keys.changes(key))
        return {str(k): int(v) for k, v in held.items()}

    async def ahead(
        self, key: BoardKey, probes: Sequence[tuple[str, int]], *, descending: bool
    ) -> list[int]:
        out: list[int] = []
        with translated:
            for i in range(0, len(probes), PROBES):
                args: list[str] = [_order(descending)]
                for member, score in probes[i : i + PROBES]:
                    args += (member, str(score))
                out += await AHEAD(self._r, [self.keys.board(key)], args)
        return [int(n) for n in out]

    async def near(
        self, key: BoardKey, member: str, score: int, n: int, *, descending: bool
    ) -> Near:
        if n < 0:
            raise ValueError(f"near: n must not be negative, not {n}")
        with translated:
            ahead, above, below = await NEAR(
                self._r, [self.keys.board(key)], [member, str(score), n, _order(descending)]
            )
        return Near(int(ahead), _rows(above), _rows(below))

    async def scores_at(
        self, key: BoardKey, ranks: Sequence[int], *, descending: bool
    ) -> list[int | None]:
        if not ranks:
            return []
        if min(ranks) < 0:
            raise ValueError(f"scores_at: ranks are 0-based, not {min(ranks)}")
        with translated:
            held = await SCORES_AT(self._r, [self.keys.board(key)], [_order(descending), *ranks])
        return [_score(h) for h in held]

    # -- rebuilds -------------------------------------------------------------------------

    async def replace(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> None:
        """Fill a staging set, then swap it in with one script: readers see the old board or
        the new one, never a half-built one, and no ban is lost in between."""
        token = secrets.token_hex(6)
        stage, stage_ver = self.keys.staging(key, token), self.keys.staging(key, token + ":ver")
        stage_meta = self.keys.staging(key, token + ":meta")
        bans = self.keys.bans(key)
        with translated:
            banned = set(await self._r.smembers(bans))
            kept = [
                (
                    m,
                    s,
                    versions[i] if versions is not None else 0,
                    None if metadata is None else metadata[i],
                )
                for i, (m, s) in enumerate(entries)
                if m not in banned
            ]
            try:
                for i in range(0, len(kept), CHUNK):
                    chunk = kept[i : i + CHUNK]
                    pipe = self._r.pipeline(transaction=False)
                    pipe.zadd(stage, {m: s for m, s, _, _ in chunk})
                    if versions is not None:
                        pipe.hset(stage_ver, mapping={m: v for m, _, v, _ in chunk})
                    held = {m: f"{x[0]}:{x[1]}" for m, _, _, x in chunk if x and x[1]}
                    if held:
                        pipe.hset(stage_meta, mapping=held)
                    # a rebuild that dies half way leaves nothing behind for long
                    pipe.expire(stage, STAGING_TTL_S)
                    pipe.expire(stage_ver, STAGING_TTL_S)
                    pipe.expire(stage_meta, STAGING_TTL_S)
                    await pipe.execute()
                exp = "" if expire_at is None else str(expire_at)
                keys = [
                    stage,
                    self.keys.board(key),
                    bans,
                    stage_ver,
                    self.keys.versions(key),
                    stage_meta,
                    self.keys.meta(key),
                    self.keys.changes(key),
                    self.keys.moves(key),
                ]
                await SWAP(self._r, keys, [exp])
            finally:
                await self._r.delete(stage, stage_ver, stage_meta)


if TYPE_CHECKING:  # mypy holds the adapter to the port it implements
    _port: type[ShardIndex] = RedisIndex
