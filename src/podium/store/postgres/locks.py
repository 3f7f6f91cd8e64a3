"""The advisory lock scheme: which transactions queue behind which.

SQLite gets its serial order from its single writer; here the record transactions of one
player queue on a transaction-scoped advisory lock on that player instead. That keeps the
hourly cap exact and makes the first fold into a tally safe (there is no row yet for
``FOR UPDATE`` to lock), while different players still commit in parallel. A freeze takes
its window's lock exclusively and every record takes it shared, so a result either commits
before the freeze reads the standings or sees the window frozen.

The order, wherever a transaction takes several: players' locks before windows' before
matches' claim locks, each kind in key order. A group of records (``group.py``) takes all of
its records' locks first in that order, so groups on several connections, a record alone, a
freeze and a release never wait for each other in a circle.

The single-bigint and the two-int4 key spaces do not overlap, so the per-player locks
(namespace, hash) can never block the migration lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from podium.domain.cohorts import base_window
from podium.domain.models import Target
from podium.domain.windows import split_group

MIGRATE = 0x706F6469756D  # b"podium"
RECORD_NS = 0x7064_0001
FRIENDS_NS = 0x7064_0002
WINDOW_NS = 0x7064_0003
# A match id's lock on its database, in a store split by player: the claim written again after
# a record elsewhere and the release of a claim queue on it (``record.Results.reclaim_match``).
MATCH_NS = 0x7064_0010
# A match's claim lock, keyed by ``hashtext`` of its id in SQL (``record_sql.CLAIM_LOCK``,
# migration 012): records take it shared, the release of a claim exclusively.
CLAIM_NS = 0x7064_0011
# A league board window's tier, while a first result places a player in a cohort there
# (``store/postgres/cohorts.py``): placements in one tier queue, so none overfills.
COHORT_NS = 0x7064_0012


def player_key(player_id: str) -> int:
    """A stable signed 32-bit key; a collision only makes two players queue behind each other."""
    digest = hashlib.blake2b(player_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def window_key(board: str, window: str) -> int:
    """The advisory lock key of one board window (signed 32-bit, like ``player_key``).

    Every group of a grouped board's window shares its base window's key (``2026-W44@FR``
    locks ``2026-W44``), so a record can take its window locks before it reads which group
    the player is in, in the round trip that opens its transaction."""
    base, _ = split_group(window)
    # A cohort's window (and a pending cohort target) locks its board window, as a group's
    # does, so a record takes it before it reads which cohort the player is in.
    return player_key(f"{board}\x00{base_window(base)}")


def cohort_key(board: str, window: str, tier: str) -> int:
    return player_key(f"{board}\x00{window}\x00{tier}")


def window_locks(targets: Sequence[Target]) -> list[int]:
    return sorted({window_key(t.board, t.window) for t in targets})


def record_locks(player_id: str, targets: Sequence[Target]) -> str:
    """The advisory locks of one record, as SQL text: the player's lock, then shared locks on
    the target windows in key order (``podium_record_seen`` takes the same). The keys are
    integers computed here, so writing them into the text is safe (a string never would be)."""
    return "; ".join(
        [f"SELECT pg_advisory_xact_lock({RECORD_NS}, {player_key(player_id)})"]
        + [f"SELECT pg_advisory_xact_lock_shared({WINDOW_NS}, {k})" for k in window_locks(targets)]
    )
