"""What the index says of the generation of data it holds (``Generations``): a marker per
shard, and the identity of the Redis node that holds the shard now.

A Redis index is a copy (invariant 1 of docs/architecture.md) that can lose writes without
saying so: a Redis that restarts without its data answers every read with an empty board,
and a replica promoted after its primary died lacks the writes its primary acknowledged in
the last moments. The marker is how a process sees either:

- the marker is **gone**: the node lost its data (a restart without persistence, a flush);
  the index is refilled from the store, and reads refuse to answer until it is;
- the marker is there, but was **written on another node** (another ``run_id`` or
  ``master_replid``): a replica took over (it kept the marker, which it replicated), or the
  node restarted from a snapshot; either may lack the last writes, which the log's last
  seconds, applied once more, bring back.

Each marker also carries the time it was last **confirmed** on its node (the mender's look
found it there, on the node it names, every ``[index] watch_s``). It is replicated like the
marker, so a replica that took over holds a time at or before the change: the replay starts
from there (less ``failover_replay_s``), however late the change is noticed.

The in-process index has none: it is rebuilt at every start and dies with its process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol


class Held(NamedTuple):
    """One shard's marker as its node holds it now."""

    shard: int | None  # None: the single, unsplit index
    token: str | None  # the marker's token; None: the marker is gone
    marked_on: str | None  # the node identity the marker was written on
    node: str  # the identity of the node that holds the shard now: "<run_id>:<master_replid>"
    # When the marker was last confirmed on the node it names (epoch seconds); None: never
    # (a marker written by a release that kept no such time)
    confirmed: float | None = None


class Generations(Protocol):
    async def held(self) -> list[Held]:
        """Every shard's marker, and the node that holds it now."""
        ...

    async def tokens(self) -> tuple[str | None, ...]:
        """Every shard's marker token alone (None where gone): what a read checks."""
        ...

    async def mark(self, shards: Sequence[int | None], token: str, at: float) -> None:
        """Write the marker of these shards with ``token``, their node's identity now, and
        ``at`` as the time it was confirmed there (taken before the node was asked)."""
        ...

    async def confirm(self, held: Sequence[Held], at: float) -> None:
        """Set the confirmed time of these markers to ``at`` (taken before ``held`` was
        read), each only if its marker still holds what was read (a marker rebuilt,
        re-marked or gone meanwhile keeps its own)."""
        ...

    async def lock(self, token: str, ttl_s: float) -> bool:
        """Take the rebuild lock for ``ttl_s`` (or renew it, if ``token`` holds it); False if
        another holds it."""
        ...

    async def unlock(self, token: str) -> None:
        """Give the rebuild lock back, if ``token`` holds it."""
        ...
