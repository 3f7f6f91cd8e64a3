"""The only place that builds Redis key names.

Every key of one board window shares one hash tag, ``{b:<board>:<window>}``, so the sorted
set and its ban set always live in the same Redis Cluster slot and one script can touch
both. The prefix lets several deployments (or test runs) share one Redis.
"""

from __future__ import annotations

from podium.ports import BoardKey


class Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def tag(self, key: BoardKey) -> str:
        return f"{{b:{key.board}:{key.window}}}"

    def board(self, key: BoardKey) -> str:
        return f"{self.prefix}:{self.tag(key)}:z"

    def bans(self, key: BoardKey) -> str:
        return f"{self.prefix}:{self.tag(key)}:ban"

    def versions(self, key: BoardKey) -> str:
        """Per-player versions, for boards whose totals can fall."""
        return f"{self.prefix}:{self.tag(key)}:ver"

    def staging(self, key: BoardKey, token: str) -> str:
        """A scratch set for a rebuild; same slot as the board so it can be renamed over it."""
        return f"{self.prefix}:{self.tag(key)}:stage:{token}"

    def profiles(self) -> str:
        """The index's copy of every player's profile (one hash). A board's script reads it
        with the board's keys, which only a single Redis allows: on Redis Cluster (not
        built yet) it would need a copy in each board's slot, or a second read."""
        return f"{self.prefix}:profiles"

    def pattern(self) -> str:
        return f"{self.prefix}:*"
