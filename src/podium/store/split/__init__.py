"""The score store split by player across Postgres databases (``[store] shards``).

Where things live:

- the **home** database (``[store] url``) holds what is global: the keys, the bucket map
  (``routing.py``), and the windows' freezes and final standings (``windows.py``). It may be
  one of the shards too. Every API process reaches it; when it is down, keys verified in the
  last ``server.key_cache_s`` still work, and sign-ins with any other key, freezes, final
  standings and a process's start are answered 503 (``StoreUnavailable``) until it is back;
  results keep being recorded on the shards.
- each **shard** holds the players whose bucket the map gives it: their results, tallies,
  profiles, friends, bans and outbox rows. Every write of one player is one transaction on
  that player's database, as on one database.
- a match id's claim (its owner and facts) is on the database its id maps to, through the
  same map (``results.py``).

Every port either routes by player (or match id) or asks every database in parallel and
merges: by player id for the whole copies (standings for rebuilds, profiles), newest first
for review, in board order where a board is ranked (``plan_freeze``). A bucket moves to
another database (``move.py``) while results keep arriving.

This package only routes and merges: each port is a part (``results``, ``outbox``,
``players``, ``windows``, ``move``) over the one ``routing.Router``, and every statement it
runs on a database is a method of that database's ``PostgresStore`` (``store/postgres``).
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.store.split.beats import Beats
from podium.store.split.cohorts import Cohorts
from podium.store.split.erasure import PlayerData
from podium.store.split.move import Moves
from podium.store.split.outbox import Outbox
from podium.store.split.players import Credentials, Players
from podium.store.split.results import Results
from podium.store.split.retention import Retention
from podium.store.split.routing import Router
from podium.store.split.tournaments import Tournaments
from podium.store.split.webhooks import Webhooks
from podium.store.split.windows import Windows

__all__ = ["SplitStore"]


class SplitStore(
    PlayerData,
    Credentials,
    Results,
    Outbox,
    Players,
    Cohorts,
    Windows,
    Moves,
    Retention,
    Beats,
    Webhooks,
    Tournaments,
):
    """Every port, each a part over one ``Router`` (``self.router``: the databases and the
    bucket map), which the parts share and nothing else of theirs."""

    def __init__(
        self,
        home: str,
        shards: Sequence[str],
        *,
        pool_size: int = 10,
        read_pool_size: int = 10,
        timeout_s: float = 2.0,
        command_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(
            Router(
                home,
                shards,
                pool_size=pool_size,
                read_pool_size=read_pool_size,
                timeout_s=timeout_s,
                command_timeout_s=command_timeout_s,
            )
        )

    @classmethod
    def from_urls(
        cls,
        home: str,
        shards: Sequence[str],
        pool_size: int = 10,
        read_pool_size: int = 10,
        *,
        timeout_s: float = 2.0,
        command_timeout_s: float = 10.0,
    ) -> SplitStore:
        """Does not connect: each database's pools open on first use."""
        return cls(
            home,
            shards,
            pool_size=pool_size,
            read_pool_size=read_pool_size,
            timeout_s=timeout_s,
            command_timeout_s=command_timeout_s,
        )

    async def migrate(self) -> None:
        await self.router.migrate()
        # The key of erased ids' hashes read from the home now, while it answers: a shard's
        # refusal of an erased player never waits on the home after the start.
        await self.erasure_key()

    async def ping(self) -> None:
        await self.router.ping()

    async def close(self) -> None:
        await self.router.close()

    def url_of(self, key: str) -> str:
        """The URL of the database a player id or a match id lives on (once the map is
        read: after ``migrate`` or any other call)."""
        return self.router.url_of(key)
