"""Reward and moderation events on SQLite: fanned out into deliveries, claimed, settled,
listed (``ports/webhooks.py``). The one writer thread makes a claim exclusive: two
processes on one file take turns at the write lock, and a claim moves ``next_at`` past now
before it commits, so the other never sees it due."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from podium.domain import events
from podium.domain.models import FinalEntry
from podium.domain.tournaments import tournament_of
from podium.ports.webhooks import Delivery, Due, Event
from podium.store.common import DELIVERY_COLS, delivery_of, due_of
from podium.store.sqlite.db import Database


def write_window_frozen(
    c: sqlite3.Connection,
    board: str,
    window: str,
    now: float,
    players: int,
    final: Sequence[FinalEntry],
) -> None:
    """Inside the freeze's transaction: its event (a window.frozen, or a tournament run's
    tournament.ended with the tournament's row as it is now), held until the archive's
    sha256 is in."""
    event_type, event_id = events.freeze_event(board, window)
    info = None
    if event_type == events.TOURNAMENT_ENDED:
        row = c.execute(
            "SELECT title, category, metadata FROM tournaments WHERE id = ?",
            (tournament_of(board),),
        ).fetchone()
        if row is not None:
            info = events.TournamentInfo(row["title"], row["category"], row["metadata"])
    data = events.freeze_data(board, window, now, players, final, info)
    c.execute(
        "INSERT OR IGNORE INTO webhook_events (id, type, at, data, ready) VALUES (?, ?, ?, ?, 0)",
        (event_id, event_type, now, events.encode(data)),
    )


def release_window_frozen(c: sqlite3.Connection, board: str, window: str, checksum: str) -> None:
    """Inside ``set_archive``'s transaction: the event completed with the sha256, and ready."""
    _, event_id = events.freeze_event(board, window)
    row = c.execute("SELECT data FROM webhook_events WHERE id = ?", (event_id,)).fetchone()
    if row is not None:
        c.execute(
            "UPDATE webhook_events SET data = ?, ready = 1 WHERE id = ?",
            (events.with_archive(row["data"], checksum), event_id),
        )


class Webhooks(Database):
    async def fan_out(
        self, routes: Mapping[str, Sequence[str]], since: float, now: float, limit: int
    ) -> int:
        def run(c: sqlite3.Connection) -> int:
            rows = c.execute(
                "SELECT id, type, at FROM webhook_events WHERE fanned = 0 AND ready = 1 "
                "ORDER BY at LIMIT ?",
                (limit,),
            ).fetchall()
            c.executemany(
                "INSERT OR IGNORE INTO webhook_deliveries (event_id, endpoint, first_at, next_at) "
                "VALUES (?, ?, ?, ?)",
                [
                    (r["id"], url, now, now)
                    for r in rows
                    if r["at"] >= since
                    for url in routes.get(r["type"], ())
                ],
            )
            c.executemany(
                "UPDATE webhook_events SET fanned = 1 WHERE id = ?", [(r["id"],) for r in rows]
            )
            return len(rows)

        return await self._write(run)

    async def claim_deliveries(
        self,
        now: float,
        lease_until: float,
        limit: int,
        *,
        endpoint: str | None = None,
        other_than: Sequence[str] = (),
    ) -> list[Due]:
        others = list(other_than)

        def run(c: sqlite3.Connection) -> list[Due]:
            rows = c.execute(
                "SELECT d.event_id, d.endpoint, e.type, e.at, e.data, d.attempts + 1 AS attempts, "
                "d.first_at FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id "
                "WHERE d.state = 'pending' AND d.next_at <= ? AND (? IS NULL OR d.endpoint = ?) "
                f"AND d.endpoint NOT IN ({', '.join('?' * len(others))}) "
                "ORDER BY d.next_at LIMIT ?",
                (now, endpoint, endpoint, *others, limit),
            ).fetchall()
            c.executemany(
                "UPDATE webhook_deliveries SET attempts = ?, next_at = ? "
                "WHERE event_id = ? AND endpoint = ?",
                [(r["attempts"], lease_until, r["event_id"], r["endpoint"]) for r in rows],
            )
            return [due_of(r) for r in rows]

        return await self._write(run)

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
        await self._write(
            lambda c: c.execute(
                "UPDATE webhook_deliveries SET state = ?, next_at = ?, last_status = ?, "
                "last_error = ?, delivered_at = ? "
                "WHERE event_id = ? AND endpoint = ? AND attempts = ? AND state = 'pending'",
                (
                    state,
                    retry_at or now,
                    status,
                    error,
                    now if delivered else None,
                    due.event_id,
                    due.endpoint,
                    due.attempts,
                ),
            )
        )

    async def deliveries(
        self, state: str | None, after: tuple[float, str, str] | None, limit: int
    ) -> list[Delivery]:
        first, event_id, endpoint = after or (float("-inf"), "", "")
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT {DELIVERY_COLS} FROM webhook_deliveries d "
                "JOIN webhook_events e ON e.id = d.event_id "
                "WHERE (? IS NULL OR d.state = ?) "
                "AND (d.first_at, d.event_id, d.endpoint) > (?, ?, ?) "
                "ORDER BY d.first_at, d.event_id, d.endpoint LIMIT ?",
                (state, state, first, event_id, endpoint, limit),
            ).fetchall()
        )
        return [delivery_of(r) for r in rows]

    async def retry_delivery(self, event_id: str, endpoint: str, now: float) -> bool:
        return await self._write(
            lambda c: (
                c.execute(
                    "UPDATE webhook_deliveries SET state = 'pending', next_at = ? "
                    "WHERE event_id = ? AND endpoint = ? AND state = 'failed'",
                    (now, event_id, endpoint),
                ).rowcount
                > 0
            )
        )

    async def prune_events(
        self, before: float, limit: int, *, fanned: bool, published: bool
    ) -> int:
        def run(c: sqlite3.Connection) -> int:
            ids = [
                (r["id"],)
                for r in c.execute(
                    "SELECT id FROM webhook_events e WHERE at < ? AND (fanned = 1 OR NOT ?) "
                    "AND (published = 1 OR NOT ?) AND NOT EXISTS (SELECT 1 FROM "
                    "webhook_deliveries d WHERE d.event_id = e.id AND d.state = 'pending') "
                    "ORDER BY at LIMIT ?",
                    (before, fanned, published, limit),
                ).fetchall()
            ]
            c.executemany("DELETE FROM webhook_deliveries WHERE event_id = ?", ids)
            c.executemany("DELETE FROM webhook_events WHERE id = ?", ids)
            return len(ids)

        return await self._write(run)

    # -- onto the change log's stream (log/nats/relay.py) ------------------------------------

    async def unpublished_events(self, limit: int) -> list[Event]:
        rows = await self._read(
            lambda c: c.execute(
                "SELECT id, type, at, data FROM webhook_events WHERE ready = 1 AND published = 0 "
                "ORDER BY at LIMIT ?",
                (limit,),
            ).fetchall()
        )
        return [Event(r["id"], r["type"], r["at"], r["data"]) for r in rows]

    async def mark_published(self, event_ids: Sequence[str]) -> None:
        if event_ids:
            await self._write(
                lambda c: c.executemany(
                    "UPDATE webhook_events SET published = 1 WHERE id = ?",
                    [(i,) for i in event_ids],
                )
            )
