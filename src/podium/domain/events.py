"""Reward and moderation events (webhooks): their names, their ids, what each carries, and
when a failed delivery is tried again. Pure: the stores write an event in the transaction
that makes it happen, the webhooks role (``workers/webhooks.py``) delivers it.

An event's ``data`` is built here once, when it happens, and stored as JSON; a delivery
sends ``{"type", "timestamp", "data"}`` (the envelope Standard Webhooks recommends) under
the event's id, the same id on every retry, which the receiver dedupes on
(``schemas/webhook-event.v1.json``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from podium.domain.cohorts import Move
from podium.domain.models import FinalEntry
from podium.domain.tournaments import tournament_of
from podium.domain.windows import to_rfc3339

WINDOW_FROZEN = "window.frozen"
PLAYER_FLAGGED = "player.flagged"
PLAYER_BANNED = "player.banned"
TOURNAMENT_ENDED = "tournament.ended"  # a tournament run's freeze: its board is "~<id>"
COHORT_FROZEN = "cohort.frozen"  # a league cohort's final standings and tier moves
EVENT_TYPES = (WINDOW_FROZEN, TOURNAMENT_ENDED, COHORT_FROZEN, PLAYER_FLAGGED, PLAYER_BANNED)

TOP_N = 100  # final standings a freeze's event carries; the rest are behind its link

# A delivery's states.
PENDING = "pending"
DELIVERED = "delivered"
FAILED = "failed"  # given up: every retry within the retry horizon failed
STATES = (PENDING, DELIVERED, FAILED)

MAX_DELAY_S = 6 * 3600.0  # the longest wait between two attempts


def window_frozen_id(board: str, window: str) -> str:
    """Derived from what happened, not drawn: a window freezes once, so a second freezer
    racing the first could not write a second event even if the freeze let it through (the
    id is the table's primary key)."""
    return f"{WINDOW_FROZEN}:{board}:{window}"


def tournament_ended_id(tournament_id: str, run: str) -> str:
    """As ``window_frozen_id``: a run freezes once, so its event has one id."""
    return f"{TOURNAMENT_ENDED}:{tournament_id}:{run}"


def freeze_event(board: str, window: str) -> tuple[str, str]:
    """The type and id of the event a freeze of this board window writes: a tournament
    run's (its board is ``~<id>``, ``domain/tournaments.py``) is a tournament.ended, any
    other a window.frozen."""
    tid = tournament_of(board)
    if tid is None:
        return WINDOW_FROZEN, window_frozen_id(board, window)
    return TOURNAMENT_ENDED, tournament_ended_id(tid, window)


def standings_path(board: str, window: str) -> str:
    tid = tournament_of(board)
    if tid is not None:
        return f"/v1/tournaments/{tid}/runs/{window}/standings"
    return f"/v1/boards/{board}/windows/{window}/standings"


@dataclass(frozen=True, slots=True)
class TournamentInfo:
    """What a tournament.ended event says of its tournament, read in the freeze's
    transaction from the tournament's row (None when there is no row: the event then
    carries the id alone)."""

    title: str
    category: str | None
    metadata: str | None  # canonical JSON, as the store keeps it


def freeze_data(
    board: str,
    window: str,
    frozen_at: float,
    players: int,
    final: Sequence[FinalEntry],
    tournament: TournamentInfo | None = None,
) -> dict[str, Any]:
    """What a reward job needs: the window (or the tournament and its run), its size, the
    top of its final standings with ranks, and where the full standings are. ``sha256``
    (of the archive file, which holds every player) is filled in when the archive is
    written (``with_archive``); the event is held back until then."""
    top = [
        {"position": e.position, "rank": e.rank, "playerId": e.player_id, "points": e.points}
        for e in final[:TOP_N]
    ]
    head: dict[str, Any]
    tid = tournament_of(board)
    if tid is None:
        head = {"board": board, "window": window}
    else:
        head = {"tournament": tid, "run": window}
        if tournament is not None:
            meta = None if tournament.metadata is None else json.loads(tournament.metadata)
            head |= {"title": tournament.title, "category": tournament.category, "metadata": meta}
    return head | {
        "frozenAt": to_rfc3339(frozen_at),
        "players": players,
        "standings": standings_path(board, window),
        "sha256": None,
        "top": top,
    }


def window_frozen_data(
    board: str, window: str, frozen_at: float, players: int, final: Sequence[FinalEntry]
) -> dict[str, Any]:
    """A window.frozen event's data (``freeze_data`` of a configured board)."""
    return freeze_data(board, window, frozen_at, players, final)


def cohort_frozen_id(board: str, cohort: str) -> str:
    """A cohort freezes once (its window's freeze), so its event's id is derived from it."""
    return f"{COHORT_FROZEN}:{board}:{cohort}"


def cohort_frozen_data(
    board: str, window: str, cohort: str, tier: str, frozen_at: float, moves: Sequence[Move]
) -> dict[str, Any]:
    """What a league's reward job needs: the cohort, its tier, and every member with their
    final place and the tier they play the next window in (a cohort is small: all of it)."""
    return {
        "board": board,
        "window": window,
        "cohort": cohort,
        "tier": tier,
        "frozenAt": to_rfc3339(frozen_at),
        "players": len(moves),
        "cohortPath": f"/v1/boards/{board}/cohorts/{cohort}",
        "members": [
            {
                "position": m.position,
                "rank": m.rank,
                "playerId": m.player_id,
                "points": m.points,
                "move": m.change,
                "nextTier": m.next_tier,
            }
            for m in moves
        ],
    }


def encode(data: dict[str, Any]) -> str:
    """An event's data as the store keeps it: compact JSON."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def with_archive(stored: str, sha256: str) -> str:
    """A freeze's event's stored data once its archive file is written."""
    data = json.loads(stored)
    data["sha256"] = sha256
    return encode(data)


def body(event_type: str, at: float, data: str) -> str:
    """The bytes a delivery POSTs (and signs), the same on every attempt."""
    return f'{{"type":{json.dumps(event_type)},"timestamp":"{to_rfc3339(at)}","data":{data}}}'


@dataclass(frozen=True, slots=True)
class Retry:
    """How an endpoint's failed deliveries are tried again."""

    first_s: float  # the wait after the first failure
    for_s: float  # how long after the event's first attempt retries go on; then it fails


def next_attempt(
    retry: Retry, attempts: int, first_at: float, now: float, rng: random.Random | None = None
) -> float | None:
    """When to try again after ``attempts`` failed attempts, the first at ``first_at``: an
    exponential wait (doubling from ``retry.first_s``, at most ``MAX_DELAY_S``) with jitter
    (a random 50 to 100 % of it, so that an endpoint back from an outage is not hit by every
    retry at once); None once that is past the retry horizon (the delivery has failed)."""
    delay = min(MAX_DELAY_S, retry.first_s * 2.0 ** max(0, attempts - 1))
    delay *= 0.5 + 0.5 * (rng or random).random()
    at = now + delay
    return None if at > first_at + retry.for_s else at


def settled_state(delivered: bool, retry_at: float | None) -> str:
    """A delivery's state after an attempt: delivered, pending while a retry is due, else
    failed (``next_attempt`` found the retry horizon past)."""
    return DELIVERED if delivered else PENDING if retry_at else FAILED
