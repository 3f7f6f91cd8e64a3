"""``Layouts``: the shard layouts of a split index, as a reshard sees them
(``podium rebuild --all --shards M``, ``service/upkeep/reshard.py``; §8 of docs/architecture.md).

The live layout is the one the index's layout record names (absent: the configured
``index.shards``). A reshard names the next one in the record while it builds it, which
every process follows by writing both; then it writes the record's switch, which every
process follows within ``index.watch_s``. The layouts' keys never meet (``index/redis/keys.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from podium.ports.generations import Generations
from podium.ports.index import ProfileCopy, RankIndex, Rebuilding, ShardIndex, SplitBoards


class LayoutIndex(RankIndex, Rebuilding, Protocol):
    """One layout's split index: its boards, and their rebuild beside the live generation."""


class Layouts(Protocol):
    @property
    def count(self) -> int:
        """The live layout's shard count, as this process follows it."""
        ...

    @property
    def tagged(self) -> bool:
        """Whether the live layout's tags carry its count (one a reshard built)."""
        ...

    def index_of(self, count: int) -> LayoutIndex:
        """The index of the layout of ``count`` shards a reshard builds."""
        ...

    def copy_of(self, count: int) -> ProfileCopy: ...
    def markers_of(self, count: int) -> Generations: ...

    async def follow(self) -> bool:
        """Read the record and follow it (True: the live layout changed)."""
        ...

    async def begin(self, count: int, ttl_s: float) -> bool:
        """Name ``count`` as the next layout (False: another reshard runs)."""
        ...

    async def keep(self, count: int, ttl_s: float) -> bool: ...

    async def switch(self, count: int) -> None:
        """The record's switch: ``count`` is live, for every window at once."""
        ...

    async def end(self, count: int) -> None:
        """A reshard given up: the next layout no longer named."""
        ...

    async def drop(self, count: int, tagged: bool) -> int:
        """Every key of that layout unlinked; how many."""
        ...

    async def wait_s(self) -> float:
        """How long every process of the fleet may take to follow a change of the record."""
        ...


class LiveLayouts(Layouts, Protocol):
    """The layouts as every process of a split Redis index follows them: read at start,
    then watched (a runner's step every ``index.watch_s``)."""

    async def step(self) -> int:
        """One look at the record, followed (a runner's step)."""
        ...


class LayoutRecord(Protocol):
    """An unsplit index's look at the layout record: a record that names a split layout
    means the keys it would read are not the live ones."""

    async def read(self) -> tuple[int | None, int | None]:
        """The record's live and next shard counts (None: not named)."""
        ...


class SplitShards(SplitBoards, Protocol):
    """A split index's shards, each one's part of every board: what the aggregator and the
    mender are given."""

    @property
    def shards(self) -> Sequence[ShardIndex]: ...
