"""What ``podium status`` reads of a store split by player: the heartbeats, on the home
database (they are global, as the keys are), and every database, each asked at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from podium.errors import PodiumError
from podium.ports.status import Heartbeat, Reachable
from podium.store.common import reachable, shown
from podium.store.split.routing import Part


class Beats(Part):
    async def beat(self, holder: str, beats: Mapping[str, tuple[float, float]]) -> None:
        await self.router.home.beat(holder, beats)

    async def heartbeats(self) -> list[Heartbeat]:
        return await self.router.home.heartbeats()

    async def databases(self) -> list[Reachable]:
        # The map names databases beside the configured ones. With the home down, its own
        # line says so, and the configured shards are still asked.
        with contextlib.suppress(PodiumError):
            await self.router.ready()
        home = self.router.home
        urls = [u for u in self.router.urls() if self.router.db(u) is not home]
        found = await asyncio.gather(
            reachable(f"{shown(home.url)} (home)", home.ping),
            *(reachable(shown(u), self.router.db(u).ping) for u in urls),
        )
        return list(found)
