"""Moving one bucket of players to another database while results keep arriving.

The steps (``Moves.move_bucket``), each safe to run again if the mover stops:

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
   fenced, and the bucket's rows are copied (of every table the fence guards, which the
   catalog names: ``postgres/buckets.py``; and the claims of the bucket's match ids and of
   its players' matches), replacing whatever an earlier attempt left there.
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
from collections.abc import Sequence

from podium.domain.sharding import BUCKETS
from podium.errors import InvalidInput, StoreUnavailable
from podium.store.postgres import PostgresStore
from podium.store.split.routing import Part

log = logging.getLogger("podium.store")


class Moves(Part):
    async def move_bucket(
        self,
        bucket: int,
        to: str,
        *,
        grace_s: float = 10.0,
        drain_timeout_s: float = 30.0,
        fence_timeout_s: float = 30.0,
    ) -> bool:
        """Move ``bucket`` to the database at ``to`` (made ready first: migrated). False if
        it is there already."""
        _check(bucket)
        router = self.router
        await router.ready()
        target = router.db(to)
        await target.migrate()
        await target.migrate_part("split")
        source_url = await router.home.mark_moving(bucket, to)
        if source_url is None:
            return False
        source = router.db(source_url)
        try:
            await _fence(source, bucket, to, fence_timeout_s)
            players = await source.bucket_players(bucket)
            await _drain(source, players, drain_timeout_s)
        except StoreUnavailable as e:
            # Nothing is copied yet and the map still names the source: undo, so that the
            # bucket's players can play on while whatever stopped the move is looked at.
            await self.abort_move(bucket)
            raise StoreUnavailable(
                f"bucket {bucket} did not move, and was left where it was: {e}"
            ) from e
        await target.write_bucket(bucket, players, await source.bucket_rows(bucket, players))
        await router.home.bucket_moved(bucket, to)
        await router.refresh_map()
        log.info("bucket %d moved: %d players, to %s", bucket, len(players), to)
        await asyncio.sleep(grace_s)
        await target.add_claims(await source.bucket_claims(bucket, []))
        await source.delete_bucket(bucket, players)
        return True

    async def abort_move(self, bucket: int) -> bool:
        """Undo a move that stopped before the map named its target: the source accepts the
        bucket's writes again. False if no move of the bucket is under way. Whatever an
        earlier attempt copied to the target is never read there (the map names the
        source), and the next move to it replaces it."""
        _check(bucket)
        router = self.router
        await router.ready()
        found = await router.home.bucket_at(bucket)
        source, to = found or ("", None)
        if to is None:
            return False
        await router.db(source).lift_fence(bucket, to)
        await router.home.clear_moving(bucket, to)
        await router.refresh_map()
        log.warning("the move of bucket %d to %s was undone", bucket, to)
        return True


def _check(bucket: int) -> None:
    if not 0 <= bucket < BUCKETS:
        raise InvalidInput(f"bucket {bucket} is outside 0..{BUCKETS - 1}")


async def _fence(source: PostgresStore, bucket: int, to: str, timeout_s: float) -> None:
    await source.fence_bucket(bucket, to)
    # Every transaction that starts from now on sees the fence; wait for the ones before.
    since = await source.clock()
    deadline = time.monotonic() + timeout_s
    while await source.transactions_before(since):
        if time.monotonic() > deadline:
            raise StoreUnavailable("a transaction older than the bucket's fence did not end")
        await asyncio.sleep(0.01)


async def _drain(source: PostgresStore, players: Sequence[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while await source.outbox_rows_of(players):
        if time.monotonic() > deadline:
            # Going on would let the target's later changes of a player overtake these.
            raise StoreUnavailable(
                f"the bucket's outbox rows on its database did not drain in {timeout_s:.0f}s: "
                "is an updater (or, on NATS, a relay) running?"
            )
        await asyncio.sleep(0.02)
