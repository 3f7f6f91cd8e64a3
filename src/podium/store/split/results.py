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
database, and the release looks for results on every database while holding it). A record
from the handle of an ``open_match`` that made the claim itself skips that (``ClaimedSeen``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from podium.domain.boards import BoardSpec
from podium.domain.models import Flagged, RecordOutcome, ResultRecord, Standing, Target
from podium.errors import PodiumError
from podium.ports.store import MatchRead, RecordHandle
from podium.store.common import Seen
from podium.store.postgres import locks
from podium.store.postgres.record_sql import RELEASE
from podium.store.split.routing import Routed, gather_all

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

RELEASED_KEPT = 10_000  # the matches whose claim this store released, latest first kept
MATCH_NS = 0x7064_0010  # the split's lock on a match id, on the match id's database

# The claim again, after the record committed elsewhere: under the match's lock, so that a
# release either saw this record's result or ran wholly before (and is undone here).
RECLAIM = (
    "INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s) "
    "SELECT $3, $4, $5, $6, $7, $8 FROM (SELECT pg_advisory_xact_lock($1, $2)) AS l "
    "ON CONFLICT (match_id) DO NOTHING"
)


@dataclass(frozen=True, slots=True, eq=False)
class ClaimedSeen(Seen):
    """A handle from an ``open_match`` that made the match's claim itself. No other request
    can release that claim (a release names its claim's time, this call's), and this
    request releases it only after its records, once no database holds a result of the
    match: so a record from this handle need not write the claim again, which saves the
    usual match its round trip to the claim's database, unless this store released a claim
    of the match (``_released``: only the request that made it can). Equal to the same
    ``Seen``."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Seen):
            return _fields(self) == _fields(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _fields(h: Seen) -> tuple[object, ...]:
    return (h.country, h.frozen, h.tallies, h.count, h.oldest)


def _claimed(h: RecordHandle) -> RecordHandle:
    if isinstance(h, Seen) and not isinstance(h, ClaimedSeen):
        return ClaimedSeen(h.country, h.frozen, h.tallies, h.count, h.oldest)
    return h


class Results(Routed):
    async def open_match(
        self,
        match_id: str,
        key_id: str,
        now: float,
        player_ids: Sequence[str],
        mode: str,
        recent: int,
        since: float | None,
        targets: Sequence[tuple[Target, BoardSpec]] = (),
        *,
        ended_at: int | None = None,
        duration_s: int | None = None,
    ) -> MatchRead:
        await self.ready()
        claim_url = self.url_of(match_id)
        groups = self.by_db(player_ids)
        facts = {"ended_at": ended_at, "duration_s": duration_s}
        claim_ids = groups.pop(claim_url, [])
        claim = self.db(claim_url).open_match(
            match_id, key_id, now, claim_ids, mode, recent, since, targets, **facts
        )
        reads = [
            self.db(u).read_players(match_id, ids, mode, recent, since, targets)
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
                    await self.release_match(match_id, key_id, now)
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
            handles = {p: _claimed(h) for p, h in handles.items()}
        return MatchRead(
            head.owner, existing, recent_points, counts, handles, head.claimed, head.facts
        )

    async def release_match(self, match_id: str, key_id: str, claimed_at: float) -> bool:
        await self.ready()
        claim_url = self.url_of(match_id)
        others = [u for u in self.urls() if u != claim_url]

        async def run(c: Conn) -> bool:
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", MATCH_NS, locks.player_key(match_id)
            )
            found = await gather_all(_has_results(self, u, match_id) for u in others)
            if any(found):
                return False
            status = await c.execute(RELEASE, match_id, key_id, float(claimed_at))
            if status != "DELETE 1":
                return False
            self._released[(match_id, key_id)] = None
            while len(self._released) > RELEASED_KEPT:
                del self._released[next(iter(self._released))]
            return True

        return await self.db(claim_url).run(run)

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        handle: RecordHandle | None = None,
    ) -> RecordOutcome:
        r = result
        out = await self.routed(
            r.player_id, lambda db: db.record(r, targets, now, hourly_cap, handle)
        )
        mine = isinstance(handle, ClaimedSeen) and (r.match_id, r.key_id) not in self._released
        if self.url_of(r.match_id) != self.url_of(r.player_id) and not mine:
            # On a replay too: the retry of a record whose re-claim failed completes it.
            args = (r.match_id, r.key_id, float(now), r.mode, r.ended_at, r.duration_s)
            key = locks.player_key(r.match_id)
            await self.routed(
                r.match_id,
                lambda db: db.run(lambda c: c.execute(RECLAIM, MATCH_NS, key, *args), tx=False),
            )
        return out

    async def results_of(self, match_id: str, player_ids: Sequence[str]) -> dict[str, ResultRecord]:
        await self.ready()
        parts = await gather_all(
            self.db(u).results_of(match_id, ids) for u, ids in self.by_db(player_ids).items()
        )
        return {p: r for part in parts for p, r in part.items()}

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        await self.ready()
        return await self.of(player_id).totals(player_id, targets)

    async def player_standings(self, player_id: str) -> list[Standing]:
        await self.ready()
        return await self.of(player_id).player_standings(player_id)

    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        await self.ready()
        urls = self.urls()
        parts = await gather_all(self.db(u).flagged(modes, limit) for u in urls)
        pairs = zip(urls, parts, strict=True)
        rows = [f for u, part in pairs for f in part if self.owns(u, f.player_id)]
        rows.sort(key=lambda f: f.recorded_at, reverse=True)
        return rows[:limit]


async def _has_results(store: Routed, url: str, match_id: str) -> bool:
    found = await store.db(url).run(
        lambda c: c.fetchval("SELECT EXISTS (SELECT 1 FROM results WHERE match_id = $1)", match_id),
        tx=False,
    )
    return bool(found)
