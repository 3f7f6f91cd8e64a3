"""Moving one bucket of players to another database while results keep arriving.

The steps (``move_bucket``), each safe to run again if the mover stops:

1. On the home: the bucket is marked moving to the target (a freeze from now on fences the
   target too, so no window frozen meanwhile can take results there).
2. On the source: a fence for the bucket (``bucket_fences``), after which its database
   refuses every write of the bucket's players (SQLSTATE PD001: the writer reads the map
   again and retries, for about a second, then answers 503); then the mover waits until
   every transaction that began before the fence has ended, so no write of the bucket can
   commit there any more. Reads go on from the source all along.
3. The source's outbox rows of those players are left to drain (the updaters apply them,
   or the source's relay publishes them), so a player's changes reach the index and the
   stream in order: their next ones come from the target.
4. On the target, in one transaction: the windows the source has frozen or fenced are
   fenced, and the bucket's rows (results, tallies, profiles, friends, bans, and the claims
   of the bucket's match ids and of its players' matches) are copied, replacing whatever
   an earlier attempt left there.
5. On the home: the bucket is the target's. Every process learns it within the map's TTL,
   or at once when its write is refused by the source.
6. After ``grace_s`` (past the TTL, when no process reads the source for the bucket any
   more): claims of the bucket's match ids made on the source meanwhile are copied again,
   and the source's copy of the bucket is deleted. The fence stays, for a process that
   still writes there by an old map.

A read of every database counts a row only where the map puts its player, so the two copies
are never counted twice; a process whose map is older reads the source, whose copy has not
changed since step 2.

A move that cannot go on before step 5 (a transaction older than the fence that does not
end, outbox rows that do not drain: no updater or relay running) is undone (``abort_move``):
the fence lifted, the mark cleared, the bucket's writes accepted on the source again, and an
error says why. A mover that was killed before step 5 leaves the bucket's writes refused: run
the move again (it starts over from the fence) or undo it with ``abort_move``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from asyncpg import Record

from podium.domain.sharding import BUCKETS, bucket_of
from podium.errors import InvalidInput, StoreUnavailable
from podium.store.postgres import PostgresStore
from podium.store.split.routing import Routed, _migrate_part

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

log = logging.getLogger("podium.store")

# What a bucket's players own, table by table; matches go apart (their ids have buckets).
PLAYER_TABLES = ("results", "tallies", "profiles", "friends", "bans")


async def move_bucket(
    store: Routed,
    bucket: int,
    to: str,
    *,
    grace_s: float = 10.0,
    drain_timeout_s: float = 30.0,
    fence_timeout_s: float = 30.0,
) -> bool:
    """Move ``bucket`` to the database at ``to`` (made ready first: migrated). False if it
    is there already."""
    if not 0 <= bucket < BUCKETS:
        raise InvalidInput(f"bucket {bucket} is outside 0..{BUCKETS - 1}")
    await store.ready()
    target = store.db(to)
    await target.migrate()
    await _migrate_part(target, "split")
    source_url = await store.home.run(
        lambda c: c.fetchval(
            "UPDATE bucket_map SET moving_to = $2 WHERE bucket = $1 AND db <> $2 RETURNING db",
            bucket,
            to,
        ),
        tx=False,
    )
    if source_url is None:
        return False
    source = store.db(source_url)
    try:
        await _fence(source, bucket, to, fence_timeout_s)
        players = await _players(source, bucket)
        await _drain(source, players, drain_timeout_s)
    except StoreUnavailable as e:
        # Nothing is copied yet and the map still names the source: undo, so that the
        # bucket's players can play on while whatever stopped the move is looked at.
        await abort_move(store, bucket)
        raise StoreUnavailable(
            f"bucket {bucket} did not move, and was left where it was: {e}"
        ) from e
    await target.run(lambda c: _copy(c, source, bucket, players))
    await store.home.run(
        lambda c: c.execute(
            "UPDATE bucket_map SET db = $2, moving_to = NULL WHERE bucket = $1", bucket, to
        ),
        tx=False,
    )
    await store.refresh_map()
    log.info("bucket %d moved: %d players, to %s", bucket, len(players), to)
    await asyncio.sleep(grace_s)
    claims = await _claims(source, bucket, [])
    await target.run(lambda c: _insert_claims(c, claims))
    await source.run(lambda c: _delete(c, bucket, players))
    return True


async def abort_move(store: Routed, bucket: int) -> bool:
    """Undo a move that stopped before the map named its target: the source accepts the
    bucket's writes again. False if no move of the bucket is under way. Whatever an earlier
    attempt copied to the target is never read there (the map names the source), and the
    next move to it replaces it."""
    if not 0 <= bucket < BUCKETS:
        raise InvalidInput(f"bucket {bucket} is outside 0..{BUCKETS - 1}")
    await store.ready()
    row = await store.home.run(
        lambda c: c.fetchrow("SELECT db, moving_to FROM bucket_map WHERE bucket = $1", bucket),
        tx=False,
    )
    if row is None or row["moving_to"] is None:
        return False
    source = store.db(row["db"])
    await source.run(
        lambda c: c.execute(
            "DELETE FROM bucket_fences WHERE bucket = $1 AND moved_to = $2",
            bucket,
            row["moving_to"],
        ),
        tx=False,
    )
    await store.home.run(
        lambda c: c.execute(
            "UPDATE bucket_map SET moving_to = NULL WHERE bucket = $1 AND moving_to = $2",
            bucket,
            row["moving_to"],
        ),
        tx=False,
    )
    await store.refresh_map()
    log.warning("the move of bucket %d to %s was undone", bucket, row["moving_to"])
    return True


async def _fence(source: PostgresStore, bucket: int, to: str, timeout_s: float) -> None:
    await source.run(
        lambda c: c.execute(
            "INSERT INTO bucket_fences VALUES ($1, $2) ON CONFLICT (bucket) DO NOTHING",
            bucket,
            to,
        ),
        tx=False,
    )
    # Every transaction that starts from now on sees the fence; wait for the ones before.
    since = await source.run(lambda c: c.fetchval("SELECT clock_timestamp()"), tx=False)
    deadline = time.monotonic() + timeout_s
    while await source.run(
        lambda c: c.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "AND xact_start < $1",
            since,
        ),
        tx=False,
    ):
        if time.monotonic() > deadline:
            raise StoreUnavailable("a transaction older than the bucket's fence did not end")
        await asyncio.sleep(0.01)


async def _players(source: PostgresStore, bucket: int) -> list[str]:
    """The bucket's players on the source (their ids are read, the hash is ours)."""
    union = " UNION ".join(f"SELECT player_id FROM {t}" for t in PLAYER_TABLES)
    rows = await source.run(lambda c: c.fetch(union), tx=False)
    return sorted(r["player_id"] for r in rows if bucket_of(r["player_id"]) == bucket)


