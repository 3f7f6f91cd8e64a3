"""A player erased from a Redis index (``ports/erasure.py``): every key under the prefix is
walked (SCAN, on every primary of a cluster), and the player taken out of each by its kind:
a member of a sorted set (a board window of any generation, a staging set), a field of a
hash (versions, entry metadata, the copy of profiles), a member of a set (a ban set), and a
string that names them (an aggregator's snapshot: dropped, published again next cycle).

A walk rather than a list of keys, so that nothing the store no longer knows of (a cohort
board, a tournament run, a generation a rebuild left behind) keeps a copy. Keys are per
board window and shard, never per player, so the walk is short; and an erasure is rare.
"""

from __future__ import annotations

from typing import Any

from podium.index.redis.errors import translated

SCAN_COUNT = 1000


def _escaped(prefix: str) -> str:
    """The prefix as a literal in a SCAN pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in prefix)


async def erase_member(client: Any, prefix: str, player_id: str, match: str = "*") -> int:
    """Take ``player_id`` out of every key under ``prefix`` (matching ``match`` after it);
    how many entries went."""
    quoted = f'"{player_id}"'
    gone = 0
    with translated:
        async for key in client.scan_iter(match=f"{_escaped(prefix)}:{match}", count=SCAN_COUNT):
            kind = await client.type(key)
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind == "zset":
                gone += int(await client.zrem(key, player_id))
            elif kind == "hash":
                gone += int(await client.hdel(key, player_id))
            elif kind == "set":
                gone += int(await client.srem(key, player_id))
            elif kind == "string":
                held = await client.get(key)
                text = held.decode(errors="replace") if isinstance(held, bytes) else held
                if text is not None and quoted in text:
                    gone += int(await client.delete(key))
    return gone
