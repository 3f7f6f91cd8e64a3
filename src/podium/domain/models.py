"""Frozen value objects passed between the service, the ports and the API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from podium.domain.boards import BoardSpec, Tally


@dataclass(frozen=True, slots=True)
class Mode:
    name: str
    min_points: int = 0
    max_points: int = 1_000_000
    min_duration_s: int = 0
    max_duration_s: int = 86_400
    max_results_per_player_per_hour: int | None = None


@dataclass(frozen=True, slots=True)
class PlayerResult:
    player_id: str
    points: int
    # the entry's metadata: a JSON object as given (the service checks and canonicalizes it)
    metadata: object | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """One board window a result counts for; ``start`` is the window's first second."""

    board: str
    window: str
    start: int


@dataclass(frozen=True, slots=True)
class ResultRecord:
    """One player's part of one match: the unit of a store transaction."""

    player_id: str
    match_id: str
    key_id: str
    mode: str
    ended_at: int
    duration_s: int
    points: int
    flag: str | None = None  # why it deserves a look before prizes (never a rejection)
    # the entry metadata it carries, canonical JSON (domain/metadata.py), or None
    metadata: str | None = None

    def same_content(self, other: ResultRecord) -> bool:
        """Whether a retry carries the same result (the key id is checked separately)."""
        return (self.mode, self.ended_at, self.duration_s, self.points, self.metadata) == (
            other.mode,
            other.ended_at,
            other.duration_s,
            other.points,
            other.metadata,
        )


@dataclass(frozen=True, slots=True)
class MatchQuery:
    """The first step of recording a match (``Results.open_match``): the claim of
    ``match_id`` for ``key_id`` at ``now`` (with ``ended_at`` and ``duration_s``, the facts
    that fix the match, with ``mode``), and what the checks before its writes read of each
    player: their result in the match, their last ``recent`` points in ``mode``, unless
    ``since`` is None the count of their results in ``mode`` since then, and with
    ``targets``, the state a record of those targets starts from (the store's handle)."""

    match_id: str
    key_id: str
    now: float
    player_ids: Sequence[str]
    mode: str
    recent: int = 0
    since: float | None = None
    targets: Sequence[tuple[Target, BoardSpec]] = ()
    ended_at: int | None = None
    duration_s: int | None = None


PROFILE_CHANGE = ""  # the board column of an outbox row that carries a profile change


@dataclass(frozen=True, slots=True)
class Change:
    """A player's new absolute total on one board window: one outbox row or log message.

    ``handle`` is the log's own way to find the message again (an outbox row id, a
    JetStream delivery): opaque to everyone but the log that made it, and not part of the
    change's value."""

    board: str
    window: str
    player_id: str
    tally: Tally
    committed_at: float  # epoch seconds, for commit-to-board latency
    removed: bool = False  # the player left this board window (moved to another group)
    handle: object = field(default=None, compare=False)
    # A recount (a flagged result rejected): written by its version, so it may move against
    # the board's order; the version stays as a floor no older change lands under.
    replaces: bool = False


@dataclass(frozen=True, slots=True)
class ProfileChange:
    """A player's profile changed, to ``version``: the index keeps a copy of names for its
    reads, and the updater refreshes it from the store."""

    player_id: str
    version: int
    committed_at: float
    handle: object = field(default=None, compare=False)


Message = Change | ProfileChange  # what the change log carries


class Scope(StrEnum):
    """What a credential may do; the scopes do not overlap (invariant 5 of docs/architecture.md)."""

    GAME = "game"  # submit results, in its modes only
    ADMIN = "admin"  # players, friends, bans, freezes, review, keys; never results
    OPS = "ops"  # read the ops figures and /metrics; nothing else


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    name: str
    key_hash: str
    modes: tuple[str, ...] = ()
    scope: Scope = Scope.GAME
    created_at: float = 0.0
    revoked_at: float | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def may_submit(self, mode: str) -> bool:
        """Only a game-server key writes scores, and only in its modes."""
        return self.scope is Scope.GAME and not self.revoked and mode in self.modes


@dataclass(frozen=True, slots=True)
class Profile:
    player_id: str
    name: str | None = None
    avatar: str | None = None
    country: str | None = None  # ISO 3166-1 alpha-2; places the player on grouped boards


@dataclass(frozen=True, slots=True)
class Standing:
    """A stored total, as the store reports it (for rebuilds, bans and retries)."""

    board: str
    window: str
    player_id: str
    tally: Tally


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What the store did with one player's part of a match."""

    totals: dict[str, int] = field(default_factory=dict)  # board name -> total
    replayed: bool = False  # True when it was already recorded with the same content
    # True when the store was given an earlier read to write from (``prior``) and, that read
    # being out of date by then, read again instead
    reread: bool = False


@dataclass(frozen=True, slots=True)
class FinalEntry:
    """One line of a window's final standings. ``position`` is the place in board order
    (1, 2, 3, ...); ``rank`` is what is shown (equal to position, or shared)."""

    position: int
    rank: int
    player_id: str
    points: int
    reached_at: int


@dataclass(frozen=True, slots=True)
class FrozenWindow:
    board: str
    window: str
    frozen_at: float
    players: int
    checksum: str | None = None  # of the archive file, once written
    archive: str | None = None  # the archive file's name, relative to the archive dir


@dataclass(frozen=True, slots=True)
class Flagged:
    """A flagged result, for review."""

    player_id: str
    match_id: str
    mode: str
    points: int
    ended_at: int
    recorded_at: float
    reason: str
