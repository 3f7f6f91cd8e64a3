"""What ``podium status`` reports, from any machine that reads the settings: each role's
last heartbeat (written to the store by every process, ``workers/heartbeats.py``), the
oldest change not yet sent to the boards, each split board's snapshot age, each index
shard's node and replication, and each store database reachable or not.

Every part is asked at once and says what it could not tell (``None``: not applicable on
this deployment, or not known because its backend is down) rather than guess a figure.
``down()`` names what is out: a database or an index node that does not answer, and a role
whose newest heartbeat, in every process, is older than it may sleep.
Knows the ports, never an adapter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from podium.config.settings import Settings
from podium.domain.snapshot import Snapshot
from podium.errors import PodiumError
from podium.ports import BoardKey, Clock, Outbox, RankIndex, Snapshots
from podium.ports.status import Beats, Heartbeat, IndexNode, Reachable

T = TypeVar("T")
STALE_AFTER_S = 60.0  # a role silent this long past its own sleep is down (as the alert says)


class StatusStore(Beats, Outbox, Protocol):
    """The store as the status reads it: heartbeats, databases, the outbox's backlog."""


@dataclass(frozen=True, slots=True)
class RoleState:
    role: str
    at: float  # the newest heartbeat, over every process
    age_s: float
    holder: str  # the process that beat it
    processes: int  # processes whose heartbeat of this role is fresh
    stale: bool


@dataclass(frozen=True, slots=True)
class SnapshotState:
    board: str
    window: str
    age_s: float | None  # None: no snapshot (no aggregator has published one)


@dataclass
class Report:
    at: float
    databases: list[Reachable]
    index: list[IndexNode]
    roles: list[RoleState] | None  # None: the store could not be asked
    outbox_pending: int | None = None
    outbox_age_s: float | None = None  # the oldest change not yet sent; None: not known
    snapshots: list[SnapshotState] | None = None  # None: boards are not split (no aggregator)
    # how far the board is behind the store, by its marks (domain/marks.py); None: not known
    board_behind_s: float | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read, and why

    def down(self) -> list[str]:
        """What is out, one phrase each; empty when every part answers and loops."""
        out = [f"store database {d.name}: {d.why}" for d in self.databases if not d.up]
        out += [f"index {shard_name(n)} at {n.node}: {n.why}" for n in self.index if not n.up]
        out += [
            f"role {r.role}: last heartbeat {r.age_s:.0f} s ago ({r.holder})"
            for r in self.roles or ()
            if r.stale
        ]
        return out


def shard_name(n: IndexNode) -> str:
    return "(one shard)" if n.shard is None else f"shard {n.shard}"


class Status:
    def __init__(
        self,
        settings: Settings,
        store: StatusStore,
        index: RankIndex,
        snapshots: Snapshots | None,  # None unless boards are split across index shards
        clock: Clock,
        behind: Callable[[], Awaitable[float | None]] | None = None,
    ) -> None:
        self.settings = settings
        self.behind = behind  # the board marks' reading (service/reads/freshness.py)
        self.store = store
        self.index = index
        self.snapshots = snapshots
        self.clock = clock

    async def report(self) -> Report:
        now = self.clock.now()
        databases, nodes, beats, backlog, snaps, behind = await asyncio.gather(
            self.store.databases(),
            self.index.nodes(),
            _said(self.store.heartbeats()),
            _said(self.store.outbox_backlog(now)),
            _said(self._snapshots(now)),
            _said(self._behind()),
        )
        report = Report(now, databases, nodes, None)
        for what, (_, why) in (
            ("heartbeats", beats),
            ("outbox", backlog),
            ("snapshots", snaps),
        ):
            if why is not None:
                report.problems.append(f"{what}: {why}")
        if beats[0] is not None:
            report.roles = roles(beats[0], now)
        if backlog[0] is not None:
            pending, age = backlog[0]
            report.outbox_pending, report.outbox_age_s = pending, age
        report.snapshots = snaps[0]
        report.board_behind_s = behind[0]
        return report

    async def _behind(self) -> float | None:
        return None if self.behind is None else await self.behind()

    async def _snapshots(self, now: float) -> list[SnapshotState] | None:
        if self.snapshots is None:
            return None
        out = []
        for spec in self.settings.boards:
            w = spec.rule.window_at(int(now))
            if spec.group_by is not None or w is None:
                continue  # grouped boards are read from the shards, without a snapshot
            data = await self.snapshots.read(BoardKey(spec.name, w.id))
            age = None if data is None else max(0.0, now - Snapshot.decode(data).as_of)
            out.append(SnapshotState(spec.name, w.id, age))
        return out


def roles(beats: list[Heartbeat], now: float) -> list[RoleState]:
    """Each role's newest heartbeat, and how many processes beat it lately."""
    by_role: dict[str, list[Heartbeat]] = {}
    for b in beats:
        by_role.setdefault(b.role, []).append(b)
    out = []
    for role, hs in sorted(by_role.items()):
        newest = max(hs, key=lambda h: h.at)
        fresh = [h for h in hs if now - h.at <= h.every_s + STALE_AFTER_S]
        age = max(0.0, now - newest.at)
        out.append(RoleState(role, newest.at, age, newest.holder, len(fresh), not fresh))
    return out


async def _said(work: Awaitable[T]) -> tuple[T | None, str | None]:
    try:
        return await work, None
    except PodiumError as e:
        return None, str(e)
