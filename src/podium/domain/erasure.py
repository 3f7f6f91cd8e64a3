"""A player's erasure (issue 35, docs/architecture.md §9): the keyed hash the store keeps in
place of an erased id, the pseudonym that replaces the id where others' records depend on
it, and the steps the eraser carries out, each idempotent, in order.

Pure: no I/O. The hash is an HMAC-SHA256 under ``[store] erasure_secret`` (or, where it is
left empty, a secret the store generated once and keeps: ``new_secret``), so that the
store's copy cannot be turned back into the id by hashing guesses without the secret.
Every keyed hash of an id is computed here: the store's refusals and the index's sweeps
(``erased_among``) agree by construction.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

PSEUDONYM_PREFIX = "erased-"


def erased_digest(secret: str, player_id: str) -> str:
    """The keyed hash kept of an erased id: hex HMAC-SHA256 of the id's bytes."""
    return _digest(_keyed(secret), player_id)


def _keyed(secret: str) -> hmac.HMAC:
    return hmac.new(secret.encode(), digestmod=hashlib.sha256)


def _digest(keyed: hmac.HMAC, player_id: str) -> str:
    """The hash of one id from an HMAC keyed once: a copy of it skips the key's setup,
    most of the cost of a short id's hash (a sweep hashes every id the index holds)."""
    h = keyed.copy()
    h.update(player_id.encode())
    return h.hexdigest()


def erased_among(secret: str, digests: Collection[str], player_ids: Iterable[str]) -> set[str]:
    """Which of ``player_ids`` are erased, told by their keyed hash being in ``digests``
    (the store's set): what sweeps the index for copies a failover brought back without
    keeping any erased id to look them up by."""
    if not digests:
        return set()
    keyed = _keyed(secret)
    return {p for p in player_ids if _digest(keyed, p) in digests}


def new_secret() -> str:
    """A key for the hashes where ``[store] erasure_secret`` is left empty: 256 random
    bits, generated once and kept by the store. With an empty key the hash would be a
    plain SHA-256 that anyone can test a guessed id against."""
    return secrets.token_hex(32)


def pseudonym() -> str:
    """A name for an erased player's place in others' records: random, so that nothing
    derives it from the id (``erased-`` and 24 hex digits, a valid player id)."""
    return PSEUDONYM_PREFIX + secrets.token_hex(12)


def receipt_id() -> str:
    """The id an erasure is polled by (``GET /v1/admin/erasures/{id}``)."""
    return "era_" + secrets.token_hex(12)


class Step(StrEnum):
    """The eraser's steps, in order. Each is idempotent: a process killed in one does it
    again from its start, and a step done is noted before the next begins."""

    GATE = "gate"  # the keyed hash recorded: updaters and new results refuse the player
    INDEX = "index"  # every key and member of the player out of the rank index
    STORE = "store"  # the player's rows deleted, others' records given the pseudonym
    ARCHIVE = "archive"  # archive and standings files rewritten, new manifests
    SETTLE = "settle"  # after a grace: store rows and index swept once more
    DONE = "done"  # the id itself forgotten: only the hash and the counts remain


ORDER = tuple(Step)


def next_step(step: Step) -> Step:
    return ORDER[min(ORDER.index(step) + 1, len(ORDER) - 1)]


@dataclass(frozen=True, slots=True)
class Erasure:
    """The durable record of one erasure. ``player_id`` is held only until the last step
    (DONE) clears it; the ``digest`` stays, with the counts of what was touched."""

    id: str
    digest: str
    player_id: str | None
    pseudonym: str
    step: Step
    requested_at: float
    requested_by: str  # the admin key's id
    done_at: float | None = None
    counts: dict[str, int] = field(default_factory=dict)


# What an export holds, in the order of the document (docs/export.md): each a section
# of rows the store keeps on the player, read a page at a time.
EXPORT_SECTIONS = (
    "profile",
    "results",
    "matches",
    "tallies",
    "finalStandings",
    "leftOut",
    "cohortPlacements",
    "leagueTiers",
    "tournamentEntries",
    "friends",
    "friendOf",
    "ban",
    "outbox",
    "webhookEvents",
    "webhookDeliveries",
)
