"""What ``podium status`` reads of the embedded store: the roles' heartbeats, the file."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from podium.ports.status import Heartbeat, Reachable
from podium.store.common import HEARTBEATS_KEPT_S, reachable
from podium.store.sqlite.db import Database

UPSERT = (
    "INSERT INTO heartbeats (role, holder, at, every_s) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (role, holder) DO UPDATE SET at = excluded.at, every_s = excluded.every_s"
)


class Beats(Database):
    async def beat(self, holder: str, beats: Mapping[str, tuple[float, float]]) -> None:
        if not beats:
            return
        rows = [(role, holder, at, every) for role, (at, every) in beats.items()]
        forget = min(at for at, _ in beats.values()) - HEARTBEATS_KEPT_S

        def run(c: sqlite3.Connection) -> None:
            c.executemany(UPSERT, rows)
            c.execute("DELETE FROM heartbeats WHERE at < ?", (forget,))

        await self._write(run)

    async def heartbeats(self) -> list[Heartbeat]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT role, holder, at, every_s FROM heartbeats ORDER BY at DESC"
            ).fetchall()
        )
        return [Heartbeat(r["role"], r["holder"], r["at"], r["every_s"]) for r in rows]

    async def databases(self) -> list[Reachable]:
        return [await reachable(self.path, self.ping)]
