"""A player's rows, read for an export and erased, in the SQL both stores share.

Written once with SQLite's named parameters (``:p`` the player, ``:q`` the pseudonym,
``:after`` and ``:limit`` a keyset page); ``postgres()`` turns a statement into asyncpg's
numbered ones. Every section of an export is read in pages by a text key, so a player
with 100,000 results is never read at once (docs/export.md). The erasure is one list of
statements, run in one transaction on each database that may hold the player's rows
(every database of a store split by player): running it again changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from podium.domain.erasure import Erasure, Step
from podium.ports.erasure import ExportRow

# Where an event's data names the player: a "playerId" member with their id, as the stores
# write it (SQLite's json_object and podium's own JSON: compact; Postgres's
# json_build_object: a space either side of the colon).
_KEYS = ('\'"playerId":"\'', '\'"playerId" : "\'')
_NAMES = " OR ".join(f"instr({{col}}, {k} || :p || '\"') > 0" for k in _KEYS)
_PERSONAL_EVENTS = "('player.flagged', 'player.banned')"
_FROZEN = "(board, window_id) IN (SELECT board, window_id FROM frozen_windows)"


def _names(col: str) -> str:
    return "(" + _NAMES.format(col=col) + ")"


def _renamed(col: str) -> str:
    """``col`` with the player's "playerId" members given the pseudonym."""
    out = col
    for k in _KEYS:
        out = f"replace({out}, {k} || :p || '\"', {k} || :q || '\"')"
    return out


# section -> (key expression, columns, FROM ... WHERE ...), read ``WHERE <key> > :after
# ORDER BY <key> LIMIT :limit``
EXPORT: dict[str, tuple[str, str, str]] = {
    "profile": ("player_id", "name, avatar, country, version", "profiles WHERE player_id = :p"),
    "results": (
        "match_id",
        "match_id, key_id, mode, ended_at, duration_s, points, recorded_at, flag, "
        "accepted_at, rejected_at, metadata",
        "results WHERE player_id = :p",
    ),
    "matches": (
        "m.match_id",
        "m.match_id, m.key_id, m.recorded_at, m.mode, m.ended_at, m.duration_s",
        "matches m JOIN results r ON r.match_id = m.match_id AND r.player_id = :p WHERE 1 = 1",
    ),
    "tallies": (
        "board || '/' || window_id",
        "board, window_id, total, reached_at, version, metadata",
        "tallies WHERE player_id = :p",
    ),
    "finalStandings": (
        "board || '/' || window_id",
        "board, window_id, position, rank, points, reached_at",
        "final_standings WHERE player_id = :p",
    ),
    "leftOut": ("board || '/' || window_id", "board, window_id", "left_out WHERE player_id = :p"),
    "cohortPlacements": (
        "board || '/' || window_id",
        "board, window_id, cohort, placed_at",
        "cohort_members WHERE player_id = :p",
    ),
    "leagueTiers": (
        "board",
        "board, tier, cohort, window_start, moved",
        "league_tiers WHERE player_id = :p",
    ),
    "tournamentEntries": (
        "tournament_id",
        "tournament_id, joined_at",
        "tournament_entrants WHERE player_id = :p",
    ),
    "friends": ("friend_id", "friend_id", "friends WHERE player_id = :p"),
    "friendOf": ("player_id", "player_id", "friends WHERE friend_id = :p"),
    "ban": ("player_id", "reason, banned_at", "bans WHERE player_id = :p"),
    "outbox": (
        # The row's id last: rows of one window committed at the same time (two records
        # within the clock's resolution) have keys of their own, so no page boundary and no
        # merge of a split store's pages drops one of them.
        "board || '/' || window_id || '/' || committed_at || '/' || id",
        "board, window_id, total, reached_at, version, committed_at, metadata",
        "outbox WHERE player_id = :p",
    ),
    "webhookEvents": ("id", "id, type, at, data", f"webhook_events WHERE {_names('data')}"),
    "webhookDeliveries": (
        "d.event_id || '/' || d.endpoint",
        "d.event_id, d.endpoint, d.state, d.attempts, d.first_at, d.last_status, d.delivered_at",
        f"webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE {_names('e.data')}",
    ),
}


def export_sql(section: str, collate: str = "") -> str:
    """The statement of one page of ``section``: its rows past the key ``:after``, by key.

    Keys are compared and sorted in byte order (code point order: Python's ``str``
    comparison, SQLite's BINARY collation), the order the split store merges its databases'
    pages in and the one docs/export.md names. SQLite compares text so already; Postgres
    compares it by the database's collation (ICU's ``en-US``, glibc's ``en_US.UTF-8``: case
    and punctuation weighed apart from the letters), so its adapter passes ``collate="C"``
    and the key is given that collation in the SELECT, the ``>`` and the ORDER BY. Every key
    is text (a COLLATE on anything else is an error on Postgres). A key with a collation of
    its own no longer matches an index on the column; a player's rows of one section are few
    enough (a page is a single player's) that the sort costs nothing measurable.
    """
    key, cols, source = EXPORT[section]
    if collate:
        key = f'({key}) COLLATE "{collate}"'
    return (
        f"SELECT {key} AS export_key, {cols} FROM {source} AND {key} > :after "
        f"ORDER BY export_key LIMIT :limit"
    )


