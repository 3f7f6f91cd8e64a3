"""One board window of the in-process index (``index.py``), and the writes of write.lua on
it, which a rebuild's new generation of the window takes too (``rebuild.py``).

A ``SortedList`` of ``(score, member)`` in ascending order, the board order of
``domain.boards.board_key`` (``index.py`` says why), with each member's score, version and
entry metadata beside it, and the members banned on it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from sortedcontainers import SortedList

from podium.domain.changes import GENERATION, WRITES, tallies
from podium.domain.recount import MOVES_KEPT, Move
from podium.ports import Meta


@dataclass
class Board:
    entries: SortedList = field(default_factory=SortedList)
    scores: dict[str, int] = field(default_factory=dict)
    banned: set[str] = field(default_factory=set)
    versions: dict[str, int] = field(default_factory=dict)
    expire_at: int | None = None
    # member -> (version, entry metadata or None): as write.lua's ``:meta`` hash, the
    # version kept so that an older change's metadata never replaces a newer one's on an
    # equal score
    meta: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    # write.lua's ``:chg`` hash: the writes that changed a score, by band (domain/changes.py)
    changes: dict[str, int] = field(default_factory=dict)
    # write.lua's ``:mv`` list: a move for each write ``changes["n"]`` counts, the last
    # ones (domain/recount.py); None marks a board replaced whole
    moves: deque[Move | None] = field(default_factory=lambda: deque(maxlen=2 * MOVES_KEPT))

    def tally(self, old: int | None, new: int | None) -> None:
        fields = tallies(old, new)
        for f in fields:
            self.changes[f] = self.changes.get(f, 0) + 1
        if fields:
            self.moves.append((old, new))

    def replaced(self, old: Board | None) -> None:
        """This board put in place of ``old`` by a rebuild (swap.lua, switch.lua): the
        tallies and moves go on from the old one's, marked."""
        if old is not None:
            self.changes, self.moves = old.changes, old.moves
        self.renewed(1)

    def renewed(self, bump: int) -> None:
        """A new generation of counts (swap.lua, renew.lua): ``g`` moved by ``bump``, one
        more write, and a mark among the moves."""
        self.changes[WRITES] = self.changes.get(WRITES, 0) + 1
        self.changes[GENERATION] = self.changes.get(GENERATION, 0) + bump
        self.moves.append(None)

    def set_meta(self, member: str, version: int, text: str | None) -> None:
        """The member's score was just written with this entry's: its metadata is the
        newest (write.lua's ``set_meta``)."""
        if text is not None:
            self.meta[member] = (version, text)
        else:
            self.meta.pop(member, None)

    def keep_meta(self, member: str, version: int, text: str | None) -> None:
        """The member already held this entry's score: its metadata unless a newer one's
        is held (write.lua's ``keep_meta``)."""
        held = self.meta.get(member)
        if held is None:
            if text is not None:
                self.meta[member] = (version, text)
        elif version > held[0]:
            self.meta[member] = (version, text)  # None too: a tombstone with its version

    def set(self, member: str, score: int) -> None:
        old = self.scores.get(member)
        if old is not None:
            self.entries.remove((old, member))
        self.scores[member] = score
        self.entries.add((score, member))

    def load(
        self,
        entries: Sequence[tuple[str, int]],
        versions: Sequence[int] | None,
        metadata: Sequence[Meta] | None,
    ) -> None:
        """Fill an empty board with these entries (``banned`` already set), as ``set``,
        ``versions[member] = ...`` and ``set_meta`` for each in turn would: a member given
        twice keeps its last. The sorted list is built once from all of them, one sort in
        C, where adding a million one at a time was half of an embedded start
        (BENCHMARKS.md, issue 23)."""
        if self.banned:
            keep = [i for i, (m, _) in enumerate(entries) if m not in self.banned]
            entries = [entries[i] for i in keep]
            versions = None if versions is None else [versions[i] for i in keep]
            metadata = None if metadata is None else [metadata[i] for i in keep]
        self.scores = dict(entries)
        self.entries = SortedList(zip(self.scores.values(), self.scores.keys(), strict=True))
        if versions is not None:
            self.versions = {m: v for (m, _), v in zip(entries, versions, strict=True)}
        if metadata is not None:
            for (m, _), (version, text) in zip(entries, metadata, strict=True):
                self.set_meta(m, version, text)

    def remove(self, member: str) -> None:
        old = self.scores.pop(member, None)
        if old is not None:
            self.entries.remove((old, member))

    def rank(self, member: str, descending: bool) -> int | None:
        score = self.scores.get(member)
        if score is None:
            return None
        i: int = self.entries.index((score, member))
        return len(self.entries) - 1 - i if descending else i

    def ahead(self, member: str, score: int, descending: bool) -> int:
        """How many members are strictly ahead of (member, score) in board order, the
        member's own row left out wherever it is (as place.lua does)."""
        probe = (score, member)
        n: int
        if descending:
            n = len(self.entries) - self.entries.bisect_right(probe)
        else:
            n = self.entries.bisect_left(probe)
        held = self.scores.get(member)
        if held is not None and (held > score if descending else held < score):
            n -= 1
        return n

    def rows(self, start: int, stop: int, descending: bool) -> list[tuple[str, int]]:
        """(member, score) at ranks ``start..stop`` inclusive, in board order."""
        n = len(self.entries)
        stop = min(stop, n - 1)
        if start > stop:
            return []
        if descending:
            chunk = list(reversed(self.entries[n - 1 - stop : n - start]))
        else:
            chunk = self.entries[start : stop + 1]
        return [(m, s) for s, m in chunk]


def write(
    board: Board,
    entries: Sequence[tuple[str, int]],
    descending: bool,
    versions: Sequence[int] | None,
    metadata: Sequence[Meta] | None,
    banned: set[str] | None = None,
) -> int:
    """write.lua on one generation of a board: the ban set is the live one's (``banned``;
    the board's own when it is the live one)."""
    banned = board.banned if banned is None else banned
    written = 0
    for i, (member, score) in enumerate(entries):
        if member in banned:
            continue
        if versions is not None:
            if versions[i] > board.versions.get(member, 0):
                board.tally(board.scores.get(member), score)
                board.set(member, score)
                board.versions[member] = versions[i]
                written += 1
                if metadata is not None:
                    board.set_meta(member, *metadata[i])
            continue
        if metadata is not None and metadata[i][0] < board.versions.get(member, 0):
            continue  # under the floor a recount left (write.lua)
        old = board.scores.get(member)
        if old is None or (score > old if descending else score < old):
            board.tally(old, score)
            board.set(member, score)
            written += 1
            if metadata is not None:
                board.set_meta(member, *metadata[i])
        elif metadata is not None and old == score:
            board.keep_meta(member, *metadata[i])
    return written


def remove(
    board: Board, members: Sequence[str], versions: Sequence[int], banned: set[str] | None = None
) -> int:
    banned = board.banned if banned is None else banned
    removed = 0
    for member, version in zip(members, versions, strict=True):
        if member not in banned and version > board.versions.get(member, 0):
            board.tally(board.scores.get(member), None)
            board.remove(member)
            board.versions[member] = version
            board.meta.pop(member, None)
            removed += 1
    return removed


def held_meta(board: Board, members: Sequence[str]) -> dict[str, str]:
    if not board.meta:  # a board no result with metadata reached: nothing to look up
        return {}
    out = {}
    for m in members:
        held = board.meta.get(m)
        if held is not None and held[1] is not None:
            out[m] = held[1]
    return out
