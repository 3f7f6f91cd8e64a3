"""What both store adapters share: the migrations on disk, the columns they read, the rows
as models (by column name: ``sqlite3.Row`` and ``asyncpg.Record`` both index by name), and
the handle a record writes from."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from podium.domain.boards import BoardSpec, Tally
from podium.domain.models import (
    PROFILE_CHANGE,
    Change,
    FinalEntry,
    Flagged,
    FrozenWindow,
    Profile,
    ProfileChange,
    ResultRecord,
    Standing,
    Target,
)
from podium.domain.recording import RecordState, place_in_groups, plan_record
from podium.domain.rejection import Counted
from podium.domain.retention import StoredResult
from podium.domain.tournaments import State
from podium.ports.status import Reachable
from podium.ports.store import PlayerResult, RecordHandle, TallyRow
from podium.ports.webhooks import Delivery, Due

RESULT_COLS = "player_id, match_id, key_id, mode, ended_at, duration_s, points, metadata"
TALLY_COLS = "board, window_id, player_id, total, reached_at, version, metadata"
ROW_COLS = "player_id, total, reached_at, version, metadata"  # a TallyRow, in its order
CHANGE_COLS = (
    "id, board, window_id, player_id, total, reached_at, version, committed_at, removed, metadata, "
    "replaces"
)
PROFILE_COLS = "player_id, name, avatar, country, version"
FINAL_COLS = "position, rank, player_id, points, reached_at"
FROZEN_COLS = "board, window_id, frozen_at, players, checksum, archive"
FLAGGED_COLS = "player_id, match_id, mode, points, ended_at, recorded_at, flag"
PLAYER_RESULT_COLS = (
    "match_id, mode, points, ended_at, duration_s, recorded_at, flag, metadata, accepted_at, "
    "rejected_at"
)


def like_escaped(text: str) -> str:
    """``text`` lowered, for a LIKE pattern with its wildcards escaped by ``\\`` (the
    queries say ``ESCAPE '\\'``): a search for ``50%`` finds only that."""
    return text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def player_result_of(r: Row) -> PlayerResult:
    return PlayerResult(
        r["match_id"],
        r["mode"],
        r["points"],
        r["ended_at"],
        r["duration_s"],
        r["recorded_at"],
        r["flag"],
        r["metadata"],
        r["accepted_at"],
        r["rejected_at"],
    )


class ProfilesFromVersions:
    """``Players.profiles`` for a store that has ``versioned_profiles``: the same read,
    without the versions."""

    async def versioned_profiles(self, player_ids: Sequence[str]) -> dict[str, tuple[Profile, int]]:
        raise NotImplementedError

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile]:
        found = await self.versioned_profiles(player_ids)
        return {p: profile for p, (profile, _) in found.items()}


class Row(Protocol):
    def __getitem__(self, key: str, /) -> Any: ...


def migrations(dialect: str) -> list[tuple[int, str]]:
    """``(version, sql)`` for every file in ``sql/<dialect>/``, in order."""
    folder = resources.files("podium.store") / "sql" / dialect
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.read_text()))
    return sorted(out)


def tournament_state_sql(state: State, now: str) -> str:
    """A condition that holds for every tournament ``Tournament.state`` puts in ``state`` at
    the time ``now`` (a placeholder), and for few others: the page of a list by state is
    read from an index and narrowed by the domain's rule (``Tournaments.listing``). Ended: its
    time up, or recurring (whose runs may have stopped before ``ends_at``); otherwise not
    ended, and begun (live) or, one-shot, not begun (upcoming; a recurring one may be
    between two runs)."""
    if state is State.ENDED:
        return f"(ends_at <= {now} OR ended_early <= {now} OR schedule IS NOT NULL)"
    running = f"ends_at > {now} AND (ended_early IS NULL OR ended_early > {now})"
    if state is State.LIVE:
        return f"({running} AND starts_at <= {now})"
    return f"({running} AND (starts_at > {now} OR schedule IS NOT NULL))"


def result_of(r: Row) -> ResultRecord:
    return ResultRecord(
        r["player_id"],
        r["match_id"],
        r["key_id"],
        r["mode"],
        r["ended_at"],
        r["duration_s"],
        r["points"],
        metadata=r["metadata"],
    )


def tally_of(r: Row) -> Tally:
    """A tally without its metadata (what a freeze reads: final standings carry none)."""
    return Tally(r["total"], r["reached_at"], r["version"])


def held_tally(r: Row) -> Tally:
    """A tally with its entry metadata, as the index holds it (``TALLY_COLS``, ``CHANGE_COLS``)."""
    return Tally(r["total"], r["reached_at"], r["version"], metadata=r["metadata"])


def standing_of(r: Row) -> Standing:
    return Standing(r["board"], r["window_id"], r["player_id"], held_tally(r))


def change_of(r: Row) -> Change | ProfileChange:
    if r["board"] == PROFILE_CHANGE:
        return ProfileChange(r["player_id"], r["version"], r["committed_at"], handle=r["id"])
    return Change(
        r["board"],
        r["window_id"],
        r["player_id"],
        held_tally(r),
        r["committed_at"],
        bool(r["removed"]),
        handle=r["id"],
        replaces=bool(r["replaces"]),
    )


def profile_of(r: Row) -> tuple[Profile, int]:
    profile = Profile(r["player_id"], r["name"], r["avatar"], r["country"])
    return profile, r["version"]


def final_of(r: Row) -> FinalEntry:
    return FinalEntry(r["position"], r["rank"], r["player_id"], r["points"], r["reached_at"])


def frozen_of(r: Row) -> FrozenWindow:
    return FrozenWindow(
        r["board"], r["window_id"], r["frozen_at"], r["players"], r["checksum"], r["archive"]
    )


def flagged_of(r: Row) -> Flagged:
    return Flagged(
        r["player_id"],
        r["match_id"],
        r["mode"],
        r["points"],
        r["ended_at"],
        r["recorded_at"],
        r["flag"],
    )


@dataclass(frozen=True, slots=True)
class Seen(RecordHandle):
    """One player's record state as ``open_match`` read it: the country (which places the
    targets of grouped boards), and by placed ``(board, window)``, the frozen windows and
    the tallies there are. A store writes from it only if nothing in it has changed."""

    country: str | None
    frozen: frozenset[tuple[str, str]]
    tallies: dict[tuple[str, str], Tally]
    count: int = 0  # the player's results in the mode since the read's ``since``
    oldest: float | None = None  # the oldest of them (``recorded_at``)

    def placed(self, targets: Sequence[tuple[Target, BoardSpec]]) -> list[tuple[Target, BoardSpec]]:
        return place_in_groups(targets, self.country)

    def state(self) -> RecordState:
        """As the state of a record that finds no stored result for the match."""
        return RecordState(None, self.count, self.oldest, self.frozen, dict(self.tallies))

    def check(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
    ) -> None:
        plan_record(result, self.placed(targets), self.state(), now, hourly_cap)


@dataclass(frozen=True, slots=True)
class Stored(RecordHandle):
    """One player's result of the match as ``open_match`` read it, stored already, with the
    country and the tallies of the targets then: a record of it is a retry, answered from
    them (its stored totals, as a replay is) with no round trip; one of other content is
    refused, as ``plan_record`` refuses it."""

    result: ResultRecord
    country: str | None
    tallies: dict[tuple[str, str], Tally]

    def placed(self, targets: Sequence[tuple[Target, BoardSpec]]) -> list[tuple[Target, BoardSpec]]:
        return place_in_groups(targets, self.country)

    def state(self) -> RecordState:
        return RecordState(self.result, 0, None, frozenset(), dict(self.tallies))

    def check(
        self,
        result: ResultRecord,
        targets: Sequence[tuple[Target, BoardSpec]],
        now: float,
        hourly_cap: int | None,
    ) -> None:
        plan_record(result, self.placed(targets), self.state(), now, hourly_cap)


def tally_columns(r: Row) -> Tally:
    """A tally read with its ``scored`` column."""
    return Tally(r["total"], r["reached_at"], r["version"], bool(r["scored"]))


def counted_of(r: Row) -> Counted:
    """A result as a reject's recount folds it (``domain/rejection.py``)."""
    return Counted(
        r["match_id"], r["mode"], r["points"], r["ended_at"], r["recorded_at"], r["metadata"]
    )


