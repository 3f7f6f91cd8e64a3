"""The ports: what the service and the workers need from a backend, and nothing more.

Each port has several adapters (``store/``, ``index/``, ``log/``) held to one contract suite
(``tests/contract``). Only ``bootstrap.py`` picks an adapter. Every adapter translates its
driver's errors into ``podium.errors.Unavailable`` subclasses at the boundary.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import (
    ApiKey,
    Change,
    FinalEntry,
    Flagged,
    FrozenWindow,
    Profile,
    RecordOutcome,
    ResultRecord,
    Standing,
    Target,
)
from podium.domain.windows import Window


@dataclass(frozen=True, slots=True)
class Around:
    """A player's place on a board (``RankIndex.around``): their 0-based rank and score,
    the rows at ranks ``max(0, rank - neighbors)`` to ``rank + neighbors`` in board order,
    and, when the index's copy of profiles is complete, the profiles of those rows' players
    read in the same step (None otherwise)."""

    rank: int
    score: int
    rows: list[tuple[str, int]]
    profiles: dict[str, Profile] | None


class Clock(Protocol):
    def now(self) -> float: ...


class SystemClock:
    def now(self) -> float:
        return time.time()


@dataclass(frozen=True, slots=True)
class Seen:
    """One player's record state in a ``prior_results`` read: the country (which places the
    targets of grouped boards), and, by placed ``(board, window)``, the frozen windows and
    the tallies there are."""

    country: str | None
    frozen: frozenset[tuple[str, str]]
    tallies: dict[tuple[str, str], Tally]


@dataclass(frozen=True, slots=True)
class PriorResults:
    """What the service checks before it writes a match (``ScoreStore.prior_results``)."""

    existing: dict[str, ResultRecord]  # the results already stored for this match
    recent_points: dict[str, list[int]]  # each player's last results in the mode, newest first
    # (count, oldest recorded_at) of each player's results in the mode since ``since``;
    # players with none are left out
    counts: dict[str, tuple[int, float]]
    # What each player's record would read, as of the same read, for a store that writes
    # from it (``ScoreStore.record``); a store that always reads again leaves it empty.
    seen: dict[str, Seen] = field(default_factory=dict)


class ScoreStore(Protocol):
    """The record (DESIGN invariant 1). Every write is one transaction on one player."""

    async def migrate(self) -> None: ...
    async def close(self) -> None: ...
    async def ping(self) -> None: ...

    # credentials (stored hashed)
    async def add_key(self, key: ApiKey) -> None: ...
    async def key_by_hash(self, key_hash: str) -> ApiKey | None: ...

    # results
    async def claim_match(self, match_id: str, key_id: str, now: float) -> str:
        """Record that ``key_id`` owns ``match_id`` unless someone already does; return the
        owner's key id either way."""
        ...

    async def prior_results(
        self,
        match_id: str,
        player_ids: Sequence[str],
        mode: str,
        recent: int,
        since: float | None,
        targets: Sequence[tuple[Target, BoardSpec]] = (),
    ) -> PriorResults:
        """What the checks before a match's writes need, in one read: the results stored for
        ``match_id``, the last ``recent`` points of each player in ``mode`` (by endedAt), and,
        unless ``since`` is None, the count of their results in ``mode`` since then; with
        ``targets``, also what each player's ``record`` of them would read (``seen``)."""
        ...

    async def open_match(
        self,
        match_id: str,
        key_id: str,
        now: float,
        player_ids: Sequence[str],
        mode: str,
        recent: int,
        since: float | None,
        targets: Sequence[tuple[Target, BoardSpec]] = (),
    ) -> tuple[str, PriorResults]:
        """``claim_match`` and then ``prior_results``, in one round trip where the store
        can: the first step of recording a match. Returns (the owner's key id, the read)."""
        ...

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        prior: PriorResults | None = None,
    ) -> RecordOutcome:
        """In one transaction: store the result, fold it into each target's tally, and write
        one outbox row per tally that changed. A retry with the same content returns the
        stored totals and writes nothing; other content raises ``Conflict``; a player over
        ``hourly_cap`` results in the last hour raises ``RateLimited``.

        ``prior``: a ``prior_results`` read of the same targets, ``now - HOUR`` and match,
        which a store may write from instead of reading again, provided nothing in it has
        changed when the write's locks are granted; the outcome is the same either way."""
        ...

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        """Current totals of one player, by board name, for these board windows."""
        ...

    async def player_standings(self, player_id: str) -> list[Standing]: ...

    def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        """Every stored tally of one board window, in batches (for rebuilds)."""
        ...

    async def windows(self, board: str) -> list[str]:
        """The window ids of a board that have any tally."""
        ...

    # the outbox, read as a change log
    async def claim_changes(self, limit: int, lease_s: float, now: float) -> list[Change]:
        """Claim up to ``limit`` unsent outbox rows that nobody else holds. Claims by row,
        never by a high-water mark: ids are not commit order."""
        ...

    async def ack_changes(self, ids: Sequence[int]) -> None: ...
    async def requeue_player(self, player_id: str, now: float) -> int:
        """Write fresh outbox rows for every tally of a player (after an unban)."""
        ...

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        """(rows not yet applied, age in seconds of the oldest)."""
        ...

    # players
    async def set_profile(self, profile: Profile, now: float) -> int:
        """Save a profile and return its new version (one more than the last). In the same
        transaction: a profile change in the outbox, for the index's copy of names, and on
        a new country, the player's tallies on grouped boards moved to the new group, with
        outbox rows for both groups."""
        ...

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile]: ...

    async def versioned_profiles(self, player_ids: Sequence[str]) -> dict[str, tuple[Profile, int]]:
        """The profiles with their versions; players without one are left out."""
        ...

    async def all_profiles(self, after: str, limit: int) -> list[tuple[Profile, int]]:
        """Up to ``limit`` profiles with their versions, by player id, from the first id
        after ``after`` (a whole copy of them, a page at a time)."""
        ...

    async def set_friends(self, player_id: str, friends: Sequence[str]) -> None: ...
    async def friends(self, player_id: str) -> list[str]: ...

    # bans
    async def ban(self, player_id: str, reason: str, now: float) -> None: ...
    async def unban(self, player_id: str) -> bool: ...
    async def banned(self, player_ids: Sequence[str]) -> set[str]: ...

    # review
    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        """The latest flagged results (in these modes), newest first."""
        ...

    # the life of a window
    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        """Freeze one window: results stop changing it, and its first ``keep`` places go
        into the final standings. True if this call froze it, False if it was frozen
        already: exactly once, whoever calls and however often."""
        ...

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        """The frozen windows of a board, by window id."""
        ...

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        """Final standings at positions ``first..last`` (1-based, inclusive)."""
        ...

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None: ...
    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None: ...


