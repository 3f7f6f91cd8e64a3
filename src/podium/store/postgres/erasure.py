"""A player's data on Postgres (``ports/erasure.py``): the export's pages, the erasure's one
transaction (under the player's record lock, so that no record of theirs interleaves), the
erasure records and the hashes of erased ids. The SQL is shared with SQLite
(``store/erasure.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from podium.domain.erasure import Erasure, Step, erased_digest, new_secret
from podium.ports.erasure import ExportRow
from podium.store.erasure import (
    ERASE,
    ERASURE_COLS,
    EXPORT,
    FREE,
    RENAMED,
    erasure_of,
    export_sql,
    keyed_rows,
    postgres,
)
from podium.store.postgres import locks
from podium.store.postgres.pool import Database, rowcount

# Which of the given digests are kept as erased: every match asks it (service/matches.py).
_ERASED = "SELECT digest FROM erased WHERE digest = ANY($1::text[])"

if TYPE_CHECKING:
    from podium.store.postgres.pool import Conn

# Each statement with the arguments it takes: the player, and the pseudonym where it names one.
_ERASE = tuple((kind, postgres(sql, ("p", "q")), ":q" in sql) for kind, sql in ERASE)
_RENAMED = postgres(RENAMED, ("q",))
# Each section's page, its key in byte order whatever the database's collation: the order
# SQLite's pages and the split store's merge of several databases' pages are in.
_EXPORT = {
    section: postgres(export_sql(section, collate="C"), ("p", "after", "limit"))
    for section in EXPORT
}
_CLAIM = postgres(
    f"UPDATE erasures SET held_by = :owner, held_until = :until WHERE id IN "
    f"(SELECT id FROM erasures WHERE {FREE} ORDER BY requested_at LIMIT :limit "
    f"FOR UPDATE SKIP LOCKED) RETURNING {ERASURE_COLS}",
    ("owner", "now", "until", "limit", "only"),
)


class PlayerData(Database):
    erasure_secret = ""  # as configured; '' : the key kept in the store (erasure_key)
    # Where that key is kept when not on this database: a split store's home (routing.py)
    erasure_keeper: PlayerData | None = None
    _erasure_key: str | None = None

    async def erasure_key(self) -> str:
        if self.erasure_secret:
            return self.erasure_secret
        if self._erasure_key is None:
            keeper = self.erasure_keeper
            self._erasure_key = await (
                keeper.erasure_key() if keeper is not None else self._kept_key()
            )
        return self._erasure_key

    async def _kept_key(self) -> str:
        """The generated key, written by the first process that asks (migration 039)."""

        async def run(c: Conn) -> str:
            await c.execute(
                "INSERT INTO erasure_key (id, secret) VALUES (1, $1) ON CONFLICT DO NOTHING",
                new_secret(),
            )
            kept: str = await c.fetchval("SELECT secret FROM erasure_key WHERE id = 1")
            return kept

        return await self._run(run)

    async def erased_digests(self) -> set[str]:
        return {r["digest"] for r in await self._fetch("SELECT digest FROM erased")}

    async def export_page(
        self, player_id: str, section: str, after: str, limit: int
    ) -> list[tuple[str, ExportRow]]:
        sql = _EXPORT[section]
        rows = await self._fetch(sql, player_id, after, limit)
        return keyed_rows(rows)

    async def erase_rows(self, player_id: str, pseudonym: str) -> dict[str, int]:
        async def run(c: Conn) -> dict[str, int]:
            await c.execute(
                "SELECT pg_advisory_xact_lock($1, $2)",
                locks.RECORD_NS,
                locks.player_key(player_id),
            )
            counts: dict[str, int] = {}
            for kind, sql, renames in _ERASE:
                args = (player_id, pseudonym) if renames else (player_id,)
                n = rowcount(await c.execute(sql, *args))
                counts[kind] = counts.get(kind, 0) + n
            return counts

        return await self._run(run)

    async def erased(self, player_ids: Sequence[str]) -> set[str]:
        if not player_ids:
            return set()
        key = await self.erasure_key()
        by_digest = {erased_digest(key, p): p for p in player_ids}
        rows = await self._fetch(_ERASED, list(by_digest))
        return {by_digest[r["digest"]] for r in rows}

    def warm_statements(self, reads: bool) -> list[tuple[str, tuple[object, ...]]]:
        # The check every match makes, on the reads' pool (``Database.warm_statements``).
        warm = super().warm_statements(reads)
        return [*warm, (_ERASED, ([],))] if reads else warm

    async def note_erased(self, digest: str, now: float) -> None:
        """The hash of an erased id kept on this database (each database of a split store
        keeps every one, so that each refuses the player by itself)."""
        await self._execute(
            "INSERT INTO erased (digest, erased_at) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            digest,
            now,
        )

    async def open_erasure(self, erasure: Erasure) -> Erasure:
        async def run(c: Conn) -> Erasure:
            await c.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", 35, erasure.digest)
            held = await c.fetchrow(
                f"SELECT {ERASURE_COLS} FROM erasures WHERE digest = $1 "
                "ORDER BY requested_at LIMIT 1",
                erasure.digest,
            )
            if held is not None:
                return erasure_of(held)
            await c.execute(
                f"INSERT INTO erasures ({ERASURE_COLS}) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8)",
                erasure.id,
                erasure.digest,
                erasure.player_id,
                erasure.pseudonym,
                erasure.step.value,
                erasure.requested_at,
                erasure.requested_by,
                json.dumps(erasure.counts),
            )
            await c.execute(
                "INSERT INTO erased (digest, erased_at) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                erasure.digest,
                erasure.requested_at,
            )
            return erasure

        return await self._run(run)

    async def erasure(self, erasure_id: str) -> Erasure | None:
        rows = await self._fetch(f"SELECT {ERASURE_COLS} FROM erasures WHERE id = $1", erasure_id)
        return erasure_of(rows[0]) if rows else None

    async def claim_erasures(
        self, owner: str, now: float, lease_s: float, limit: int, only: str = ""
    ) -> list[Erasure]:
        # SKIP LOCKED: a record another eraser is claiming this instant is left to it; one it
        # claimed and committed since this statement began is read again as it is now, and
        # no longer free (READ COMMITTED rechecks a locked row's new version).
        rows = await self._fetch(_CLAIM, owner, now, now + lease_s, limit, only)
        return sorted((erasure_of(r) for r in rows), key=lambda e: e.requested_at)

    async def renew_erasure(self, erasure_id: str, owner: str, now: float, lease_s: float) -> bool:
        status = await self._execute(
            "UPDATE erasures SET held_until = $1 "
            "WHERE id = $2 AND held_by = $3 AND done_at IS NULL",
            now + lease_s,
            erasure_id,
            owner,
        )
        return rowcount(status) == 1

    async def advance_erasure(
        self,
        erasure_id: str,
        owner: str,
        step: Step,
        counts: dict[str, int],
        now: float,
        lease_s: float,
    ) -> bool:
        done = step is Step.DONE
        status = await self._execute(
            "UPDATE erasures SET step = $1, counts = $2, "
            "player_id = CASE WHEN $3 THEN NULL ELSE player_id END, "
            "pseudonym = CASE WHEN $3 THEN '' ELSE pseudonym END, "
            "done_at = CASE WHEN $3 THEN $4 ELSE done_at END, "
            "held_by = CASE WHEN $3 THEN NULL ELSE held_by END, "
            "held_until = CASE WHEN $3 THEN NULL ELSE $4 + $7 END "
            "WHERE id = $5 AND held_by = $6 AND done_at IS NULL",
            step.value,
            json.dumps(counts),
            done,
            now,
            erasure_id,
            owner,
            lease_s,
        )
        return rowcount(status) == 1

    async def renamed_windows(self, pseudonym: str) -> list[tuple[str, str, str | None]]:
        rows = await self._fetch(_RENAMED, pseudonym)
        return [(r["board"], r["window_id"], r["archive"]) for r in rows]
