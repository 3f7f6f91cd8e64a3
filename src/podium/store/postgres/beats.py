"""What ``podium status`` reads of a Postgres store: the roles' heartbeats, the database."""

from __future__ import annotations

from collections.abc import Mapping

from podium.ports.status import Heartbeat, Reachable
from podium.store.common import HEARTBEATS_KEPT_S, reachable, shown
from podium.store.postgres.pool import Database

# One statement for every role of the process, and the forgetting of silent processes: a
# few rows every few seconds, on a table of a few dozen.
BEAT = """
WITH beat AS (
    INSERT INTO heartbeats (role, holder, at, every_s)
    SELECT r, $1, a, e FROM unnest($2::text[], $3::float8[], $4::float8[]) AS u(r, a, e)
    ON CONFLICT (role, holder) DO UPDATE SET at = excluded.at, every_s = excluded.every_s
)
DELETE FROM heartbeats WHERE at < $5
"""


class Beats(Database):
    async def beat(self, holder: str, beats: Mapping[str, tuple[float, float]]) -> None:
        if not beats:
            return
        roles = list(beats)
        at = [beats[r][0] for r in roles]
        every = [beats[r][1] for r in roles]
        await self._execute(BEAT, holder, roles, at, every, min(at) - HEARTBEATS_KEPT_S)

    async def heartbeats(self) -> list[Heartbeat]:
        rows = await self._fetch(
            "SELECT role, holder, at, every_s FROM heartbeats ORDER BY at DESC"
        )
        return [Heartbeat(r["role"], r["holder"], r["at"], r["every_s"]) for r in rows]

    async def databases(self) -> list[Reachable]:
        return [await reachable(shown(self.url), self.ping)]