@dataclass(frozen=True, slots=True)
class BoardKey:
    """One board window in the rank index."""

    board: str
    window: str


class RankIndex(Protocol):
    """The copy that answers ranks (DESIGN invariant 1: rebuildable from the store).

    Order (DESIGN invariant 4): on a descending board, higher score first, and on equal
    scores the member that sorts later by bytes first (as ``ZREVRANGE`` returns them); on an
    ascending board the reverse of both. Ranks here are 0-based; the API adds one.
    """

    async def ping(self) -> None: ...
    async def close(self) -> None: ...

    async def write(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        descending: bool,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
    ) -> int:
        """Apply absolute scores with ``GT`` (descending) or ``LT`` (ascending) semantics,
        or, when ``versions`` are given (one per entry), only where the version is newer
        than the one held; skip members banned on this key; return how many were written."""
        ...

    async def remove(
        self,
        key: BoardKey,
        members: Sequence[str],
        versions: Sequence[int],
        *,
        expire_at: int | None,
    ) -> int:
        """On a versioned board, take members off where the version is newer than the one
        held, and keep that version (a tombstone) so an older write cannot put them back."""
        ...

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        """Members at ranks ``start..stop`` inclusive, in board order."""
        ...

    async def rank(
        self, key: BoardKey, player_id: str, *, descending: bool
    ) -> tuple[int, int] | None:
        """(0-based rank, score) or None when the player is not on the board."""
        ...

    async def around(
        self, key: BoardKey, player_id: str, neighbors: int, *, descending: bool
    ) -> Around | None:
        """The player's rank and the rows around it, all read at one instant, so the
        player's own row is always among them; None when the player is not on the board.
        ``neighbors >= 0``."""
        ...

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[tuple[int, int] | None]:
        """(0-based rank, score) or None for each player, in the order asked, all read at
        one instant, in one round trip."""
        ...

    async def count(self, key: BoardKey) -> int: ...

    async def count_between(self, key: BoardKey, bounds: Sequence[int]) -> list[int]:
        """How many members have ``bounds[i] <= score < bounds[i+1]``, for each i, read at
        one instant (a histogram of the board)."""
        ...

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        """Remove the player from these boards and refuse later writes of them there."""
        ...

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None: ...

    async def replace(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
    ) -> None:
        """Swap a board for exactly these entries (and versions, for versioned boards) in
        one step (rebuild)."""
        ...

    # The index's copy of profiles (names, avatars, countries), so that a read shows names
    # without asking the store. The copy is complete only once one copier filled it from the
    # store (``begin_profiles_copy``, every profile written under a lease it keeps,
    # ``end_profiles_copy``); until then, and whenever the index lost it, reads ask the store
    # instead.

    async def write_profiles(self, entries: Sequence[tuple[Profile, int]]) -> int:
        """Keep each profile where its version is newer than the one held; return how many
        were kept."""
        ...

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile] | None:
        """The profiles held for these players (none for a player without one), or None
        while the copy is not complete."""
        ...

    async def begin_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        """Take the copy over to fill it, under a lease until ``now + lease_s``: from now on
        it is not complete. False, and nothing changes, while another copier's lease runs:
        that one is left to finish."""
        ...

    async def keep_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        """Extend this copier's lease; False once the copy is no longer this copier's (the
        index lost it, or another took it over after the lease ran out): stop filling."""
        ...

    async def end_profiles_copy(self, token: str) -> bool:
        """Mark the copy complete, if it is still this copier's (else False: it may lack
        profiles)."""
        ...

    async def profiles_complete(self) -> bool:
        """Complete, and marked so since the index last started: a Redis restored from a
        snapshot, or a replica that took over, may hold a copy without the latest changes,
        which counts as incomplete here (reads still use it until a copier filled it
        again)."""
        ...


class ChangeLog(Protocol):
    """Between the store's outbox and the board updaters. Delivery is at least once."""

    async def relay(self, limit: int) -> int:
        """Move committed outbox rows into the log; returns how many moved."""
        ...

    async def fetch(self, limit: int) -> list[Change]: ...
    async def ack(self, changes: Sequence[Change]) -> None: ...
    async def close(self) -> None: ...
