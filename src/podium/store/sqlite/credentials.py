"""Keys on SQLite: stored hashed, modes as one comma-separated column."""

from __future__ import annotations

from podium.domain.models import ApiKey
from podium.store.sqlite.db import Database


class Credentials(Database):
    async def add_key(self, key: ApiKey) -> None:
        row = (key.id, key.name, key.key_hash, ",".join(key.modes), int(key.admin), key.created_at)
        await self._write(
            lambda c: c.execute("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?)", row)
        )

    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        r = await self._read(
            lambda c: c.execute(
                "SELECT id, name, key_hash, modes, admin, created_at FROM api_keys "
                "WHERE key_hash = ?",
                (key_hash,),
            ).fetchone()
        )
        if r is None:
            return None
        modes = tuple(m for m in r["modes"].split(",") if m)
        return ApiKey(r["id"], r["name"], r["key_hash"], modes, bool(r["admin"]), r["created_at"])
