"""A player's data on SQLite (``ports/erasure.py``): the export's pages, the erasure's one
transaction, the erasure records and the hashes of erased ids. The SQL is shared with
Postgres (``store/erasure.py``)."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Sequence

from podium.domain.erasure import Erasure, Step, erased_digest, new_secret
from podium.ports.erasure import ExportRow
from podium.store.erasure import (
    ERASE,
    ERASURE_COLS,
    FREE,
    RENAMED,
    erasure_of,
    export_sql,
    keyed_rows,
)
from podium.store.sqlite.db import Database

log = logging.getLogger("podium.eraser")

WAL_CUT_S = 60.0  # an erasure's WAL cut is tried this long while readers keep it busy
WAL_CUT_PAUSE_S = 0.05  # between tries: the writes queued meanwhile go first


class PlayerData(Database):
    erasure_secret = ""  # as configured; '' : the key kept in the store (erasure_key)
    _erasure_key: str | None = None

    async def erasure_key(self) -> str:
        if self.erasure_secret:
            return self.erasure_secret
        if self._erasure_key is None:
            fresh = new_secret()

            def run(c: sqlite3.Connection) -> str:
                # The first one written is kept (migration 039): racing processes agree.
                c.execute("INSERT OR IGNORE INTO erasure_key (id, secret) VALUES (1, ?)", (fresh,))
                row = c.execute("SELECT secret FROM erasure_key WHERE id = 1").fetchone()
                return str(row["secret"])

            self._erasure_key = await self._write(run)
        return self._erasure_key

    async def erased_digests(self) -> set[str]:
        rows = await self._read(lambda c: c.execute("SELECT digest FROM erased").fetchall())
        return {r["digest"] for r in rows}

    async def export_page(
        self, player_id: str, section: str, after: str, limit: int
    ) -> list[tuple[str, ExportRow]]:
        sql = export_sql(section)
        rows = await self._read(
            lambda c: c.execute(sql, {"p": player_id, "after": after, "limit": limit}).fetchall()
        )
        return keyed_rows(rows)

    async def erase_rows(self, player_id: str, pseudonym: str) -> dict[str, int]:
        def run(c: sqlite3.Connection) -> dict[str, int]:
            counts: dict[str, int] = {}
            for kind, sql in ERASE:
                n = c.execute(sql, {"p": player_id, "q": pseudonym}).rowcount
                counts[kind] = counts.get(kind, 0) + max(n, 0)
            return counts

        return await self._write(run)

    async def erased(self, player_ids: Sequence[str]) -> set[str]:
        if not player_ids:
            return set()
        key = await self.erasure_key()
        by_digest = {erased_digest(key, p): p for p in player_ids}
        marks = ",".join("?" * len(by_digest))
        rows = await self._read(
            lambda c: c.execute(
                f"SELECT digest FROM erased WHERE digest IN ({marks})", list(by_digest)
            ).fetchall()
        )
        return {by_digest[r["digest"]] for r in rows}

    async def open_erasure(self, erasure: Erasure) -> Erasure:
        def run(c: sqlite3.Connection) -> Erasure:
            held = c.execute(
                f"SELECT {ERASURE_COLS} FROM erasures WHERE digest = ? "
                "ORDER BY requested_at LIMIT 1",
                (erasure.digest,),
            ).fetchone()
            if held is not None:
                return erasure_of(held)
            c.execute(
                f"INSERT INTO erasures ({ERASURE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    erasure.id,
                    erasure.digest,
                    erasure.player_id,
                    erasure.pseudonym,
                    erasure.step.value,
                    erasure.requested_at,
                    erasure.requested_by,
                    None,
                    json.dumps(erasure.counts),
                ),
            )
            c.execute(
                "INSERT OR IGNORE INTO erased (digest, erased_at) VALUES (?, ?)",
                (erasure.digest, erasure.requested_at),
            )
            return erasure

        return await self._write(run)

    async def erasure(self, erasure_id: str) -> Erasure | None:
        row = await self._read(
            lambda c: c.execute(
                f"SELECT {ERASURE_COLS} FROM erasures WHERE id = ?", (erasure_id,)
            ).fetchone()
        )
        return None if row is None else erasure_of(row)

    async def claim_erasures(
        self, owner: str, now: float, lease_s: float, limit: int, only: str = ""
    ) -> list[Erasure]:
        def run(c: sqlite3.Connection) -> list[Erasure]:
            # One write transaction: SQLite's one writer makes the read and the take atomic.
            rows = c.execute(
                f"UPDATE erasures SET held_by = :owner, held_until = :until WHERE id IN "
                f"(SELECT id FROM erasures WHERE {FREE} ORDER BY requested_at LIMIT :limit) "
                f"RETURNING {ERASURE_COLS}",
                {"owner": owner, "now": now, "until": now + lease_s, "limit": limit, "only": only},
            ).fetchall()
            return sorted((erasure_of(r) for r in rows), key=lambda e: e.requested_at)

        return await self._write(run)

    async def renew_erasure(self, erasure_id: str, owner: str, now: float, lease_s: float) -> bool:
        def run(c: sqlite3.Connection) -> bool:
            return (
                c.execute(
                    "UPDATE erasures SET held_until = ? "
                    "WHERE id = ? AND held_by = ? AND done_at IS NULL",
                    (now + lease_s, erasure_id, owner),
                ).rowcount
                == 1
            )

        return await self._write(run)

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

        def run(c: sqlite3.Connection) -> bool:
            n = c.execute(
                "UPDATE erasures SET step = ?, counts = ?, "
                "player_id = CASE WHEN ? THEN NULL ELSE player_id END, "
                "pseudonym = CASE WHEN ? THEN '' ELSE pseudonym END, "
                "done_at = CASE WHEN ? THEN ? ELSE done_at END, "
                "held_by = CASE WHEN ? THEN NULL ELSE held_by END, "
                "held_until = CASE WHEN ? THEN NULL ELSE ? END "
                "WHERE id = ? AND held_by = ? AND done_at IS NULL",
                (
                    step.value,
                    json.dumps(counts),
                    done,
                    done,
                    done,
                    now,
                    done,
                    done,
                    now + lease_s,
                    erasure_id,
                    owner,
                ),
            ).rowcount
            return n == 1

        held = await self._write(run)
        if done and held:
            # The record has just forgotten the id: the WAL's older page images still hold
            # it (and the player's deleted rows) until a checkpoint; secure_delete zeroed the
            # file's own copies (db.py).
            await self._cut_wal()
        return held

    async def _cut_wal(self) -> None:
        """The WAL cut, tried again while readers keep it busy: a cut that gave up once
        left the erased player's bytes in it until the next erasure's."""
        deadline = time.monotonic() + WAL_CUT_S
        while not await self.truncate_wal():
            if time.monotonic() >= deadline:
                log.warning(
                    "the WAL was not cut after an erasure: readers kept it busy for %.0f s; "
                    "the next erasure cuts it",
                    WAL_CUT_S,
                )
                return
            await asyncio.sleep(WAL_CUT_PAUSE_S)

    async def renamed_windows(self, pseudonym: str) -> list[tuple[str, str, str | None]]:
        rows = await self._read(lambda c: c.execute(RENAMED, {"q": pseudonym}).fetchall())
        return [(r["board"], r["window_id"], r["archive"]) for r in rows]
