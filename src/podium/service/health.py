"""Is this process ready to serve (``GET /readyz``): every part it uses asked at once, and
each one that does not answer named.

- the score store and the rank index: without either this process cannot serve (a write
  needs the store, a read the index), so either one down makes it not ready (503);
- the change log (NATS JetStream): results are still accepted while it is down (the outbox
  holds them, invariant 2 of docs/architecture.md), so it is named, as degraded, but does
  not take the process out of service. A log that is the outbox is the store.

Knows the ports, never an adapter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass

from podium.errors import Unavailable
from podium.ports import ChangeLog, Lifetime, RankIndex

# What a caller is told of each part, by the name /readyz gives it.
PARTS = {"store": "the score store", "index": "the rank index", "log": "the change log"}
NEEDED = ("store", "index")  # without these this process serves nothing


@dataclass(frozen=True)
class Readiness:
    down: dict[str, Unavailable]  # by part name, what each one that did not answer raised

    @property
    def ready(self) -> bool:
        return not any(part in self.down for part in NEEDED)

    def detail(self) -> str:
        """Which parts are down, by name, never their addresses (those go to the log)."""
        named = [PARTS[p] for p in PARTS if p in self.down]
        verb = "is" if len(named) == 1 else "are"
        return f"{' and '.join(named)} {verb} unavailable"


class Health:
    def __init__(self, store: Lifetime, index: RankIndex, log: ChangeLog | None = None) -> None:
        self.store = store
        self.index = index
        self.log = log

    async def readiness(self) -> Readiness:
        """Every part asked at once; those that raised ``Unavailable``, by name (anything
        else is a bug and is raised)."""
        asked: dict[str, Awaitable[None]] = {"store": self.store.ping(), "index": self.index.ping()}
        if self.log is not None:
            asked["log"] = self.log.ping()
        got = await asyncio.gather(*asked.values(), return_exceptions=True)
        down: dict[str, Unavailable] = {}
        for part, outcome in zip(asked, got, strict=True):
            if isinstance(outcome, Unavailable):
                down[part] = outcome
            elif isinstance(outcome, BaseException):
                raise outcome
        return Readiness(down)
