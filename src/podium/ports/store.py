"""The score store ports: the record (invariant 1 of docs/architecture.md), by scope.

One store adapter implements all of them (``ScoreStore``), and each consumer takes only the
ports it uses: the updaters ``Players`` for bans, the outbox log ``Outbox``, the life of
windows ``Windows``. Every write named here is one transaction; which rows it touches is
said where it is more than one player's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from podium.domain.boards import BoardSpec
from podium.domain.models import (
    ApiKey,
    Change,
    FinalEntry,
    Flagged,
    FrozenWindow,
    MatchQuery,
    Profile,
    ProfileChange,
    RecordOutcome,
    ResultRecord,
    Standing,
    Target,
)
from podium.domain.rejection import Recount
from podium.domain.retention import ResultKey, StoredResult
from podium.domain.windows import Window
from podium.ports.cohorts import CohortStore
from podium.ports.erasure import PlayerData
from podium.ports.status import Beats
from podium.ports.tournaments import TournamentStore
from podium.ports.webhooks import WebhookEvents

# A stored tally as a rebuild reads it (``Windows.tally_rows``): player_id, total,
# reached_at, version, entry metadata.
TallyRow = tuple[str, int, int, int, str | None]


class RecordHandle:
    """What a store's ``open_match`` saw of one player, for that same store's ``record`` to
    write from: opaque to everyone but the store that made it, but for ``check``."""

    __slots__ = ()

    def check(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
    ) -> None:
        """Raise what ``record`` of ``result`` would raise if nothing seen had changed (a
        total a board cannot encode, a frozen window, the cap), writing nothing: pure, no
        round trip. So a match is checked whole before its first write; ``record`` checks
        again, which is what makes it exact under concurrency."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class MatchFacts:
    """What a match is, fixed by its first record: every later submission of the match id
    must say the same (``Conflict`` otherwise), whichever players it lists."""

    mode: str
    ended_at: int
    duration_s: int


@dataclass(frozen=True, slots=True)
class MatchRead:
    """The first step of recording a match (``Results.open_match``): who owns the match,
    and what the checks before its writes need."""

    owner: str  # the key id that owns the match (the caller's, unless another had it)
    existing: dict[str, ResultRecord]  # the results already stored for this match
    recent_points: dict[str, list[int]]  # each player's last results in the mode, newest first
    # (count, oldest recorded_at) of each player's results in the mode since ``since``;
    # players with none are left out
    counts: dict[str, tuple[int, float]]
    handles: dict[str, RecordHandle] = field(default_factory=dict)
    # Whether this very call made the claim (then ``release_match`` may undo it), and the
    # facts the claim holds (None: a claim that fixed none).
    claimed: bool = False
    facts: MatchFacts | None = None
    # When the owner's claim was made: a claim with no result that is older than the lease
    # (``server.claim_lease_s``) is one whose request died before its writes (a crash).
    claimed_at: float | None = None

    def handle(self, player_id: str) -> RecordHandle | None:
        """The handle to pass to ``record`` for this player's part."""
        return self.handles.get(player_id)


class Lifetime(Protocol):
    async def migrate(self) -> None: ...
    async def ping(self) -> None: ...
    async def close(self) -> None: ...


