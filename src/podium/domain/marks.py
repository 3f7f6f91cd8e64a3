"""Board marks: a watermark carried through the change log, so that a read can tell how far
the board is behind the store (issue 36; docs/architecture.md §1, "Reading").

A mark is an outbox row like a change, on a board name no board can have (``MARK_BOARD``:
configured boards match ``[a-z0-9][a-z0-9_-]*``, a tournament's is ``~<id>``, a profile
change's is empty), its window the database's name (``log.events.source_of``), its player one
of ``mark_players``: an id no player can have (``!`` is not in an id) chosen so that the row
lands in the partition it marks, and its ``committed_at`` the time ``T`` taken before the
mark's transaction began. A match acknowledged before ``T`` committed before the mark's
rows were written, so its rows come before the mark in that database's outbox and in its
partition of the log; an updater that applies the mark has applied them (it settles each
fetch before the next), and notes ``T`` for (database, partition). A read takes the least
``T`` over every pair it expects: the board holds everything acknowledged before it.

Pure: the reads and the updater decide with these, the ports carry the values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

from podium.domain.models import Change, Message
from podium.domain.sharding import bucket_of

MARK_BOARD = "!mark"  # no board name: not [a-z0-9][a-z0-9_-]*, nor "~<id>", nor ""
_PLAYER = "!mark."  # then "<partition>.<n>": no player id starts with "!"

# (database name, partition) -> the mark's time, epoch seconds
Marks = Mapping[tuple[str, int], float]


@cache
def mark_players(partitions: int) -> tuple[str, ...]:
    """One player id per partition, the ``p``-th landing in partition ``p`` of a log of
    ``partitions`` (``log.events.partition_of``: the player's bucket modulo the count):
    ``!mark.<p>.<n>`` with the least ``n`` that lands there, the same in every process."""
    if partitions < 1:
        raise ValueError(f"partitions {partitions!r}: at least 1")
    out = []
    for p in range(partitions):
        n = 0
        while bucket_of(f"{_PLAYER}{p}.{n}") % partitions != p:
            n += 1
        out.append(f"{_PLAYER}{p}.{n}")
    return tuple(out)


def is_mark(board: str) -> bool:
    """Whether an outbox row or a log message of this board is a mark, not a change."""
    return board == MARK_BOARD


def is_mark_message(m: Message) -> bool:
    """Whether a message of the log is a mark (a profile change never is)."""
    return isinstance(m, Change) and is_mark(m.board)


def partition_of_mark(player_id: str) -> int:
    """The partition a mark's player id marks (``mark_players``)."""
    if not player_id.startswith(_PLAYER):
        raise ValueError(f"not a mark's player id: {player_id!r}")
    return int(player_id[len(_PLAYER) :].split(".", 1)[0])


def newest(
    held: Marks, more: Iterable[tuple[tuple[str, int], float]]
) -> dict[tuple[str, int], float]:
    """``held`` with ``more`` noted, each pair keeping the later time: a mark applied late
    (a redelivery, a replay) never takes the watermark back."""
    out = dict(held)
    for pair, at in more:
        if at > out.get(pair, float("-inf")):
            out[pair] = at
    return out


def watermark(marks: Marks, databases: Iterable[str], partitions: int) -> float | None:
    """The least mark over every (database, partition) expected: the board holds every
    change of those databases acknowledged before it. None when a pair has no mark at all
    (no mark written yet: a new deployment, or no relay running), since nothing can then be
    said of it; the reads add no label rather than invent one."""
    least: float | None = None
    for db in databases:
        for p in range(partitions):
            at = marks.get((db, p))
            if at is None:
                return None
            least = at if least is None else min(least, at)
    return least


def behind_label(now: float, mark: float | None, bound_s: float) -> float | None:
    """The ``asOf`` an exact answer from the live board carries: the watermark, when the
    board is more than ``bound_s`` behind it; None (no label, the answer speaks for its own
    moment) when it is within the bound, or when no watermark is known."""
    if mark is None or now - mark <= bound_s:
        return None
    return mark
