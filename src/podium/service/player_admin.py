"""The admin's calls on players: profiles (names, avatars, countries), friends, bans.

A ban spans the store and the index, in an order that leaves no gap: the store first (the
updaters check it before every write), then the index, whose ban set refuses a change still
in flight; an unban, the other way round. Either is recorded, or not, by the store's step:
what comes after it and fails is finished by the reconciler, and the answer says so.
Knows the ports, never an adapter.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from podium.config.settings import Settings
from podium.domain.models import Profile
from podium.domain.validation import (
    avatar_problem,
    country_problem,
    friends_problem,
    id_problem,
    name_problem,
)
from podium.errors import Erased, IndexUnavailable, InvalidInput, NotFound, Unavailable
from podium.ports import BoardKey, Clock, Outbox, Players, ProfileCopy, RankIndex, Results
from podium.ports.erasure import PlayerData
from podium.service.boards import Changed
from podium.service.profiles import ProfileCache

log = logging.getLogger("podium.players")


class PlayerStore(Players, Results, Outbox, PlayerData, Protocol):
    """What the player calls touch in the store: profiles, friends and bans; the windows a
    player has a tally on (``Results``); the totals sent again after an unban (``Outbox``);
    whom it keeps as erased (``PlayerData``)."""


def _check_player(player_id: str) -> None:
    if why := id_problem("playerId", player_id):
        raise InvalidInput(why)


class PlayerAdmin:
    def __init__(
        self,
        settings: Settings,
        store: PlayerStore,
        index: RankIndex,
        copy: ProfileCopy,
        clock: Clock,
        profiles: ProfileCache,
        changed: Changed,
    ) -> None:
        self.settings = settings
        self.store = store
        self.index = index
        self.copy = copy
        self.clock = clock
        self.profiles = profiles  # this process's names, forgotten on a change
        self.changed = changed  # this process's pages, cleared on a ban

    async def set_profile(self, profile: Profile, fields: set[str] | None = None) -> None:
        """Save a profile; with ``fields``, only those change and the rest are kept."""
        if profile.country is not None and (why := country_problem(profile.country)):
            raise InvalidInput(why)
        if profile.name is not None and (why := name_problem("name", profile.name)):
            raise InvalidInput(why)
        if profile.avatar is not None and (why := avatar_problem(profile.avatar)):
            raise InvalidInput(f"avatar: {why}")
        if fields is not None:
            old = (await self.store.profiles([profile.player_id])).get(profile.player_id)
            if old is not None:
                keep = {
                    f: getattr(old, f) for f in ("name", "avatar", "country") if f not in fields
                }
                profile = replace(profile, **keep)
        _check_player(profile.player_id)
        await self._not_erased(profile.player_id)
        version = await self.store.set_profile(profile, self.clock.now())
        self.profiles.forget(profile.player_id)
        # The change is in the outbox, and the updater will copy it into the index; copying
        # it here as well shows the new name at once to every reader of the index's copy (all
        # of them, while the copy is complete). If this fails, the outbox still brings it.
        try:
            await self.copy.write_profiles([(profile, version)])
        except IndexUnavailable:
            log.warning("index unavailable: a profile left to the updater")

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None:
        _check_player(player_id)
        if why := friends_problem(len(friends)):
            raise InvalidInput(why)
        for f in friends:
            _check_player(f)
        await self._not_erased(player_id)
        # An erased player is left out of another's list: their id is kept nowhere.
        wanted = set(friends) - {player_id}
        wanted -= await self.store.erased(sorted(wanted))
        await self.store.set_friends(player_id, sorted(wanted))

    async def _not_erased(self, player_id: str) -> None:
        """A profile or a friends list of an erased player is refused, as their results
        are (docs/architecture.md §9)."""
        if await self.store.erased([player_id]):
            raise Erased("this player was erased: nothing more is kept of them")

    async def _ban_keys(self, player_id: str) -> list[BoardKey]:
        """Every board window the player has a tally on, plus every board's current window
        (on a grouped board only the group windows exist: those come with the tallies)."""
        keys = {BoardKey(s.board, s.window) for s in await self.store.player_standings(player_id)}
        now = int(self.clock.now())
        for spec in self.settings.boards:
            w = spec.rule.window_at(now)
            if w is not None and spec.group_by is None:
                keys.add(BoardKey(spec.name, w.id))
        return sorted(keys, key=lambda k: (k.board, k.window))

    async def ban(self, player_id: str, reason: str) -> bool:
        """Store first (the updaters check it before every write), then the index, where
        the ban set refuses any change still in flight. True once the boards have dropped
        the player; False when the ban is recorded but the index (or the read of where the
        player is) could not be reached: an outage then cannot undo a committed ban, so
        this is no 503 ("nothing was recorded"). The boards drop the player once the index
        is back: the reconciler removes every player banned in the store that it finds on a
        board, and the updaters refuse them meanwhile (they check the store's bans before
        every batch). A retry of the ban is safe, and does it at once."""
        _check_player(player_id)
        await self.store.ban(player_id, reason, self.clock.now())
        try:
            await self.index.ban(await self._ban_keys(player_id), player_id)
        except Unavailable:
            log.warning("a ban recorded; the index is unavailable, so the boards drop "
                        "the player once it is back", exc_info=True)  # fmt: skip
            return False
        finally:
            # On a split board, gone from this process's reads at once, not at the
            # aggregator's next cycle: its snapshot from before still has them in its top.
            self.changed(self.clock.now())
        return True

    async def unban(self, player_id: str) -> bool:
        """The index's ban lifted first, then the store's: an index that cannot be reached
        leaves the ban as it was (503, nothing recorded, a retry is safe), where the other
        order would leave the index refusing a player the store no longer bans, with no
        ban left to retry. True once the totals are sent again; False when the unban is
        recorded but they could not be: the reconciler restores them (a player the store
        has and the index misses), as the updaters would have."""
        _check_player(player_id)
        if not await self.store.banned([player_id]):
            raise NotFound(f"player {player_id} is not banned")
        await self.index.unban(await self._ban_keys(player_id), player_id)
        # Lifted in the index while the store still bans: the updaters keep refusing the
        # player until the store's unban commits (they check it before every batch).
        if not await self.store.unban(player_id):
            raise NotFound(f"player {player_id} is not banned")  # unbanned meanwhile
        try:
            # The totals never left the store; send them again and the updaters restore them.
            await self.store.requeue_player(player_id, self.clock.now())
        except Unavailable:
            log.warning("an unban recorded; the player's totals are left to the reconciler",
                        exc_info=True)  # fmt: skip
            return False
        return True