def moved_tally(r: Row) -> Tally:
    """A tally read to move it whole (to another group): with ``scored`` and ``metadata``."""
    return Tally(r["total"], r["reached_at"], r["version"], bool(r["scored"]), r["metadata"])


async def standings_by_player(
    page: Callable[[str], Awaitable[Sequence[Standing]]],
) -> AsyncIterator[list[Standing]]:
    """Every stored tally of a window in keyset pages by player id: ``page(after)`` reads
    the next page after that id (``""`` first), each page its own read, so that a slow
    consumer holds nothing between them."""
    after = ""
    while rows := list(await page(after)):
        yield rows
        after = rows[-1].player_id


async def rows_by_player(
    page: Callable[[str], Awaitable[Sequence[TallyRow]]],
) -> AsyncIterator[list[TallyRow]]:
    """``standings_by_player`` for plain rows (``Windows.tally_rows``): the player id is
    each row's first column."""
    after = ""
    while rows := list(await page(after)):
        yield rows
        after = rows[-1][0]


STORED_COLS = (
    "player_id, match_id, key_id, mode, ended_at, duration_s, points, recorded_at, flag, metadata"
)


def stored_result_of(r: Row) -> StoredResult:
    """A result row whole, for the pruner's day files."""
    return StoredResult(
        r["player_id"],
        r["match_id"],
        r["key_id"],
        r["mode"],
        int(r["ended_at"]),
        int(r["duration_s"]),
        int(r["points"]),
        float(r["recorded_at"]),
        r["flag"],
        r["metadata"],
    )


# -- what `podium status` asks of a store (ports/status.py) ----------------------------------

HEARTBEATS_KEPT_S = 7 * 86_400  # a process silent this long is forgotten by the next beat


def shown(url: str) -> str:
    """A database's name for an operator: host:port/database, never its user or password."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    host = u.hostname or "localhost"
    return f"{host}:{u.port or 5432}{u.path or '/'}"


async def reachable(name: str, ping: Callable[[], Awaitable[None]]) -> Reachable:
    """Whether one database answers, said rather than raised: the status lists them all."""
    from podium.errors import PodiumError

    try:
        await ping()
    except PodiumError as e:
        return Reachable(name, False, str(e))
    return Reachable(name, True)


DELIVERY_COLS = (
    "d.event_id, e.type, d.endpoint, d.state, d.attempts, d.first_at, d.next_at, "
    "d.last_status, d.last_error, d.delivered_at"
)


def delivery_of(r: Row) -> Delivery:
    pending = r["state"] == "pending"
    return Delivery(
        r["event_id"],
        r["type"],
        r["endpoint"],
        r["state"],
        r["attempts"],
        r["first_at"],
        r["next_at"] if pending else None,
        r["last_status"],
        r["last_error"],
        r["delivered_at"],
    )


def due_of(r: Row) -> Due:
    """A claimed delivery's row, as both stores' claims read it."""
    return Due(
        r["event_id"], r["endpoint"], r["type"], r["at"], r["data"], r["attempts"], r["first_at"]
    )
