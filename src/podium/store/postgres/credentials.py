"""Keys on Postgres: stored hashed, modes as a text array."""

from __future__ import annotations

from podium.domain.models import ApiKey
from podium.store.postgres.pool import Database


class Credentials(Database):
    async def add_key(self, key: ApiKey) -> None:
        await self._execute(
            "INSERT INTO api_keys VALUES ($1, $2, $3, $4, $5, $6)",
            key.id,
            key.name,
            key.key_hash,
            list(key.modes),
            key.admin,
            float(key.created_at),
        )

    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        rows = await self._fetch(
            "SELECT id, name, key_hash, modes, admin, created_at FROM api_keys WHERE key_hash = $1",
            key_hash,
        )
        if not rows:
            return None
        r = rows[0]
        return ApiKey(
            r["id"], r["name"], r["key_hash"], tuple(r["modes"]), r["admin"], r["created_at"]
        )