class Credentials(Protocol):
    """Keys, stored hashed; global (the one place every API process asks)."""

    async def add_key(self, key: ApiKey) -> None: ...
    async def key_by_hash(self, key_hash: str) -> ApiKey | None:
        """The key with this hash, revoked or not (the caller refuses a revoked one)."""
        ...

    async def list_keys(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        ...

    async def revoke_key(self, key_id: str, now: float) -> ApiKey | None:
        """Mark the key revoked at ``now`` (a second revocation keeps the first time); the
        key as it is now, or None for an unknown id."""
        ...


class Results(Protocol):
    """Results and the totals they fold into. Each ``record`` is one transaction on one
    player (the store is split by player)."""

    async def open_match(self, query: MatchQuery) -> MatchRead:
        """Record that ``query.key_id`` owns ``query.match_id`` unless someone already does
        (that claim is its own transaction, committed whatever follows; with ``ended_at`` and
        ``duration_s`` it fixes the match's facts, with ``mode``), and read what the checks
        need: who owns the match and its facts, the results stored for the match, the last
        ``recent`` points of each player in ``mode`` (by endedAt), and unless ``since`` is
        None, the count of their results in ``mode`` since then. With ``targets``, also a
        handle per player for ``record``, where the store has one (a store that writes a
        record from what this read saw saves the record its own read)."""
        ...

    async def release_match(self, match_id: str, key_id: str, claimed_at: float) -> bool:
        """Undo a claim that an ``open_match`` at ``claimed_at`` made for ``key_id``, if the
        match has no results: a request refused after its claim claims nothing, and a claim
        whose request died before its writes is freed. True if it was released; a retry, or a
        claim someone has recorded under since, changes nothing. A record racing the release
        either commits first (and the claim stays) or claims the match again in its own
        transaction, where it is refused if another key has claimed it meanwhile."""
        ...

    async def record(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
        handle: RecordHandle | None = None,
    ) -> RecordOutcome:
        """In one transaction: store the result (and the claim of its match for its key,
        unless the match has one; ``Forbidden`` if another key's claim holds the match, as
        after a release raced this record), fold it into each target's tally, and write one
        outbox row per tally that changed. A retry with the same content returns the
        stored totals and writes nothing; other content raises ``Conflict``; a player over
        ``hourly_cap`` results in the last hour raises ``RateLimited``.

        ``handle``: from an ``open_match`` of the same targets, ``now - HOUR`` and match.
        The outcome is the same with or without it; ``reread`` says that the state it saw
        had changed by the time the write's locks were granted, so the record read again."""
        ...

    async def results_of(self, match_id: str, player_ids: Sequence[str]) -> dict[str, ResultRecord]:
        """The results stored for these players in this match (claims nothing)."""
        ...

    async def totals(self, player_id: str, targets: Sequence[Target]) -> dict[str, int]:
        """Current totals of one player, by board name, for these board windows."""
        ...

    async def player_standings(self, player_id: str) -> list[Standing]: ...

    async def flagged(self, modes: Sequence[str] | None, limit: int) -> list[Flagged]:
        # The latest flagged results no moderator has accepted (``Moderation.accept_flag``).
        """The latest flagged results (in these modes), newest first, for review."""
        ...


class Outbox(Protocol):
    """The outbox rows every record writes in its own transaction, read as a change log."""

    async def claim_changes(
        self, limit: int, lease_s: float, now: float
    ) -> list[Change | ProfileChange]:
        """Claim up to ``limit`` unsent outbox rows that nobody else holds, in row id order;
        each change's ``handle`` is its row id (an ``int``). Claims by row, never by a
        high-water mark: ids are not commit order."""
        ...

    async def ack_changes(self, ids: Sequence[int]) -> None: ...

    async def lease_changes(self, ids: Sequence[int], until: float) -> None:
        """Set the lease of these claimed rows to end at ``until``: later to keep a batch
        still being worked on (in progress), or now to hand it back for redelivery at once
        (a negative ack). Rows already acked are left alone."""
        ...

    async def requeue_player(self, player_id: str, now: float) -> int:
        """Write fresh outbox rows for every tally of a player (after an unban)."""
        ...

    async def requeue_players(self, player_ids: Sequence[str], now: float) -> int:
        """``requeue_player`` for many players in one transaction (a replay of the outbox by
        time, ``log/outbox.py``); how many rows it wrote. Callers keep a batch small (a few
        hundred players): each player's lock is held to its end."""
        ...

    async def players_since(self, since: float) -> list[str]:
        """The players with a result recorded at ``since`` or later, by id (what a replay
        of the outbox by time sends again, through ``requeue_player``)."""
        ...

    async def outbox_backlog(self, now: float) -> tuple[int, float]:
        """(rows not yet applied, age in seconds of the oldest)."""
        ...

    async def acked_through(self, ids: Sequence[int]) -> list[bool]:
        """For each claimed row id, whether no row at or below it is left in its database's
        outbox (acked rows are deleted): every row before it was applied."""
        ...


class Marking(Protocol):
    """One store database's outbox, as the role that writes board marks sees it
    (``domain/marks.py``, ``workers/marker.py``)."""

    async def write_marks(self, players: Sequence[str], source: str, at: float) -> None:
        """One mark row per player of ``domain.marks.mark_players`` (one per partition of
        the log), under the database's name ``source`` and the time ``at``, taken before
        this call: in one transaction, after every record committed before ``at``."""
        ...


class Players(Protocol):
    """Profiles, friends and bans."""

    async def set_profile(self, profile: Profile, now: float) -> int:
        """Save a profile and return its new version (one more than the last). In the same
        transaction: a profile change in the outbox, for the index's copy of names, and on
        a new country, the player's tallies on grouped boards moved to the new group, with
        outbox rows for both groups (``domain.plans.plan_group_moves``)."""
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

    async def ban(self, player_id: str, reason: str, now: float) -> None: ...
    async def unban(self, player_id: str) -> bool: ...
    async def banned(self, player_ids: Sequence[str]) -> set[str]: ...
    async def every_ban(self) -> set[str]:
        """Every banned player (bans are few): what a rebuild leaves out of all its pages,
        asked once rather than with each page's players."""
        ...


class Windows(Protocol):
    """The life of a window: its stored tallies, the freeze, the final standings."""

    def standings(
        self, board: str, window: str, batch: int = 5000
    ) -> AsyncIterator[list[Standing]]:
        """Every stored tally of one board window, in batches (for rebuilds)."""
        ...

    def tally_rows(
        self, board: str, window: str, batch: int = 10_000
    ) -> AsyncIterator[list[TallyRow]]:
        """``standings`` as plain rows, ``(player_id, total, reached_at, version,
        metadata)``, in pages by player id: what a rebuild reads, a tuple a tally rather
        than two objects (a million of them at an embedded start)."""
        ...

    async def tally_count(self, board: str, window: str) -> int:
        """How many tallies the board window holds (a rebuild's progress: its total)."""
        ...

    async def tallied(self, board: str, window: str, player_ids: Sequence[str]) -> set[str]:
        """Which of these players have a stored tally in this board window (what the
        reconciler asks of the index's members)."""
        ...

    async def windows(self, board: str) -> list[str]:
        """The window ids of a board that have any tally."""
        ...

    async def store_time(self) -> float:
        """The store's own clock (its database server's; the one machine's when embedded):
        the one time every process of a fleet reads alike, whatever its own clock says. The
        freezer decides which windows are due by it, so that a worker whose clock runs
        ahead cannot cut a window's grace for late results short."""
        ...

    async def freeze(self, board: BoardSpec, window: Window, keep: int, now: float) -> bool:
        """Freeze one window: results stop changing it, and its first ``keep`` places go
        into the final standings (``domain.plans.plan_freeze``), without the players banned
        at that moment, whom it notes (``left_out``). True if this call froze it, False if
        it was frozen already: exactly once, whoever calls and however often."""
        ...

    async def left_out(self, board: str, window: str) -> set[str]:
        """The players a window's freeze left out of its standings (banned when it froze;
        none for a window not frozen): the archive, written again from the tallies, leaves
        out the same, whoever is banned since."""
        ...

    async def frozen(self, board: str) -> dict[str, FrozenWindow]:
        """The frozen windows of a board, by window id."""
        ...

    async def final_page(self, board: str, window: str, first: int, last: int) -> list[FinalEntry]:
        """Final standings at positions ``first..last`` (1-based, inclusive)."""
        ...

    async def final_entry(self, board: str, window: str, player_id: str) -> FinalEntry | None: ...
    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None: ...


class Retention(Protocol):
    """Results leaving the store once past ``[store] keep_results_days`` (the pruner,
    ``workers/pruner.py``). Tallies, final standings and match claims stay: only the
    result rows go, a short transaction per batch. On a store split by player, every
    database is read and deleted from, each in its own statements; a result found on two
    (a bucket being moved) is one key, which the day file holds once."""

    async def oldest_result(self) -> int | None:
        """The smallest ``ended_at`` of any stored result, or None when there is none."""
        ...

    async def results_ended(
        self, start: int, end: int, after: ResultKey | None, limit: int
    ) -> list[StoredResult]:
        """Up to ``limit`` stored results with ``start <= ended_at < end``, every column, in
        (ended_at, player_id, match_id) order, from the first after ``after``."""
        ...

    async def delete_results(self, keys: Sequence[tuple[str, str]]) -> int:
        """Delete these results, by (player_id, match_id), in one short transaction that
        takes no lock a record waits on; how many were there. A key not stored is skipped."""
        ...


@dataclass(frozen=True, slots=True)
class PlayerResult:
    """One of a player's stored results, as the admin's console shows it."""

    match_id: str
    mode: str
    points: int
    ended_at: int
    duration_s: int
    recorded_at: float
    flag: str | None  # why it was flagged, or None
    metadata: str | None  # the canonical JSON object the game server sent, or None
    accepted_at: float | None = None  # when a moderator accepted its flag
    rejected_at: float | None = None  # when a moderator rejected it: it no longer counts


@dataclass(frozen=True, slots=True)
class Rejected:
    """A flagged result rejected: when (the first time, for a second reject), its points,
    and the tallies recounted (none on a second reject: nothing changed then)."""

    rejected_at: float
    points: int
    recounts: list[Recount] = field(default_factory=list)
    applied: bool = True  # False: a preview, nothing written (``rejected_at`` is its time)


@dataclass(frozen=True, slots=True)
class BanRecord:
    reason: str
    banned_at: float


class Moderation(Protocol):
    """The admin's reads about players: who is called what, what they played, why they
    are banned. Reads only; the writes are ``Players``'."""

    async def find_players(self, text: str, limit: int) -> list[Profile]:
        """Profiles whose id starts with ``text`` or whose name contains it, ignoring case
        (ASCII), ordered by player id; at most ``limit``."""
        ...

    async def recent_results(self, player_id: str, limit: int) -> list[PlayerResult]:
        """The player's latest results (newest recorded first), flagged or not."""
        ...

    async def ban_of(self, player_id: str) -> BanRecord | None: ...

    async def accept_flag(self, player_id: str, match_id: str, now: float) -> float | None:
        """Accept a flagged result: it keeps counting and leaves ``flagged``'s list. When it
        was accepted (``now``, or the first time for one accepted already); None when there
        is no such result, or it was not flagged."""
        ...

    async def reject_flag(
        self,
        player_id: str,
        match_id: str,
        now: float,
        specs: Sequence[BoardSpec],
        preview: bool = False,
    ) -> Rejected:
        """Reject a flagged result, in one transaction: it is marked rejected (kept, for the
        record; out of ``flagged``'s list) and every open tally it counted in on these
        boards is recounted without it (``domain/rejection.py``), each recount an outbox
        row marked ``replaces`` (a removal where nothing else counts). Again is the first
        answer and changes nothing. ``NotFound`` for no such result, ``Conflict`` for one
        never flagged or already accepted; a rejected one refuses ``accept_flag`` (``Conflict``).
        With ``preview``, the same checks and recounts, and nothing written (``applied`` is
        False then, unless it was rejected already)."""
        ...


class ScoreStore(
    Lifetime,
    PlayerData,
    Moderation,
    Credentials,
    Results,
    Outbox,
    Players,
    Windows,
    Retention,
    Beats,
    WebhookEvents,
    TournamentStore,
    CohortStore,
    Protocol,
):
    """The whole record, as ``bootstrap`` builds it: one adapter holding every port."""
