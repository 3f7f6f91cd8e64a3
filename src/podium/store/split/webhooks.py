"""Reward and moderation events across databases. Each event lives where the change that
made it committed: a freeze's on the home (with the final standings), a ban's or a flagged
result's on the player's database. Rather than move events between databases (a second
transaction that could fail apart from the first), every call here asks every database, the
home included, and a claimed delivery remembers its database (``Due.source``) for its
settling: one delivery worker serves them all, and several share them as on one database."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import replace

from podium.ports.webhooks import Delivery, Due, Event
from podium.store.postgres import PostgresStore
from podium.store.split.routing import Part
from podium.util.aio import gather_all


class Webhooks(Part):
    def _databases(self) -> list[str]:
        return list(dict.fromkeys([self.router.home_url, *self.router.urls()]))

    async def _every(self) -> list[tuple[str, PostgresStore]]:
        await self.router.ready()
        return [(u, self.router.db(u)) for u in self._databases()]

    async def fan_out(
        self, routes: Mapping[str, Sequence[str]], since: float, now: float, limit: int
    ) -> int:
        dbs = await self._every()
        done = await gather_all(db.fan_out(routes, since, now, limit) for _, db in dbs)
        return sum(done)

    async def claim_deliveries(
        self,
        now: float,
        lease_until: float,
        limit: int,
        *,
        endpoint: str | None = None,
        other_than: Sequence[str] = (),
    ) -> list[Due]:
        dbs = await self._every()
        parts = await gather_all(
            db.claim_deliveries(now, lease_until, limit, endpoint=endpoint, other_than=other_than)
            for _, db in dbs
        )
        return [replace(d, source=u) for (u, _), part in zip(dbs, parts, strict=True) for d in part]

    async def settle(
        self,
        due: Due,
        now: float,
        *,
        status: int | None,
        error: str | None,
        retry_at: float | None,
        delivered: bool,
    ) -> None:
        await self.router.db(due.source).settle(
            due, now, status=status, error=error, retry_at=retry_at, delivered=delivered
        )

    async def deliveries(
        self, state: str | None, after: tuple[float, str, str] | None, limit: int
    ) -> list[Delivery]:
        dbs = await self._every()
        parts = await gather_all(db.deliveries(state, after, limit) for _, db in dbs)
        key = lambda d: (d.first_at, d.event_id, d.endpoint)  # noqa: E731
        return list(heapq.merge(*parts, key=key))[:limit]

    async def retry_delivery(self, event_id: str, endpoint: str, now: float) -> bool:
        # The event lives on one database, which one the id does not say: ask them all.
        dbs = await self._every()
        done = await gather_all(db.retry_delivery(event_id, endpoint, now) for _, db in dbs)
        return any(done)

    async def prune_events(
        self, before: float, limit: int, *, fanned: bool, published: bool
    ) -> int:
        dbs = await self._every()
        done = await gather_all(
            db.prune_events(before, limit, fanned=fanned, published=published) for _, db in dbs
        )
        return sum(done)

    # The relay reads each database's events under that database's lease (``log/nats/log.py``);
    # these two serve a caller of the whole store.

    async def unpublished_events(self, limit: int) -> list[Event]:
        dbs = await self._every()
        parts = await gather_all(db.unpublished_events(limit) for _, db in dbs)
        return list(heapq.merge(*parts, key=lambda e: e.at))[:limit]

    async def mark_published(self, event_ids: Sequence[str]) -> None:
        dbs = await self._every()
        await gather_all(db.mark_published(event_ids) for _, db in dbs)
