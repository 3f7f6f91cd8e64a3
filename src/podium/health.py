"""Is this process ready to serve (``GET /readyz``): the store and the index both answer.

Knows the ports, never an adapter.
"""

from __future__ import annotations

from podium.ports import Lifetime, RankIndex


class Health:
    def __init__(self, store: Lifetime, index: RankIndex) -> None:
        self.store = store
        self.index = index

    async def ready(self) -> None:
        """Returns when both answer; raises ``Unavailable`` (503) when one does not."""
        await self.store.ping()
        await self.index.ping()
