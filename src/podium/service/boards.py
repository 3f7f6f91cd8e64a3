"""The board catalogue: the boards a request may name (the configured ones, and those made at
run time: a tournament's runs), and the window a request means on one of them (the current
one by default, one group's on a board split by country).

The use cases that only need to find a board or a window take this, not the reads: a
rebuild, a freeze or a tournament has nothing to read. What they tell the reads instead,
when the index changed under the pages this process holds (a ban, a rebuild, a reshard), is
a ``Changed`` callback, wired to the reads' own (``Reads.clear_cache``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from podium.domain.boards import BoardSpec
from podium.domain.windows import (
    GROUP_RE,
    Window,
    WindowError,
    grouped,
    split_group,
    to_rfc3339,
)
from podium.errors import InvalidInput, NotFound
from podium.ports import Clock

# The index changed at this time (None: a change that is not the index's, a freeze), so
# whatever holds pages or snapshots read before it reads them again.
Changed = Callable[[float | None], None]


def no_open_window(spec: BoardSpec, now: float) -> str:
    """What a read of the current window says when none is open: before the first season,
    or on a schedule between two windows, with when the next one opens."""
    t = int(now)
    nxt = spec.rule.next_start(t)
    opens = f": the next opens at {to_rfc3339(nxt)}" if nxt is not None else ""
    last = spec.rule.latest(t)
    if last is None:
        return f"board {spec.name} has no open window yet{opens}"
    assert last.end is not None  # all-time is always open
    return (
        f"board {spec.name} has no open window: {last.id} closed at {to_rfc3339(last.end)}"
        f"{opens} (ask for ?window={last.id})"
    )


class Boards:
    def __init__(self, boards: Iterable[BoardSpec], clock: Clock) -> None:
        self.clock = clock  # "the current window" is the one open now
        self._specs = {b.name: b for b in boards}

    def know(self, spec: BoardSpec) -> None:
        """A board made at run time (a tournament's run), read like a configured one."""
        self._specs.setdefault(spec.name, spec)

    def board(self, name: str) -> BoardSpec:
        spec = self._specs.get(name)
        if spec is None:
            raise NotFound(f"no board named {name!r}")
        return spec

    def window(
        self,
        spec: BoardSpec,
        window_id: str | None,
        group: str | None = None,
        *,
        begun: bool = True,
    ) -> Window:
        """The window asked for (the current one by default), and on a board split into
        groups, that group's window: ``?window=2026-W44&group=FR`` or ``2026-W44@FR``.
        With ``begun``, one that has not begun yet is a 404, as no one is on it."""
        base_id, suffix = split_group(window_id) if window_id else (None, None)
        if suffix is not None and group is not None and suffix != group:
            raise InvalidInput(f"window {window_id!r} and group {group!r} disagree")
        group = group or suffix
        if base_id is None:
            w = spec.rule.window_at(int(self.clock.now()))
            if w is None:
                raise NotFound(no_open_window(spec, self.clock.now()))
        else:
            try:
                w = spec.rule.parse(base_id)
            except WindowError as e:
                raise InvalidInput(str(e)) from None
            if begun and w.start > self.clock.now():  # not begun: no one is on it yet
                raise NotFound(
                    f"board {spec.name} has no window {base_id} yet: it opens at "
                    f"{to_rfc3339(w.start)}"
                )
        if spec.group_by is None:
            if group is not None:
                raise InvalidInput(f"board {spec.name} is not split into groups")
            return w
        if group is None:
            raise InvalidInput(
                f"board {spec.name} is split by {spec.group_by}: name a group "
                "(?group=FR, or a window id like 2026-W44@FR)"
            )
        if not GROUP_RE.fullmatch(group):
            raise InvalidInput(f"group {group!r} must be a two-letter country code")
        return grouped(w, group)
