"""Each process's roles' heartbeats, written to the store every few seconds, so that
``podium status`` run anywhere sees which roles loop, and where: the metric
``podium_worker_heartbeat_timestamp`` says the same, but only to whoever scrapes that very
process.

Started beside the roles of a process (``roles.runners``); a store that does not answer
costs a missed beat, counted as the ``heartbeat`` role's error, never a role's work.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from podium.ports.status import Beats
from podium.workers.runner import Runner

BEAT_S = 5.0  # how often a process writes its roles' heartbeats
HOLDER = f"{socket.gethostname()}:{os.getpid()}"


class Heartbeats:
    def __init__(self, store: Beats, runners: Sequence[Runner], holder: str = HOLDER) -> None:
        self._store = store
        self._runners = list(runners)
        self._holder = holder

    async def step(self) -> int:
        beats: dict[str, tuple[float, float]] = {}
        for r in self._runners:
            if r.last_loop is None:
                continue
            at, every = beats.get(r.role, (0.0, 0.0))
            beats[r.role] = (max(at, r.last_loop), max(every, r.every_s))
        await self._store.beat(self._holder, beats)
        return 0


def runner(store: Beats, runners: Sequence[Runner]) -> Runner:
    return Runner("heartbeat", Heartbeats(store, runners).step, idle_sleep_s=BEAT_S)
