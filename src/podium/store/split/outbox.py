"""The outbox across databases: each database's rows, written in its records' transactions.

A claim asks every database for its share of the limit in parallel, then tops up from the
databases that filled theirs, one after another, until the limit is reached or none has
more. A database that is down gives nothing this time (logged), so that the others' changes
still reach the boards while one is out; only when every database is down is the claim an
``Unavailable``. It never claims a row only to give it back: on one database that would hide the row
from another consumer, who could then claim the same player's next row first. A player's
rows are all on one database (theirs), claimed there lowest id first, so their order holds.
A row's handle carries its database: (its index << ``HANDLE_BITS``) | its row id there.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

from podium.domain.models import Change, ProfileChange
from podium.errors import Unavailable
from podium.store.postgres import PostgresStore
from podium.store.split.routing import HANDLE_BITS, Part
from podium.util.aio import gather_all

log = logging.getLogger("podium.store")

_ROW = (1 << HANDLE_BITS) - 1
WARN_EVERY_S = 10.0
_warned = [float("-inf")]


class Outbox(Part):
    async def claim_changes(
        self, limit: int, lease_s: float, now: float
    ) -> list[Change | ProfileChange]:
        r = self.router
        await r.ready()
        urls = r.urls()
        n = len(urls)
        shares = [limit // n + (1 if i < limit % n else 0) for i in range(n)]

        down: dict[str, Unavailable] = {}

        async def claim(url: str, share: int) -> list[Change | ProfileChange]:
            if share <= 0 or url in down:
                return []
            try:
                rows = await r.db(url).claim_changes(share, lease_s, now)
            except Unavailable as e:
                down[url] = e
                return []
            tag = r.db_index(url) << HANDLE_BITS
            return [dataclasses.replace(c, handle=tag | _row(c)) for c in rows]

        got = await gather_all(claim(u, s) for u, s in zip(urls, shares, strict=True))
        if len(down) == n:
            raise next(iter(down.values()))
        if down and time.monotonic() - _warned[0] > WARN_EVERY_S:  # claims come ms apart
            _warned[0] = time.monotonic()
            log.warning("outbox: %d of %d databases down, claimed from the others", len(down), n)
        out = [c for part in got for c in part]
        for url, share, part in zip(urls, shares, got, strict=True):
            short = limit - len(out)
            if short <= 0:
                break
            if len(part) >= share:  # this one may have more (or was asked for none)
                out += await claim(url, short)
        return sorted(out, key=_row)

    async def ack_changes(self, ids: Sequence[int]) -> None:
        await gather_all(self._db(i).ack_changes(rows) for i, rows in _by_db(ids).items())

    async def lease_changes(self, ids: Sequence[int], until: float) -> None:
        await gather_all(self._db(i).lease_changes(rows, until) for i, rows in _by_db(ids).items())

    async def requeue_player(self, player_id: str, now: float) -> int:
        await self.router.ready()
        return await self.router.of(player_id).requeue_player(player_id, now)

    async def requeue_players(self, player_ids: Sequence[str], now: float) -> int:
        done = await self.router.by_player(player_ids, lambda db, ps: db.requeue_players(ps, now))
        return sum(done)

    async def players_since(self, since: float) -> list[str]:
        """Every database's players with a result since then, each counted only on the
        database the map puts them on (a bucket's old copy after a move is not theirs)."""
        parts = await self.router.each(lambda db: db.players_since(since))
        return sorted({p for u, ps in parts.items() for p in ps if self.router.owns(u, p)})

    async def outboxes(self) -> dict[str, PostgresStore]:
        """Every database that holds players, by URL, each its own outbox: what a relay
        per database reads (the rows of one player are all on one of them)."""
        r = self.router
        await r.ready()
        return {u: r.db(u) for u in r.urls()}

    async def relayed(self) -> dict[str, PostgresStore]:
        """What a relay per database reads when NATS is the log: every database that holds
        players (``outboxes``), and the home, for the events a freeze writes there (its
        outbox is empty unless it holds players too)."""
        found = await self.outboxes()
        return {self.router.home_url: self.router.home, **found}

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        parts = (await self.router.each(lambda db: db.outbox_backlog(now))).values()
        return sum(n for n, _ in parts), max((age for _, age in parts), default=0.0)

    async def acked_through(self, ids: Sequence[int]) -> list[bool]:
        """Each handle's row on its own database (a row id orders only its own outbox)."""
        by = _by_db(ids)
        keys = list(by)
        found = await gather_all(self._db(i).acked_through(by[i]) for i in keys)
        done = {
            (i << HANDLE_BITS) | r: ok
            for i, oks in zip(keys, found, strict=True)
            for r, ok in zip(by[i], oks, strict=True)
        }
        return [done[h] for h in ids]

    def _db(self, index: int) -> PostgresStore:
        return self.router.db(self.router.url_at(index))


def _by_db(handles: Sequence[int]) -> dict[int, list[int]]:
    """Row ids by the index of their database."""
    out: dict[int, list[int]] = {}
    for h in handles:
        out.setdefault(h >> HANDLE_BITS, []).append(h & _ROW)
    return out


def _row(c: Change | ProfileChange) -> int:
    assert isinstance(c.handle, int)
    return c.handle
