"""The admin's reads about players, for the console and anyone with an admin key: players
found by id or name, and one player's file (profile, ban, latest results with their flags
and metadata); and a flagged result accepted or rejected. Knows the port, never an adapter."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from podium.domain.boards import BoardSpec
from podium.domain.models import Profile
from podium.domain.validation import id_problem
from podium.errors import InvalidInput, NotFound
from podium.ports import BanRecord, Clock, Moderation, PlayerResult, Players, Rejected

SEARCH_MAX = 64  # characters of a search: an id is at most 64, a name at most 32
# No control character (a NUL is no text Postgres stores, and no name holds one).
SEARCH = r"^[^\x00-\x1f\x7f]+$"


@dataclass(frozen=True, slots=True)
class PlayerFile:
    profile: Profile
    ban: BanRecord | None
    results: list[PlayerResult]


class SearchStore(Moderation, Players, Protocol):
    """The admin's reads, and profiles by id."""


class PlayerSearch:
    def __init__(self, store: SearchStore, clock: Clock, boards: Sequence[BoardSpec] = ()) -> None:
        self.store = store
        self.clock = clock
        self.boards = list(boards)  # the configured boards, which a rejection recounts

    async def reject(self, player_id: str, match_id: str) -> Rejected:
        """A moderator rejects a flagged result: it stays in the player's file, marked, and
        no longer counts. The store recounts every open tally it counted in, in the same
        transaction, and sends each recount through the log, where the updaters write it
        by its version (a lower total too); the boards follow within the log's delay. A
        second reject answers the first's time and points and changes nothing."""
        for field, value in (("playerId", player_id), ("matchId", match_id)):
            if why := id_problem(field, value):
                raise InvalidInput(why)
        return await self.store.reject_flag(player_id, match_id, self.clock.now(), self.boards)

    async def preview_reject(self, player_id: str, match_id: str) -> Rejected:
        """What a reject would change now, each tally's total before and after, and nothing
        written: the console says it before the moderator confirms. Refused as the reject
        would be; a result rejected already answers its time and no change."""
        for field, value in (("playerId", player_id), ("matchId", match_id)):
            if why := id_problem(field, value):
                raise InvalidInput(why)
        now = self.clock.now()
        return await self.store.reject_flag(player_id, match_id, now, self.boards, preview=True)

    async def accept(self, player_id: str, match_id: str) -> float:
        """A moderator accepts a flagged result: it keeps counting (as it did) and leaves
        the review queue; when it was accepted (the first time, for a second accept)."""
        for field, value in (("playerId", player_id), ("matchId", match_id)):
            if why := id_problem(field, value):
                raise InvalidInput(why)
        at = await self.store.accept_flag(player_id, match_id, self.clock.now())
        if at is None:
            raise NotFound(f"player {player_id} has no flagged result in match {match_id}")
        return at

    async def find(self, text: str, limit: int) -> list[Profile]:
        # Searched as given: a space is a character of a name like any other.
        if not text:
            raise InvalidInput("q: give a player id (or its start) or part of a name")
        if not re.fullmatch(SEARCH, text):
            raise InvalidInput("q: no control character")
        if len(text) > SEARCH_MAX:
            raise InvalidInput(f"q: at most {SEARCH_MAX} characters")
        return await self.store.find_players(text, limit)

    async def player(self, player_id: str, results: int) -> PlayerFile:
        """A player the store knows anything of: a profile, a ban or a result. One it knows
        nothing of is a 404, so a typo is not shown as an empty file."""
        if why := id_problem("playerId", player_id):
            raise InvalidInput(why)
        profile = (await self.store.profiles([player_id])).get(player_id)
        ban = await self.store.ban_of(player_id)
        # One result at least, asked for even when none is wanted: it says the player exists.
        recent = await self.store.recent_results(player_id, max(results, 1))
        if profile is None and ban is None and not recent:
            raise NotFound(f"no player {player_id} is known: no profile, result or ban")
        return PlayerFile(profile or Profile(player_id), ban, recent[:results])
