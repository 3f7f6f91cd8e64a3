"""``BucketMoves``: the operator's move of a bucket of players from one database of a store
split by player to another, while results keep arriving (``podium store move-bucket``;
README, "Store split by player"). The other operator action, a change of the index's shard
count, is ``ports/layouts.py``.
"""

from __future__ import annotations

from typing import Protocol


class BucketMoves(Protocol):
    async def move_bucket(
        self, bucket: int, to: str, *, grace_s: float = 10.0, drain_timeout_s: float = 30.0
    ) -> bool:
        """Move ``bucket`` (0..4095) to the database at ``to``; False if it is there already.
        The old copy is deleted ``grace_s`` after the switch; the move is undone if the
        bucket's outbox rows are not drained within ``drain_timeout_s``."""
        ...

    async def abort_move(self, bucket: int) -> bool:
        """Undo a move that stopped before the map named its target; False if none is under
        way."""
        ...
