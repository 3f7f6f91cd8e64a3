"""Page cursors on the read side: a cursor checked against the page it is given back to, and
the ``next`` and ``prev`` cursors of a page (``domain/cursor.py`` is the cursor itself).

A cursor resumes one board window's pages: given back for another board, another group or
another window, or once its window has ended and the board's current window is asked for,
it is refused with a 422 that says which, rather than resuming somewhere it never stood.
"""

from __future__ import annotations

from podium.domain.boards import BoardSpec
from podium.domain.cursor import Cursor, CursorError
from podium.domain.windows import Window, WindowError, parse_window, split_group, to_rfc3339
from podium.errors import InvalidInput
from podium.service.views import Entry


def read_cursor(text: str, spec: BoardSpec, w: Window, named: bool, now: float) -> Cursor:
    """The cursor ``text``, if it resumes pages of board ``spec``'s window ``w``; ``named``:
    the request named its window (``?window=``), else ``w`` is the current one."""
    try:
        cursor = Cursor.decode(text)
    except CursorError as e:
        raise InvalidInput(f"cursor: malformed: {e}") from None
    if cursor.board != spec.name:
        raise InvalidInput(
            f"cursor: it pages board {cursor.board}, not {spec.name}: start without a cursor"
        )
    if cursor.window == w.id:
        return cursor
    base, group = split_group(cursor.window)
    mine, my_group = split_group(w.id)
    if base == mine and group != my_group:
        raise InvalidInput(
            f"cursor: it pages group {group or 'none'} of board {spec.name}, "
            f"not {my_group or 'none'}"
        )
    if not named:
        try:
            then = parse_window(spec.rule, cursor.window)
        except WindowError:
            then = None
        if then is not None and then.end is not None and then.end <= now:
            raise InvalidInput(
                f"cursor: window {cursor.window} of board {spec.name} ended at "
                f"{to_rfc3339(then.end)}; the current window is {w.id}: page it from the "
                f"top (no cursor), or name ?window={base} to keep paging the one that ended"
            )
    raise InvalidInput(f"cursor: it pages window {cursor.window} of board {spec.name}, not {w.id}")


def links(
    spec: BoardSpec,
    window: str,
    first: int,
    rows: list[tuple[Entry, int]],
    more: bool,
    final: bool = False,
) -> tuple[str | None, str | None]:
    """``next`` and ``prev`` of a page whose entries (each with its packed score) start at
    0-based rank ``first``: ``next`` resumes behind the last row when there are rows behind
    it inside the exact top (``more``), ``prev`` ahead of the first unless it is the top."""
    if not rows:
        return None, None

    def cursor(i: int, before: bool) -> str:
        e, score = rows[i]
        c = Cursor(spec.name, window, before, e.player_id, score, first + i, final)
        return c.encode()

    nxt = cursor(len(rows) - 1, False) if more and first + len(rows) < spec.exact_top else None
    prev = cursor(0, True) if first > 0 else None
    return nxt, prev


def uneven(rows: list[Entry], player_id: str, above: int, below: int) -> list[Entry]:
    """A player's rows with neighbors (read ``max(above, below)`` on each side) cut to
    ``above`` rows ahead of the player's own and ``below`` behind it."""
    for i, e in enumerate(rows):
        if e.player_id == player_id:
            return rows[max(0, i - above) : i + below + 1]
    return rows  # an estimated rank has no rows at all
