"""What every partitioned change log does alike: the partitions a fetch reads, in turn, and
the one store database a log relays from when it is given just one outbox."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from podium.log.events import source_of
from podium.ports import Relayed

Databases = Callable[[], Awaitable[Mapping[str, Relayed]]]
T = TypeVar("T")


class Turns:
    """The partitions a fetch reads: the one it names, or every one, starting with the next
    in turn so that no partition is always read last (and starved when ``limit`` is small)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._turn = 0

    def parts(self, partition: int | None) -> list[int]:
        if partition is not None:
            if not 0 <= partition < self.partitions:
                raise ValueError(
                    f"partition {partition!r}: the log has partitions 0 to {self.partitions - 1}"
                )
            return [partition]
        start, self._turn = self._turn, (self._turn + 1) % self.partitions
        return [(start + i) % self.partitions for i in range(self.partitions)]


def databases_of(
    databases: Databases | None, outbox: Relayed | None, source: str
) -> Databases | None:
    """``databases`` as given, or else the one ``outbox`` under its ``source`` name; None: the
    log is a consumer only."""
    if databases is not None or outbox is None:
        return databases
    return just(source, outbox)


def by_name(
    by_url: Callable[[], Awaitable[Mapping[str, T]]],
) -> Callable[[], Awaitable[Mapping[str, T]]]:
    """Store databases by URL, asked for at every call (a bucket can move to a database not
    yet seen), as by their names (``events.source_of``): what a relay names each one."""

    async def every() -> Mapping[str, T]:
        return {source_of(u): o for u, o in (await by_url()).items()}

    return every


def just(name: str, database: T) -> Callable[[], Awaitable[Mapping[str, T]]]:
    """The one store database, under its ``name`` (``events.source_of`` of its URL), as
    ``by_name`` gives them."""
    one = {name: database}

    async def only() -> Mapping[str, T]:
        return one

    return only
