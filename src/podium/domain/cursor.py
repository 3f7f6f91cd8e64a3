"""A page's cursor: where its last (or first) row stood in board order, opaque to clients.

A page answers ``next`` (resume behind its last row) and ``prev`` (resume ahead of its first
row). A cursor names the board, the window (its group included: ``2026-W44@FR``), the
direction, and the row's place in the one order (invariant 4 of docs/architecture.md): its
packed score (§2) and member, which is what the next page resumes from, not the row's rank,
so a client paging while the board moves never sees a player who kept their score twice,
nor misses one. It also carries the row's rank when issued (``rank``), which the final
standings of a frozen window page by, since they never move.

On the wire: URL-safe base64 (no padding) of a small JSON object. It is validated, not
signed: every field is checked on its way back, and a forged one can only name a place in
the board's own order, which any client may reach with ``offset``; it opens nothing else.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from podium.domain.codec import MAX_BITS
from podium.domain.tournaments import BOARD_PREFIX
from podium.domain.validation import ID, ID_RE

VERSION = 1
MAX_LENGTH = 400  # characters of a cursor as sent: a member id is at most 64 of them
PATTERN = r"[A-Za-z0-9_-]{1,400}"
# A configured board's name (as config.NAME_RE), or a tournament's board, "~" and its id
# (domain/tournaments.py): its pages' cursors come back too.
_BOARD_RE = re.compile(rf"[a-z0-9][a-z0-9_-]{{0,31}}|{re.escape(BOARD_PREFIX)}{ID}")
_WINDOW_RE = re.compile(r"[0-9A-Za-z-]{1,13}(@[A-Z]{2})?")
_RANK_LIMIT = 1 << 31


class CursorError(ValueError):
    """A cursor that is not one podium issued: what is wrong with it."""


@dataclass(frozen=True, slots=True)
class Cursor:
    board: str
    window: str  # the window's id, its group included
    before: bool  # resume ahead of the row (``prev``), else behind it (``next``)
    member: str
    score: int  # the row's packed score when the cursor was issued
    rank: int  # the row's 0-based rank when issued
    final: bool = False  # issued on the final standings of a frozen window

    @property
    def at(self) -> tuple[str, int]:
        """The place in board order, as the index reads one (``RankIndex.page_from``)."""
        return self.member, self.score

    def encode(self) -> str:
        body = {
            "v": VERSION,
            "b": self.board,
            "w": self.window,
            "d": "p" if self.before else "n",
            "m": self.member,
            "s": self.score,
            "r": self.rank,
            "f": int(self.final),
        }
        raw = json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    @classmethod
    def decode(cls, text: str) -> Cursor:
        if not text or len(text) > MAX_LENGTH or not re.fullmatch(PATTERN, text):
            raise CursorError("it is not a cursor this service issued (not URL-safe base64)")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            body = json.loads(raw)
        except (binascii.Error, ValueError):
            raise CursorError("it is not a cursor this service issued (unreadable)") from None
        if not isinstance(body, dict) or body.get("v") != VERSION:
            raise CursorError("it is not a cursor this service issued (unknown version)")
        board, window = _text(body, "b", _BOARD_RE), _text(body, "w", _WINDOW_RE)
        member = _text(body, "m", ID_RE)
        score, rank, final = _int(body, "s"), _int(body, "r"), _int(body, "f")
        if body.get("d") not in ("n", "p"):
            raise CursorError("its direction is neither next nor prev")
        if not -(1 << MAX_BITS) < score < 1 << MAX_BITS:
            raise CursorError(f"its score {score} is outside every board's scores")
        if not 0 <= rank < _RANK_LIMIT or final not in (0, 1):
            raise CursorError("its position is out of range")
        return cls(board, window, body["d"] == "p", member, score, rank, bool(final))


def _text(body: dict[str, Any], name: str, pattern: re.Pattern[str]) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise CursorError(f"its field {name!r} is missing or malformed")
    return value


def _int(body: dict[str, Any], name: str) -> int:
    value = body.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise CursorError(f"its field {name!r} is missing or not an integer")
    return value