# The erasure, in order: (what it counts as, statement). Deleted where the row is the
# player's alone; given the pseudonym where another player's record depends on it (a
# frozen window's tallies and standings, a frozen cohort's members, the events of a
# freeze that name them among others), so that no one else's rank or points move.
ERASE: tuple[tuple[str, str], ...] = (
    (
        "webhookDeliveries",
        "DELETE FROM webhook_deliveries WHERE event_id IN (SELECT id FROM webhook_events "
        f"WHERE type IN {_PERSONAL_EVENTS} AND {_names('data')})",
    ),
    (
        "webhookEvents",
        f"DELETE FROM webhook_events WHERE type IN {_PERSONAL_EVENTS} AND {_names('data')}",
    ),
    (
        "webhookEventsPseudonymised",
        f"UPDATE webhook_events SET data = {_renamed('data')} WHERE {_names('data')}",
    ),
    ("results", "DELETE FROM results WHERE player_id = :p"),
    (
        "talliesPseudonymised",
        f"UPDATE tallies SET player_id = :q, metadata = NULL WHERE player_id = :p AND {_FROZEN}",
    ),
    ("tallies", "DELETE FROM tallies WHERE player_id = :p"),
    ("finalStandings", "UPDATE final_standings SET player_id = :q WHERE player_id = :p"),
    ("leftOut", "UPDATE left_out SET player_id = :q WHERE player_id = :p"),
    (
        "cohortPlacementsPseudonymised",
        "UPDATE cohort_members SET player_id = :q WHERE player_id = :p AND (board, cohort) IN "
        "(SELECT board, window_id FROM frozen_windows)",
    ),
    ("cohortPlacements", "DELETE FROM cohort_members WHERE player_id = :p"),
    ("leagueTiers", "DELETE FROM league_tiers WHERE player_id = :p"),
    (
        "tournamentPlaces",  # the places they took, free again (max_entrants)
        "UPDATE tournaments SET entrants = entrants - 1 WHERE entrants > 0 AND id IN "
        "(SELECT tournament_id FROM tournament_entrants WHERE player_id = :p)",
    ),
    ("tournamentEntries", "DELETE FROM tournament_entrants WHERE player_id = :p"),
    ("friends", "DELETE FROM friends WHERE player_id = :p OR friend_id = :p"),
    ("ban", "DELETE FROM bans WHERE player_id = :p"),
    ("outbox", "DELETE FROM outbox WHERE player_id = :p"),
    ("profile", "DELETE FROM profiles WHERE player_id = :p"),
)


def postgres(sql: str, params: tuple[str, ...]) -> str:
    """The statement with asyncpg's ``$n`` for the named parameters, numbered in the order
    of ``params``, and Postgres's ``strpos`` for ``instr``."""
    numbers = {name: f"${i}" for i, name in enumerate(params, start=1)}
    names = "|".join(params)
    out = re.sub(rf"(?<!:):({names})\b", lambda m: numbers[m.group(1)], sql)
    return out.replace("instr(", "strpos(")


# The frozen windows whose standings (kept, or in the archive file: every tally) hold the
# pseudonym: the files to write again. A window with no archive yet is written from the
# tallies, which hold the pseudonym already.
RENAMED = (
    "SELECT w.board, w.window_id, w.archive FROM frozen_windows w WHERE EXISTS "
    "(SELECT 1 FROM tallies t WHERE t.board = w.board AND t.window_id = w.window_id "
    "AND t.player_id = :q) OR EXISTS (SELECT 1 FROM final_standings f "
    "WHERE f.board = w.board AND f.window_id = w.window_id AND f.player_id = :q) "
    "ORDER BY w.board, w.window_id"
)


# The erasure record, as both stores keep it.
ERASURE_COLS = "id, digest, player_id, pseudonym, step, requested_at, requested_by, done_at, counts"


# An erasure an eraser may claim (``claim_erasures``): not done, and held by no one, by a
# lease that has ended (its eraser died or stalled), or by the claimant itself; ``:only``
# one erasure ('' : any). Named parameters: ``postgres()`` numbers them.
FREE = (
    "done_at IS NULL AND (held_by IS NULL OR held_until <= :now OR held_by = :owner) "
    "AND (:only = '' OR id = :only)"
)


def erasure_of(row: Any) -> Erasure:
    return Erasure(
        id=row["id"],
        digest=row["digest"],
        player_id=row["player_id"],
        pseudonym=row["pseudonym"],
        step=Step(row["step"]),
        requested_at=row["requested_at"],
        requested_by=row["requested_by"],
        done_at=row["done_at"],
        counts=json.loads(row["counts"]),
    )


def added(counts: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """Counts summed by kind."""
    out = dict(counts)
    for k, v in more.items():
        out[k] = out.get(k, 0) + v
    return out


def keyed_rows(rows: Iterable[Any]) -> list[tuple[str, ExportRow]]:
    """An export page's rows (what ``dict`` takes: sqlite3 rows, asyncpg records) as the
    port gives them: each with its keyset key apart."""
    out = []
    for r in rows:
        row = dict(r)
        out.append((str(row.pop("export_key")), row))
    return out
