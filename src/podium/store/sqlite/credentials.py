"""Keys on SQLite: stored hashed, modes as one comma-separated column."""

from __future__ import annotations

import sqlite3
from typing import Any

from podium.domain.models import ApiKey, Scope
from podium.store.sqlite.db import Database

COLS = "id, name, key_hash, modes, scope, created_at, revoked_at"


def _key(r: Any) -> ApiKey:
    modes = tuple(m for m in r["modes"].split(",") if m)
    return ApiKey(
        r["id"],
        r["name"],
        r["key_hash"],
        modes,
        Scope(r["scope"]),
        r["created_at"],
        r["revoked_at"],
    )


class Credentials(Database):
    async def add_key(self, key: ApiKey) -> None:
        row = (
            key.id,
            key.name,
            key.key_hash,
            ",".join(key.modes),
            int(key.scope is Scope.ADMIN),
            key.scope.value,
            key.created_at,
            key.revoked_at,
        )
        await self._write(
            lambda c: c.execute(
                "INSERT INTO api_keys (id, name, key_hash, modes, admin, scope, created_at, "
                "revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        )

    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        r = await self._read(
            lambda c: c.execute(
                f"SELECT {COLS} FROM api_keys WHERE key_hash = ?", (key_hash,)
            ).fetchone()
        )
        return None if r is None else _key(r)

    async def list_keys(self) -> list[ApiKey]:
        rows = await self._read(
            lambda c: c.execute(f"SELECT {COLS} FROM api_keys ORDER BY created_at, id").fetchall()
        )
        return [_key(r) for r in rows]

    async def revoke_key(self, key_id: str, now: float) -> ApiKey | None:
        def run(c: sqlite3.Connection) -> Any:
            # The first revocation's time stays: revoking again changes nothing.
            c.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now, key_id),
            )
            return c.execute(f"SELECT {COLS} FROM api_keys WHERE id = ?", (key_id,)).fetchone()

        r = await self._write(run)
        return None if r is None else _key(r)
