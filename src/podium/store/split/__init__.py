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
another database with ``move.move_bucket`` while results keep arriving.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.store.split.move import abort_move, move_bucket
from podium.store.split.outbox import Outbox
from podium.store.split.players import Credentials, Players
from podium.store.split.results import Results
from podium.store.split.windows import Windows

__all__ = ["SplitStore"]


class SplitStore(Credentials, Results, Outbox, Players, Windows):
    @classmethod
    def from_urls(
        cls, home: str, shards: Sequence[str], pool_size: int = 10, read_pool_size: int = 10
    ) -> SplitStore:
        """Does not connect: each database's pools open on first use."""
        return cls(home, shards, pool_size=pool_size, read_pool_size=read_pool_size)

    async def move_bucket(
        self, bucket: int, to: str, *, grace_s: float = 10.0, drain_timeout_s: float = 30.0
    ) -> bool:
        """Move one bucket of players to the database at ``to`` (``move.move_bucket``)."""
        return await move_bucket(self, bucket, to, grace_s=grace_s, drain_timeout_s=drain_timeout_s)

    async def abort_move(self, bucket: int) -> bool:
        """Undo a move of ``bucket`` that stopped before the map named its target."""
        return await abort_move(self, bucket)
