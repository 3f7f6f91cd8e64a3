"""What ``podium status`` asks of the backends: the roles' heartbeats kept in the store, each
store database reachable or not, and each index shard's Redis node with its replication.

A process's metrics are its own, so the heartbeats an operator's command reads from another
process are written to the store (``Beats``), which every role but the aggregator reaches
anyway. Names of databases and nodes never carry a password.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Heartbeat:
    role: str
    holder: str  # the process: host:pid
    at: float  # the role's last loop, epoch seconds
    every_s: float  # how long the role may sleep between two loops (its idle sleep)


@dataclass(frozen=True, slots=True)
class Reachable:
    """One database of the store: its name (host:port/database, or the file), and whether
    it answered; ``why`` says what it answered instead."""

    name: str
    up: bool
    why: str | None = None


@dataclass(frozen=True, slots=True)
class Replica:
    node: str  # host:port, as the primary knows it
    state: str  # Redis's word: online, wait_bgsave, ...
    lag_bytes: int | None  # the primary's master_repl_offset minus the replica's offset


@dataclass(frozen=True, slots=True)
class IndexNode:
    """The node one index shard's keys are on. ``role`` is Redis's (``master``, ``slave``);
    None where there is no Redis (the in-process index), as are the offsets."""

    shard: int | None  # None: the index is not split
    node: str  # host:port, or "in process"
    up: bool
    role: str | None = None
    offset: int | None = None  # master_repl_offset
    replicas: tuple[Replica, ...] = ()
    why: str | None = None


class Beats(Protocol):
    async def beat(self, holder: str, beats: Mapping[str, tuple[float, float]]) -> None:
        """Record each role's last loop in this process: role -> (at, every_s). One small
        write; rows of processes silent for a week are dropped by it."""
        ...

    async def heartbeats(self) -> list[Heartbeat]:
        """Every process's heartbeat of every role, newest first."""
        ...

    async def databases(self) -> list[Reachable]:
        """Each database of the store, asked at once; never raises for one that is down."""
        ...


class Nodes(Protocol):
    async def nodes(self) -> list[IndexNode]:
        """Each shard's node and its replication, asked at once; never raises for one that
        is down."""
        ...
