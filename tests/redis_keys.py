"""Removing a test's own keys, on one Redis or a Redis Cluster (every primary's keyspace)."""

from __future__ import annotations

from typing import Any


async def delete_prefixed(client: Any, prefix: str) -> int:
    """Delete every key under ``prefix:``, one by one: on a cluster the keys live in many
    slots, and a multi-key DEL must stay within one."""
    n = 0
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        n += int(await client.delete(key))
    return n
