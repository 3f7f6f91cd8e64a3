"""Reward and moderation events on Postgres: fanned out into deliveries, claimed with
``FOR UPDATE SKIP LOCKED`` (two workers never take the same delivery, and neither waits on
the other), settled, listed (``ports/webhooks.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from podium.domain import events
from podium.domain.models import FinalEntry
from podium.domain.tournaments import tournament_of
from podium.ports.webhooks import Delivery, Due, Event
from podium.store.common import DELIVERY_COLS, delivery_of, due_of
from podium.store.postgres.pool import Database, rowcount

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn


async def write_window_frozen(
    c: Conn, board: str, window: str, now: float, players: int, final: Sequence[FinalEntry]
) -> None:
    """Inside the freeze's transaction: its event (a window.frozen, or a tournament run's
    tournament.ended with the tournament's row as it is now), held until the archive's
    sha256 is in."""
    event_type, event_id = events.freeze_event(board, window)
    info = None
    if event_type == events.TOURNAMENT_ENDED:
        row = await c.fetchrow(
            "SELECT title, category, metadata FROM tournaments WHERE id = $1",
            tournament_of(board),
        )
        if row is not None:
            info = events.TournamentInfo(row["title"], row["category"], row["metadata"])
    data = events.freeze_data(board, window, now, players, final, info)
    await c.execute(
        "INSERT INTO webhook_events (id, type, at, data, ready) VALUES ($1, $2, $3, $4, false) "
        "ON CONFLICT (id) DO NOTHING",
        event_id,
        event_type,
        float(now),
        events.encode(data),
    )


async def release_window_frozen(c: Conn, board: str, window: str, checksum: str) -> None:
    """Inside ``set_archive``'s transaction: the event completed with the sha256, and ready."""
    _, event_id = events.freeze_event(board, window)
    data = await c.fetchval("SELECT data FROM webhook_events WHERE id = $1 FOR UPDATE", event_id)
    if data is not None:
        await c.execute(
            "UPDATE webhook_events SET data = $2, ready = true WHERE id = $1",
            event_id,
            events.with_archive(data, checksum),
        )


CLAIM = """
UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_at = $2
FROM (
    SELECT event_id, endpoint FROM webhook_deliveries
    WHERE state = 'pending' AND next_at <= $1
    AND ($4::text IS NULL OR endpoint = $4) AND endpoint <> ALL($5::text[])
    ORDER BY next_at LIMIT $3
    FOR UPDATE SKIP LOCKED
) due, webhook_events e
WHERE d.event_id = due.event_id AND d.endpoint = due.endpoint AND e.id = d.event_id
RETURNING d.event_id, d.endpoint, e.type, e.at, e.data, d.attempts, d.first_at
"""


# Old events done with, a batch of them locked (two pruners share the work), then their
# deliveries and themselves deleted in the same statement.
PRUNE = """
WITH gone AS (
    SELECT id FROM webhook_events e
    WHERE at < $1 AND (fanned OR NOT $3) AND (published OR NOT $4)
    AND NOT EXISTS (
        SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.state = 'pending'
    )
    ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED
), deliveries AS (
    DELETE FROM webhook_deliveries WHERE event_id IN (SELECT id FROM gone)
), events AS (
    DELETE FROM webhook_events WHERE id IN (SELECT id FROM gone) RETURNING 1
)
SELECT count(*) FROM events
"""


class Webhooks(Database):
    async def fan_out(
        self, routes: Mapping[str, Sequence[str]], since: float, now: float, limit: int
    ) -> int:
        async def run(c: Conn) -> int:
            rows = await c.fetch(
                "SELECT id, type, at FROM webhook_events WHERE NOT fanned AND ready "
                "ORDER BY at LIMIT $1 FOR UPDATE SKIP LOCKED",
                limit,
            )
            pairs = [
                (r["id"], url)
                for r in rows
                if r["at"] >= since
                for url in routes.get(r["type"], ())
            ]
            await c.execute(
                "INSERT INTO webhook_deliveries (event_id, endpoint, first_at, next_at) "
                "SELECT e, u, $3, $3 FROM unnest($1::text[], $2::text[]) AS t(e, u) "
                "ON CONFLICT DO NOTHING",
                [e for e, _ in pairs],
                [u for _, u in pairs],
                float(now),
            )
            await c.execute(
                "UPDATE webhook_events SET fanned = true WHERE id = ANY($1::text[])",
                [r["id"] for r in rows],
            )
            return len(rows)

        return await self._run(run)

    async def claim_deliveries(
        self,
        now: float,
        lease_until: float,
        limit: int,
        *,
        endpoint: str | None = None,
        other_than: Sequence[str] = (),
    ) -> list[Due]:
        rows = await self._run(
            lambda c: c.fetch(
                CLAIM, float(now), float(lease_until), limit, endpoint, list(other_than)
            )
        )
        rows = sorted(rows, key=lambda r: r["first_at"])
        return [due_of(r) for r in rows]

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
        state = events.settled_state(delivered, retry_at)
        await self._execute(
            "UPDATE webhook_deliveries SET state = $1, next_at = $2, last_status = $3, "
            "last_error = $4, delivered_at = $5 "
            "WHERE event_id = $6 AND endpoint = $7 AND attempts = $8 AND state = 'pending'",
            state,
            float(retry_at or now),
            status,
            error,
            float(now) if delivered else None,
            due.event_id,
            due.endpoint,
            due.attempts,
        )

    async def deliveries(
        self, state: str | None, after: tuple[float, str, str] | None, limit: int
    ) -> list[Delivery]:
        first, event_id, endpoint = after or (float("-inf"), "", "")
        rows = await self._fetch(
            f"SELECT {DELIVERY_COLS} FROM webhook_deliveries d "
            "JOIN webhook_events e ON e.id = d.event_id "
            "WHERE ($1::text IS NULL OR d.state = $1) "
            "AND (d.first_at, d.event_id, d.endpoint) > ($2::float8, $3::text, $4::text) "
            "ORDER BY d.first_at, d.event_id, d.endpoint LIMIT $5",
            state,
            float(first),
            event_id,
            endpoint,
            limit,
        )
        return [delivery_of(r) for r in rows]

    async def retry_delivery(self, event_id: str, endpoint: str, now: float) -> bool:
        status = await self._execute(
            "UPDATE webhook_deliveries SET state = 'pending', next_at = $1 "
            "WHERE event_id = $2 AND endpoint = $3 AND state = 'failed'",
            float(now),
            event_id,
            endpoint,
        )
        return rowcount(status) > 0

    async def prune_events(
        self, before: float, limit: int, *, fanned: bool, published: bool
    ) -> int:
        n = await self._run(lambda c: c.fetchval(PRUNE, float(before), limit, fanned, published))
        return int(n)

    # -- onto the change log's stream (log/nats/relay.py) ------------------------------------

    async def unpublished_events(self, limit: int) -> list[Event]:
        rows = await self._run(
            lambda c: c.fetch(
                "SELECT id, type, at, data FROM webhook_events WHERE ready AND NOT published "
                "ORDER BY at LIMIT $1",
                limit,
            ),
            tx=False,
        )
        return [Event(r["id"], r["type"], r["at"], r["data"]) for r in rows]

    async def mark_published(self, event_ids: Sequence[str]) -> None:
        if event_ids:
            await self._execute(
                "UPDATE webhook_events SET published = true WHERE id = ANY($1::text[])",
                list(event_ids),
            )
