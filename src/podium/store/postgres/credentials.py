"""Keys on Postgres: stored hashed, modes as a text array."""

from __future__ import annotations

import asyncpg

from podium.domain.models import ApiKey, Scope
from podium.store.postgres.pool import Database

COLS = "id, name, key_hash, modes, scope, created_at, revoked_at"


def _key(r: asyncpg.Record) -> ApiKey:
    return ApiKey(
        r["id"],
        r["name"],
        r["key_hash"],
        tuple(r["modes"]),
        Scope(r["scope"]),
        r["created_at"],
        r["revoked_at"],
    )


class Credentials(Database):
    async def add_key(self, key: ApiKey) -> None:
        await self._execute(
            "INSERT INTO api_keys (id, name, key_hash, modes, admin, scope, created_at, revoked_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            key.id,
            key.name,
            key.key_hash,
            list(key.modes),
            key.scope is Scope.ADMIN,
            key.scope.value,
            float(key.created_at),
            key.revoked_at,
        )

    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        rows = await self._fetch(f"SELECT {COLS} FROM api_keys WHERE key_hash = $1", key_hash)
        return _key(rows[0]) if rows else None

    async def list_keys(self) -> list[ApiKey]:
        rows = await self._fetch(f"SELECT {COLS} FROM api_keys ORDER BY created_at, id")
        return [_key(r) for r in rows]

    async def revoke_key(self, key_id: str, now: float) -> ApiKey | None:
        # The first revocation's time stays: revoking again changes nothing.
        sql = (
            f"UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1 "
            f"RETURNING {COLS}"
        )
        rows = await self._run(lambda c: c.fetch(sql, key_id, float(now)), tx=False)
        return _key(rows[0]) if rows else None
