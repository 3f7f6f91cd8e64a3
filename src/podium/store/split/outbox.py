"""The outbox across databases: each database's rows, written in its records' transactions.

A claim asks every database for its share of the limit in parallel, then tops up from the
databases that filled theirs, one after another, until the limit is reached or none has
more. It never claims a row only to give it back: on one database that would hide the row
from another consumer, who could then claim the same player's next row first. A player's
rows are all on one database (theirs), claimed there lowest id first, so their order holds.
A row's handle carries its database (``Routed.handle``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from podium.domain.models import Change, ProfileChange
from podium.store.postgres import PostgresStore
from podium.store.split.routing import Routed, gather_all


class Outbox(Routed):
    async def claim_changes(
        self, limit: int, lease_s: float, now: float
    ) -> list[Change | ProfileChange]:
        await self.ready()
        urls = self.urls()
        n = len(urls)
        shares = [limit // n + (1 if i < limit % n else 0) for i in range(n)]

        async def claim(url: str, share: int) -> list[Change | ProfileChange]:
            if share <= 0:
                return []
            rows = await self.db(url).claim_changes(share, lease_s, now)
            return [_tagged(c, self.handle(url, _row(c))) for c in rows]

        got = await gather_all(claim(u, s) for u, s in zip(urls, shares, strict=True))
        out = [c for part in got for c in part]
        for url, share, part in zip(urls, shares, got, strict=True):
            short = limit - len(out)
            if short <= 0:
                break
            if len(part) >= share:  # this one may have more (or was asked for none)
                out += await claim(url, short)
        return sorted(out, key=_row)

    async def ack_changes(self, ids: Sequence[int]) -> None:
        await gather_all(self.db(u).ack_changes(rows) for u, rows in self._by_db(ids).items())

    async def lease_changes(self, ids: Sequence[int], until: float) -> None:
        await gather_all(
            self.db(u).lease_changes(rows, until) for u, rows in self._by_db(ids).items()
        )

    async def requeue_player(self, player_id: str, now: float) -> int:
        await self.ready()
        return await self.of(player_id).requeue_player(player_id, now)

    async def players_since(self, since: float) -> list[str]:
        """Every database's players with a result since then, each counted only on the
        database the map puts them on (a bucket's old copy after a move is not theirs)."""
        await self.ready()
        urls = self.urls()
        parts = await gather_all(self.db(u).players_since(since) for u in urls)
        found = {p for u, ps in zip(urls, parts, strict=True) for p in ps if self.owns(u, p)}
        return sorted(found)

    async def outboxes(self) -> dict[str, PostgresStore]:
        """Every database that holds players, by URL, each its own outbox: what a relay
        per database reads (the rows of one player are all on one of them)."""
        await self.ready()
        return {u: self.db(u) for u in self.urls()}

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        await self.ready()
        parts = await gather_all(self.db(u).outbox_backlog(now) for u in self.urls())
        return sum(n for n, _ in parts), max((age for _, age in parts), default=0.0)

    def _by_db(self, ids: Sequence[int]) -> dict[str, list[int]]:
        return self.split_handles(list(ids))


def _row(c: Change | ProfileChange) -> int:
    assert isinstance(c.handle, int)
    return c.handle


def _tagged(c: Change | ProfileChange, handle: int) -> Change | ProfileChange:
    return dataclasses.replace(c, handle=handle)
