"""Results across databases: a match's claim where its id maps to, each player's part where
the player lives.

``open_match`` claims on the match id's database and reads each database's players there,
in parallel (one round trip when the claim's database holds players of the match too: the
claim and their read are one statement, as on one database). ``record`` is one transaction
on the player's database, which also holds a copy of the claim (the adapter's record writes
one, and refuses another key's result for a match it knows); when the match id maps to
another database, the claim there is written again after the record commits, which is what
keeps a result from ever being stored without its owner once a concurrent rejection of the
same key released the claim (``release_match`` and this re-claim take one lock on the match's
database, and the release looks for results on every database while holding it); it is
also written before the record, and the record refused if the match is another key's (a
claim past its lease with no result may have been released, and taken, meanwhile). A record
from the handle of an ``open_match`` that made the claim itself skips both (``Claimed``): only
a request stalled past the claim lease between its claim and its writes could lose its claim
to another key, which the lease (``server.claim_lease_s``) is set far above.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence

from podium.domain.boards import BoardSpec
from podium.domain.models import (
    Flagged,
    MatchQuery,
    RecordOutcome,
    ResultRecord,
    Standing,
    Target,
)
from podium.errors import Forbidden, PodiumError
from podium.ports.store import MatchRead, RecordHandle
from podium.store.split.routing import Part, Router
from podium.util.aio import gather_all

RELEASED_KEPT = 10_000  # the matches whose claim this store released, latest first kept


@dataclasses.dataclass(frozen=True, slots=True)
class Claimed(RecordHandle):
    """The handle of a player's database (``inner``), from an ``open_match`` that made the
    match's claim itself. No other request can release that claim (a release names its
    claim's time, this call's), and this request releases it only after its records, once
    no database holds a result of the match: so a record from this handle need not write
    the claim again, which saves the usual match its round trip to the claim's database,
    unless this store released a claim of the match (``_released``: only the request that
    made it can)."""

    inner: RecordHandle

    def check(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
    ) -> None:
        self.inner.check(result, targets, now, hourly_cap)


class Results(Part):
    def __init__(self, router: Router) -> None:
        super().__init__(router)
        self._released: dict[tuple[str, str], None] = {}  # (match, key): claims released here

    async def open_match(self, query: MatchQuery) -> MatchRead:
        r = self.router
        await r.ready()
        claim_url = r.url_of(query.match_id)
        groups = r.by_db(query.player_ids)
        claim_ids = groups.pop(claim_url, [])
        claim = r.db(claim_url).open_match(dataclasses.replace(query, player_ids=claim_ids))
        reads = [
            r.db(u).read_players(dataclasses.replace(query, player_ids=ids))
            for u, ids in groups.items()
        ]
        done = await asyncio.gather(claim, *reads, return_exceptions=True)
        failures = [d for d in done if isinstance(d, BaseException)]
        if failures:
            # A request that is not answered claims nothing, as on one database, where the
            # claim and the read are one statement: a claim this call made is released, if
            # every database can say it holds no result of the match (else it stays this
            # key's, and the key's retry goes on with it).
            if isinstance(done[0], MatchRead) and done[0].claimed:
                with contextlib.suppress(PodiumError):
                    await self.release_match(query.match_id, query.key_id, query.now)
            raise failures[0]
        parts = [d for d in done if isinstance(d, MatchRead)]
        head = parts[0]
        existing, recent_points = dict(head.existing), dict(head.recent_points)
        counts, handles = dict(head.counts), dict(head.handles)
        for part in parts[1:]:
            existing.update(part.existing)
            recent_points.update(part.recent_points)
            counts.update(part.counts)
            handles.update(part.handles)
        if head.claimed:
            handles = {p: Claimed(h) for p, h in handles.items()}
        return MatchRead(
            head.owner,
            existing,
            recent_points,
            counts,
            handles,
            head.claimed,
            head.facts,
            head.claimed_at,
        )

    async def release_match(self, match_id: str, key_id: str, claimed_at: float) -> bool:
        r = self.router
        await r.ready()
        claim_url = r.url_of(match_id)
        others = [u for u in r.urls() if u != claim_url]

        async def recorded_elsewhere() -> bool:
            return any(await gather_all(r.db(u).has_results(match_id) for u in others))

        # Remembered before the release starts, not after it answers: a record of this key
        # that commits meanwhile on another database, and asks after its commit whether to
        # write the claim again, must hear yes. Asked once the release has begun, it re-claims
        # (under the lock the release holds while it looks for results); asked before, its
        # result was committed before the release looked, which then sees it and keeps the
        # claim. A release that released nothing leaves the match remembered: its records
        # then only pay the re-claim's round trip.
        self._remember_release(match_id, key_id)
        return await r.db(claim_url).release_match_unless(
            match_id, key_id, claimed_at, recorded_elsewhere
        )

    def _remember_release(self, match_id: str, key_id: str) -> None:
        self._released[(match_id, key_id)] = None
        while len(self._released) > RELEASED_KEPT:
            del self._released[next(iter(self._released))]

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        handle: RecordHandle | None = None,
    ) -> RecordOutcome:
        r, router = result, self.router
        inner = handle.inner if isinstance(handle, Claimed) else handle
        await router.ready()
        mine = isinstance(handle, Claimed) and (r.match_id, r.key_id) not in self._released
        if not mine and router.url_of(r.match_id) != router.url_of(r.player_id):
            # The claim first, where this request did not make it: the player's database
            # knows only the claims of its own players' results, and a result is never
            # stored under another key's claim (a claim past its lease may have been
            # released, and the match claimed by another key, since ``open_match``).
            owner = await router.routed(r.match_id, lambda db: db.reclaim_match(r, now))
            if owner != r.key_id:
                raise Forbidden(f"match {r.match_id} was recorded by another game server")
        out = await router.routed(
            r.player_id, lambda db: db.record(r, targets, now, hourly_cap, inner)
        )
        mine = isinstance(handle, Claimed) and (r.match_id, r.key_id) not in self._released
        if router.url_of(r.match_id) != router.url_of(r.player_id) and not mine:
            # After the record too (whether this store released a claim of the match is
            # asked again: a release may have run meanwhile), and on a replay: the retry of
            # a record whose re-claim failed completes it.
            await router.routed(r.match_id, lambda db: db.reclaim_match(r, now))
        return out

    async def results_of(self, match_id: str, player_ids: Sequence[str]) -> dict[str, ResultRecord]:
        parts = await self.router.by_player(
            player_ids, lambda db, ids: db.results_of(match_id, ids)
        )
        return {p: r for part in parts for p, r in part.items()}

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        await self.router.ready()
        return await self.router.of(player_id).totals(player_id, targets)

    async def player_standings(self, player_id: str) -> list[Standing]:
        await self.router.ready()
        return await self.router.of(player_id).player_standings(player_id)

    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        parts = await self.router.each(lambda db: db.flagged(modes, limit))
        rows = [f for u, part in parts.items() for f in part if self.router.owns(u, f.player_id)]
        rows.sort(key=lambda f: f.recorded_at, reverse=True)
        return rows[:limit]
