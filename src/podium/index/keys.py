"""The only place that builds Redis key names.

Hash tags. Redis Cluster puts a key in the slot of its hash tag (the part in ``{...}``),
and one script may only touch keys of one slot. So the tag says which keys must meet:

- Today (one Redis, ``index.shards = 1``): every key of one board window shares the tag
  ``{b:<board>:<window>}`` (``Keys.tag``), so the sorted set, its ban set and its versions
  always meet in one script. The copy of profiles is one hash, ``<prefix>:profiles``: the
  copy of the single shard, whose tag is ``SINGLE`` (no tag at all, which is also the name
  it has always had). A single Redis lets any keys meet, so ``around.lua`` reads a board's
  rows and their names from that copy in the same script, in one round trip.

- With shards (Redis Cluster, ``index.shards = N``; not built yet): players are split into
  N shards by their id, and a shard's tag names the shard instead of the board window, say
  ``{s<n>}``. Every key of shard n carries it: each board window's part on that shard (its
  sorted set, ban set and versions) and that shard's copy of profiles,
  ``Keys.profiles("{s<n>}")``, which holds the profiles of shard n's players (a player's
  rows live only on their shard, so their name is needed only there). All of them hash to
  one slot, so a shard's script still reads its rows and their names in one step, as
  ``around.lua`` does today; each shard's copy has its own completeness mark, and the copy
  is complete when every shard's is. A merged top reads each shard's page and merges them
  with ``domain.boards.merge_in_board_order``.

The prefix lets several deployments (or test runs) share one Redis.
"""

from __future__ import annotations

from podium.ports import BoardKey

SINGLE = ""  # the tag of today's one shard (a single Redis): its keys need no tag


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

    def profiles(self, tag: str) -> str:
        """The copy of profiles kept in the slot of shard ``tag`` (one hash: a field per
        player, and the completeness mark), beside that shard's boards; ``SINGLE`` today."""
        if tag == SINGLE:
            return f"{self.prefix}:profiles"
        return f"{self.prefix}:{tag}:profiles"

    def read_bucket(self, client: str) -> str:
        """A client's shared token bucket for reads (``ratelimit.py``); a key of its own,
        so buckets spread over a cluster's slots."""
        return f"{self.prefix}:rl:{client}"

    # The rank aggregator's keys share one tag, so that its lease, its fencing token and the
    # snapshots it publishes meet in one script (publish checks the token) on a cluster.
    def lease(self) -> str:
        return f"{self.prefix}:{{agg}}:lease"

    def fence(self) -> str:
        return f"{self.prefix}:{{agg}}:fence"

    def snapshot(self, key: BoardKey) -> str:
        return f"{self.prefix}:{{agg}}:snap:{key.board}:{key.window}"

    def pattern(self) -> str:
        return f"{self.prefix}:*"
