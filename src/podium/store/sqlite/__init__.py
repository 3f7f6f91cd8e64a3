"""The embedded score store: one SQLite file in WAL mode, every port in one adapter.

``db.py`` holds the file, its writer and reader threads and the group commit; each port is a
module of its own (``credentials``, ``record``, ``outbox``, ``players``, ``windows``), and
``errors.py`` is the one table that sorts SQLite's errors into outages and bugs.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.store.sqlite.beats import Beats
from podium.store.sqlite.cohorts import Cohorts
from podium.store.sqlite.credentials import Credentials
from podium.store.sqlite.db import GROUP_MAX
from podium.store.sqlite.erasure import PlayerData
from podium.store.sqlite.outbox import Outbox
from podium.store.sqlite.players import Players
from podium.store.sqlite.record import Results
from podium.store.sqlite.rejection import Rejections
from podium.store.sqlite.retention import Retention
from podium.store.sqlite.tournaments import Tournaments
from podium.store.sqlite.webhooks import Webhooks
from podium.store.sqlite.windows import Windows

__all__ = ["GROUP_MAX", "SqliteStore"]


class SqliteStore(
    PlayerData,
    Credentials,
    Results,
    Outbox,
    Players,
    Rejections,
    Windows,
    Retention,
    Beats,
    Webhooks,
    Tournaments,
    Cohorts,
):
    async def banned(self, player_ids: Sequence[str]) -> set[str]:
        """The banned, and the erased (by the hash kept of their id): whom the updaters,
        the reconciler and a freeze leave out, by one call (docs/architecture.md §9)."""
        found = await Players.banned(self, player_ids)
        return found | await self.erased(player_ids)

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        path = url.removeprefix("sqlite:///") or "podium.db"
        return cls(path)
