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

    def pattern(self) -> str:
        return f"{self.prefix}:*"
