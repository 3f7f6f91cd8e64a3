"""What a deployment is made of: one store or a store split by player, which rank index over
how many shards, which change log.

``bootstrap.topology(settings)`` decides it once, from the settings' URLs (bootstrap is the one
place that reads them); every other module that must know (the command line, the start of the
in-process index, which rank source the reads use) asks this value instead of reading a URL
again. It holds kinds and counts only, never an adapter, so it imports nothing of podium.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StoreKind = Literal["sqlite", "postgres", "split"]  # split: Postgres databases by player
IndexKind = Literal["memory", "redis", "cluster"]  # memory: this process's own
LogKind = Literal["outbox", "nats"]


@dataclass(frozen=True, slots=True)
class Topology:
    store: StoreKind
    index: IndexKind
    shards: int  # index shards a board is split across by player (1: one sorted set)
    log: LogKind

    @property
    def split_store(self) -> bool:
        """The store is split by player across Postgres databases (``store.shards``)."""
        return self.store == "split"

    @property
    def in_process_index(self) -> bool:
        """The index lives in this process alone: no other process shares it, and it is
        rebuilt from the store at every start (invariant 1: the index is a copy)."""
        return self.index == "memory"

    @property
    def aggregated(self) -> bool:
        """Boards are split across more than one index shard: the aggregator merges their
        tops, and reads answer from its snapshot. One shard is the whole board, every rank
        on it exact, as on an index that is not split."""
        return self.shards > 1
