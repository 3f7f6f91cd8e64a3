"""The production score store: PostgreSQL through asyncpg, every port in one adapter.

``pool.py`` holds the pools and the one way every port runs its statements, ``errors.py``
the one table that sorts the driver's errors into outages and bugs, ``locks.py`` the
advisory lock scheme; each port is a module of its own (``credentials``, ``record`` with
its statements in ``record_sql``, ``outbox``, ``players``, ``windows``). ``buckets`` holds
what a store split by player (``store/split``) asks of each of its databases beyond the ports:
the bucket map and a bucket's move; the freeze's two steps and the claims across databases are
in ``windows`` and ``record``.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.store.postgres.beats import Beats
from podium.store.postgres.buckets import Buckets
from podium.store.postgres.cohorts import Cohorts
from podium.store.postgres.credentials import Credentials
from podium.store.postgres.erasure import PlayerData
from podium.store.postgres.outbox import Outbox
from podium.store.postgres.players import Players
from podium.store.postgres.record import Results
from podium.store.postgres.rejection import Rejections
from podium.store.postgres.retention import Retention
from podium.store.postgres.tournaments import Tournaments
from podium.store.postgres.webhooks import Webhooks
from podium.store.postgres.windows import Windows

__all__ = ["PostgresStore"]


class PostgresStore(
    PlayerData,
    Credentials,
    Results,
    Outbox,
    Players,
    Rejections,
    Windows,
    Retention,
    Buckets,
    Beats,
    Webhooks,
    Tournaments,
    Cohorts,
):
    async def banned(self, player_ids: Sequence[str]) -> set[str]:
        """The banned, and the erased (by the hash kept of their id): whom the updaters,
        the reconciler and a freeze leave out, by one call (docs/architecture.md §9)."""
        found = await Players.banned(self, player_ids)
        return found | await self.erased(player_ids)

    @classmethod
    def from_url(
        cls,
        url: str,
        pool_size: int = 10,
        read_pool_size: int = 10,
        *,
        timeout_s: float = 2.0,
        command_timeout_s: float = 10.0,
    ) -> PostgresStore:
        """Does not connect: the pools open on first use, so a store can be built anywhere.
        ``timeout_s`` and ``command_timeout_s``: ``[store]``'s (``pool.Database``)."""
        return cls(
            url,
            pool_size=pool_size,
            read_pool_size=read_pool_size,
            timeout_s=timeout_s,
            command_timeout_s=command_timeout_s,
        )
