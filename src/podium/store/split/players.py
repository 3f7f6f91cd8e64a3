"""Players, by the database each lives on, and keys, on the home database.

A profile, its friends and its ban are the player's, so each write is one transaction on
the player's database (a new country moves the player's grouped tallies there too, as on
one database). The whole copy of profiles (``all_profiles``) reads every database and merges
by player id. Keys are global: they live on the home database, which every API process
reaches (when it is down, a key verified in the last ``server.key_cache_s`` still works and
any other is answered 503).
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.boards import BoardSpec
from podium.domain.models import ApiKey, Profile
from podium.ports.store import BanRecord, PlayerResult, Rejected
from podium.store.common import ProfilesFromVersions
from podium.store.split.routing import Part


class Credentials(Part):
    async def add_key(self, key: ApiKey) -> None:
        await self.router.home.add_key(key)

    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        return await self.router.home.key_by_hash(key_hash)

    async def list_keys(self) -> list[ApiKey]:
        return await self.router.home.list_keys()

    async def revoke_key(self, key_id: str, now: float) -> ApiKey | None:
        return await self.router.home.revoke_key(key_id, now)


class Players(ProfilesFromVersions, Part):
    async def set_profile(self, profile: Profile, now: float) -> int:
        return await self.router.routed(profile.player_id, lambda db: db.set_profile(profile, now))

    async def versioned_profiles(self, player_ids: Sequence[str]) -> dict[str, tuple[Profile, int]]:
        parts = await self.router.by_player(player_ids, lambda db, ids: db.versioned_profiles(ids))
        return {p: v for part in parts for p, v in part.items()}

    async def all_profiles(self, after: str, limit: int) -> list[tuple[Profile, int]]:
        if limit <= 0:
            return []
        return await self.router.merged_pages(
            lambda db, start: db.all_profiles(start, limit),
            lambda row: row[0].player_id,
            limit,
            after,
        )

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None:
        await self.router.routed(player_id, lambda db: db.set_friends(player_id, friends))

    async def friends(self, player_id: str) -> list[str]:
        await self.router.ready()
        return await self.router.of(player_id).friends(player_id)

    async def ban(self, player_id: str, reason: str, now: float) -> None:
        await self.router.routed(player_id, lambda db: db.ban(player_id, reason, now))

    async def unban(self, player_id: str) -> bool:
        return await self.router.routed(player_id, lambda db: db.unban(player_id))

    async def banned(self, player_ids: Sequence[str]) -> set[str]:
        parts = await self.router.by_player(player_ids, lambda db, ids: db.banned(ids))
        return set().union(*parts)

    async def every_ban(self) -> set[str]:
        parts = await self.router.each(lambda db: db.every_ban())
        return set().union(*parts.values())

    # The admin's reads (ports.store.Moderation): a search asks every database, and keeps
    # each profile from the database that owns it (a bucket being moved is on two).

    async def find_players(self, text: str, limit: int) -> list[Profile]:
        parts = await self.router.each(lambda db: db.find_players(text, limit))
        found = {
            p.player_id: p
            for u, part in parts.items()
            for p in part
            if self.router.owns(u, p.player_id)
        }
        return [found[k] for k in sorted(found, key=lambda k: k.encode())][:limit]

    async def recent_results(self, player_id: str, limit: int) -> list[PlayerResult]:
        return await self.router.routed(player_id, lambda db: db.recent_results(player_id, limit))

    async def ban_of(self, player_id: str) -> BanRecord | None:
        return await self.router.routed(player_id, lambda db: db.ban_of(player_id))

    async def accept_flag(self, player_id: str, match_id: str, now: float) -> float | None:
        return await self.router.routed(
            player_id, lambda db: db.accept_flag(player_id, match_id, now)
        )

    async def reject_flag(
        self,
        player_id: str,
        match_id: str,
        now: float,
        specs: Sequence[BoardSpec],
        preview: bool = False,
    ) -> Rejected:
        return await self.router.routed(
            player_id, lambda db: db.reject_flag(player_id, match_id, now, specs, preview)
        )
