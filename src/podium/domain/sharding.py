"""Which shard a player lives on: one stable hash, the same in every process and release.

The index splits each board into ``index.shards`` parts by player, and the store splits its
players over databases through ``BUCKETS`` virtual buckets. Both start from ``bucket_of``, a
CRC-32 of the player id's UTF-8 bytes (stable across processes, unlike Python's ``hash``,
and spread evenly over ids that differ only in their last characters, as ``p_000123`` do).
An index shard is the bucket modulo the shard count, so any shard count that divides 4,096
(1, 2, 4, ..., 16, ...) keeps the players of one bucket together.
"""

from __future__ import annotations

import zlib

BUCKETS = 4096  # virtual buckets of players; the store's map assigns each to a database


def bucket_of(player_id: str) -> int:
    """The player's virtual bucket, ``0 <= bucket < BUCKETS``."""
    return zlib.crc32(player_id.encode()) % BUCKETS


def shard_of(player_id: str, shards: int) -> int:
    """The player's index shard, ``0 <= shard < shards``."""
    return bucket_of(player_id) % shards if shards > 1 else 0


def shard_tag(shard: int) -> str:
    """The hash tag of index shard ``shard`` (``{s00}``, ``{s01}``, ...): every key of one
    shard carries it, so Redis Cluster keeps them in one slot."""
    return f"{{s{shard:02d}}}"