async def _drain(source: PostgresStore, players: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while await source.run(
        lambda c: c.fetchval("SELECT count(*) FROM outbox WHERE player_id = ANY($1)", players),
        tx=False,
    ):
        if time.monotonic() > deadline:
            # Going on would let the target's later changes of a player overtake these.
            raise StoreUnavailable(
                f"the bucket's outbox rows on its database did not drain in {timeout_s:.0f}s: "
                "is an updater (or, on NATS, a relay) running?"
            )
        await asyncio.sleep(0.02)


async def _claims(
    source: PostgresStore, bucket: int, players: list[str]
) -> list[tuple[object, ...]]:
    """The source's claims of the bucket's match ids, and of the matches its players
    played (the copies their records keep). Every claim's id is read: the hash is ours."""
    rows = await source.run(
        lambda c: c.fetch(
            "SELECT match_id, key_id, recorded_at, mode, ended_at, duration_s FROM matches"
        ),
        tx=False,
    )
    found = await source.run(
        lambda c: c.fetch(
            "SELECT DISTINCT match_id FROM results WHERE player_id = ANY($1)", players
        ),
        tx=False,
    )
    played = {r["match_id"] for r in found}
    return [tuple(r) for r in rows if r["match_id"] in played or bucket_of(r["match_id"]) == bucket]


async def _insert_claims(c: Conn, claims: list[tuple[object, ...]]) -> None:
    if claims:
        await c.executemany(
            "INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (match_id) DO NOTHING",
            claims,
        )


async def _copy(c: Conn, source: PostgresStore, bucket: int, players: list[str]) -> None:
    """On the target, in its transaction: the source's frozen windows as fences, then the
    bucket's rows in place of any an earlier attempt left."""
    await c.execute("SET LOCAL podium.moving = 'on'")
    await c.execute("DELETE FROM bucket_fences WHERE bucket = $1", bucket)
    frozen = await source.run(
        lambda s: s.fetch("SELECT board, window_id, frozen_at FROM frozen_windows"), tx=False
    )
    await c.executemany(
        "INSERT INTO frozen_windows (board, window_id, frozen_at, players, fence) "
        "VALUES ($1, $2, $3, 0, true) ON CONFLICT (board, window_id) DO NOTHING",
        [tuple(r) for r in frozen],
    )
    for table in PLAYER_TABLES:
        await c.execute(f"DELETE FROM {table} WHERE player_id = ANY($1)", players)
        rows = await source.run(_select_players(table, players), tx=False)
        if rows:
            await c.copy_records_to_table(
                table, records=[tuple(r) for r in rows], columns=list(rows[0].keys())
            )
    await _insert_claims(c, await _claims(source, bucket, players))


def _select_players(table: str, players: list[str]) -> Callable[[Conn], Awaitable[list[Record]]]:
    def run(c: Conn) -> Awaitable[list[Record]]:
        return c.fetch(f"SELECT * FROM {table} WHERE player_id = ANY($1)", players)

    return run


async def _delete(c: Conn, bucket: int, players: list[str]) -> None:
    """On the source, in its transaction: its copy of the bucket (its own writes pass the
    fence), but the outbox rows, which are delivered from where they were written."""
    await c.execute("SET LOCAL podium.moving = 'on'")
    for table in PLAYER_TABLES:
        await c.execute(f"DELETE FROM {table} WHERE player_id = ANY($1)", players)
    ids = [r["match_id"] for r in await c.fetch("SELECT match_id FROM matches")]
    gone = [m for m in ids if bucket_of(m) == bucket]
    await c.execute(
        "DELETE FROM matches m WHERE match_id = ANY($1) AND NOT EXISTS "
        "(SELECT 1 FROM results r WHERE r.match_id = m.match_id)",
        gone,
    )
