"""A player erased from a Redis index (``ports/erasure.py``): every key under the prefix is
walked (SCAN, on every primary of a cluster), and the player taken out of each by its kind:
a member of a sorted set (a board window of any generation, a staging set), a field of a
hash (versions, entry metadata, the copy of profiles), a member of a set (a ban set), and a
string that names them (an aggregator's snapshot: dropped, published again next cycle).

A walk rather than a list of keys, so that nothing the store no longer knows of (a cohort
board, a tournament run, a generation a rebuild left behind) keeps a copy. Keys are per
board window and shard, never per player, so the walk is short; and an erasure is rare.

A board window's sorted set loses the player by forget.lua, which records the removal as a
move beside the window's tallies (``domain/recount.py``), as every write of the board does:
the aggregator's counts follow the moves, and would count the player on otherwise.

The sweep (``sweep_members``) walks the same keys without an id to look for: every member
of a sorted set or a set and every field of a hash is read a page at a time (ZSCAN, SSCAN,
HSCAN with a count, never the whole of a 10-million-member board at once), and the ids the
caller's ``erased`` picks out of each page by their keyed hash are removed. It is what takes
back the copies a promoted replica kept of players erased since (docs/architecture.md §9).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from podium.domain.snapshot import Snapshot
from podium.index.redis.errors import translated
from podium.index.redis.keys import beside_board
from podium.index.redis.scripts import Script
from podium.ports.erasure import ErasedAmong

SCAN_COUNT = 1000
FORGET = Script("forget")


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
                gone += await _off_set(client, key, player_id)
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


async def _off_set(client: Any, key: Any, *members: str) -> int:
    """``members`` out of the sorted set ``key``, each removal from a board window a move
    beside its tallies (forget.lua); how many were on it."""
    name = _text(key)
    beside = beside_board(name)
    if beside is None:
        return int(await client.zrem(key, *members))
    return int(await FORGET(client, [name, *beside], members))


def shard_match(shard: int) -> str:
    """A SCAN pattern (after the prefix) of the keys of index shard ``shard`` in every layout:
    its plain tag ``{s03}`` and a reshard's ``{s03.32}`` (``keys.shard_tag``), never
    another shard's (``{s030.128}``)."""
    return f"{{s{shard:02d}[}}.]*"


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


async def _pages(items: AsyncIterator[Any], pick: int | None) -> AsyncIterator[list[str]]:
    """The ids of a SCAN-family walk, ``SCAN_COUNT`` at a time (``pick``: which part of a
    pair is the id: a sorted set's member, a hash's field)."""
    page: list[str] = []
    async for item in items:
        page.append(_text(item if pick is None else item[pick]))
        if len(page) >= SCAN_COUNT:
            yield page
            page = []
    if page:
        yield page


async def sweep_members(client: Any, prefix: str, erased: ErasedAmong, match: str = "*") -> int:
    """Every member and field of every sorted set, set and hash under ``prefix``
    (matching ``match`` after it) that ``erased`` picks out, removed; how many went."""
    gone = 0
    with translated:
        async for key in client.scan_iter(match=f"{_escaped(prefix)}:{match}", count=SCAN_COUNT):
            kind = _text(await client.type(key))
            if kind == "zset":
                items, pick = client.zscan_iter(key, count=SCAN_COUNT), 0
                drop = partial(_off_set, client)
            elif kind == "set":
                items, pick, drop = client.sscan_iter(key, count=SCAN_COUNT), None, client.srem
            elif kind == "hash":
                items, pick, drop = client.hscan_iter(key, count=SCAN_COUNT), 0, client.hdel
            else:
                continue  # strings: markers, pointers, snapshots (sweep_snapshots)
            async for page in _pages(items, pick):
                found = erased([p for p in page if p])  # '' is a copy's mark, not an id
                if found:
                    gone += int(await drop(key, *found))
    return gone


async def sweep_snapshots(client: Any, prefix: str, erased: ErasedAmong) -> int:
    """Every aggregator's snapshot under ``prefix`` whose top names a player ``erased``
    picks out, dropped (the aggregator publishes it again next cycle); how many went."""
    gone = 0
    with translated:
        async for key in client.scan_iter(
            match=f"{_escaped(prefix)}:{{agg}}:snap:*", count=SCAN_COUNT
        ):
            held = await client.get(key)
            if held is None:
                continue
            data = held.encode() if isinstance(held, str) else bytes(held)
            if erased(Snapshot.members_of(data)):
                gone += int(await client.delete(key))
    return gone
