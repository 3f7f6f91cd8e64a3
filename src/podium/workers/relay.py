"""The relay: moves committed outbox rows into the change log.

With the outbox itself as the log there is nothing to move and the role idles; with a
separate log (NATS JetStream) it publishes claimed rows, then deletes them.
"""

from __future__ import annotations

from podium.ports import ChangeLog
from podium.workers.marker import Marker
from podium.workers.runner import Needs, Runner


class Relay:
    def __init__(self, changes: ChangeLog, batch: int) -> None:
        self._log = changes
        self._batch = batch

    async def step(self) -> int:
        return await self._log.relay(self._batch)


def runners(n: Needs) -> list[Runner]:
    """The relay, and beside it the board marks' writer (``marker.py``): the relay is the
    role every deployment runs once per store database's outbox, embedded included."""
    w = n.settings.workers
    out = [Runner("relay", Relay(n.log, w.batch).step, idle_sleep_s=w.idle_sleep_s)]
    if n.marking is not None and w.mark_s > 0:
        marker = Marker(n.marking, n.log.partitions, n.clock)
        out.append(Runner("marker", marker.step, idle_sleep_s=w.mark_s))
    return out
