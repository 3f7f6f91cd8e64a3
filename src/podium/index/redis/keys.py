"""The only place that builds Redis key names.

Hash tags. Redis Cluster puts a key in the slot of its hash tag (the part in ``{...}``),
and one script may only touch keys of one slot. So the tag says which keys must meet:

- Today (one Redis, ``index.shards = 1``): every key of one board window shares the tag
  ``{b:<board>:<window>}`` (``Keys.tag``), so the sorted set, its ban set and its versions
  always meet in one script. The copy of profiles is one hash, ``<prefix>:profiles``: the
  copy of the single shard, whose tag is ``SINGLE`` (no tag at all, which is also the name
  it has always had). A single Redis lets any keys meet, so ``around.lua`` reads a board's
  rows and their names from that copy in the same script, in one round trip.

- With shards (``index.shards = N``, on one Redis or on Redis Cluster): players are split
  into N shards by their id (``domain.sharding.shard_of``), and a shard's tag names the
  shard instead of the board window, ``{s00}`` ... (``domain.sharding.shard_tag``). Every
  key of shard n carries it, ``Keys(prefix, tag)``: each board window's part on that shard
  (``<prefix>:{s03}:<board>:<window>:z``, its ban set ``:ban``, versions ``:ver`` and
  rebuild staging sets) and that shard's copy of profiles, ``Keys.profiles("{s03}")``,
  which holds the profiles of shard n's players (a player's rows live only on their
  shard, so their name is needed only there). All of them hash to one slot, so one script
  per shard updates a player's windows, bans and profile together, and ``around.lua``
  reads a shard's rows and their names in one step; each shard's copy has its own
  completeness mark, and the copy is complete when every shard's is. The tags spread over
  a cluster's primaries (16 tags fall on all three of a three-primary cluster). A merged
  top reads each shard's page and merges them with ``domain.boards.merge_in_board_order``.

- A layout other than the configured one (``podium rebuild --all --shards M``, §8 of
  docs/architecture.md): once a reshard has written the layout record (``Keys.layout``),
  the live shard count is the record's, and its shards' tags carry the count,
  ``{s05.32}`` for shard 5 of 32 (``shard_tag``), so that the keys of a layout being built
  never meet the live layout's, whatever either count is. Without the record the layout is
  the configured ``index.shards`` under the plain tags, so an existing deployment keeps
  its keys.

The prefix lets several deployments (or test runs) share one Redis.
"""

from __future__ import annotations

from podium.ports import BoardKey

SINGLE = ""  # the tag of today's one shard (a single Redis): its keys need no tag


def shard_tag(shard: int, of: int | None = None) -> str:
    """The hash tag of index shard ``shard``: ``{s03}`` under the configured layout, or
    ``{s03.32}``, shard 3 of a layout of 32 that a reshard built (``of``)."""
    return f"{{s{shard:02d}}}" if of is None else f"{{s{shard:02d}.{of}}}"


def layout_pattern(prefix: str, count: int, tagged: bool) -> str:
    """A SCAN pattern of every key of a split layout of ``count`` shards: under the plain
    tags, or under the tags that carry the count (what a reshard drops once the other
    layout is live). Its digits are as many as ``shard_tag`` writes, so one layout's
    pattern never finds another's keys."""
    digits = "[0-9]" * max(2, len(str(count - 1)))
    tags = f"{{s{digits}}}" if not tagged else f"{{s{digits}.{count}}}"
    return f"{prefix}:{tags}:*"


def beside_board(board: str) -> tuple[str, str] | None:
    """The tallies and the list of moves (``Keys.changes``, ``Keys.moves``) of the board window
    whose sorted set a walk of the keys found as ``board`` (``Keys.board``), in its slot; None
    for a sorted set that is no board (a staging set). For a generation built beside the live
    one, or retired (``<window>:g:<token>:z``), they name keys that never exist: only the live
    generation's writes are tallied, which the scripts given them check (forget.lua)."""
    if not board.endswith(":z"):
        return None
    window = board[: -len(":z")]
    return f"{window}:chg", f"{window}:mv"


class Keys:
    """Key names under ``prefix``; with a shard's ``tag`` (``{s03}``), the names of that
    shard's part of every board window, else (``None``) the names a single index has
    always had, so an existing deployment keeps its keys.

    With a ``generation`` (a rebuild's token, ``of_generation``), a board window's sorted
    set, versions and metadata are those of a generation built beside the live one
    (``<window>:g:<token>:z``), in the same slot; its ban set stays the live one's (a ban
    holds in every generation)."""

    def __init__(self, prefix: str, tag: str | None = None, generation: str | None = None) -> None:
        self.prefix = prefix
        self.shard = tag
        self.rebuilt = generation  # the token of the generation these names are of
        self._base = prefix if tag is None else f"{prefix}:{tag}"

    def of_generation(self, token: str) -> Keys:
        """The names of the generation ``token`` of every board window of this shard."""
        return Keys(self.prefix, self.shard, token)

    def tag(self, key: BoardKey) -> str:
        """The hash tag of a board window's keys: the shard's, or the window's own."""
        return self.shard if self.shard is not None else f"{{b:{key.board}:{key.window}}}"

    def _window(self, key: BoardKey) -> str:
        if self.shard is None:
            return f"{self.prefix}:{{b:{key.board}:{key.window}}}"
        return f"{self._base}:{key.board}:{key.window}"

    def retired(self, token: str) -> Keys:
        """The names the live generation takes when the rebuild ``token`` switches the new
        one in (``switch.lua``), until it is dropped after the grace period."""
        return self.of_generation(f"{token}.old")

    def _held(self, key: BoardKey) -> str:
        """Where a generation's keys of a board window begin (the live one's: the window's)."""
        if self.rebuilt is None:
            return self._window(key)
        return f"{self._window(key)}:g:{self.rebuilt}"

    def board(self, key: BoardKey) -> str:
        return f"{self._held(key)}:z"

    def bans(self, key: BoardKey) -> str:
        return f"{self._window(key)}:ban"

    def versions(self, key: BoardKey) -> str:
        """Per-player versions, for boards whose totals can fall."""
        return f"{self._held(key)}:ver"

    def meta(self, key: BoardKey) -> str:
        """Entry metadata: one hash per board window, member -> ``<version>:<json>``
        (``<version>:`` alone where a newer change carried none), in the board's slot so
        that write.lua keeps it in the same step as the score."""
        return f"{self._held(key)}:meta"

    def changes(self, key: BoardKey) -> str:
        """The board window's tallies of writes by band (``domain/changes.py``): one for
        every generation, since readers compare them across a cycle, not a rebuild."""
        return f"{self._window(key)}:chg"

    def moves(self, key: BoardKey) -> str:
        """The board window's list of moves, one for each write its tallies' ``n`` counts
        (write.lua; ``domain/recount.py``): what the aggregator's counts follow."""
        return f"{self._window(key)}:mv"

    def next_generation(self, key: BoardKey) -> str:
        """The pointer to the generation a rebuild is filling beside the live one
        (``service/upkeep/gapless.py``): it holds that generation's sorted set, versions and
        metadata names, one a line, so that write.lua and ban.lua apply every change to both
        generations until the switch without building a name themselves; it lives only
        while the rebuild renews it."""
        return f"{self._window(key)}:next"

    def staging(self, key: BoardKey, token: str) -> str:
        """A scratch set for a rebuild; same slot as the board so it can be renamed over it."""
        return f"{self._window(key)}:stage:{token}"

    def profiles(self, tag: str) -> str:
        """The copy of profiles kept in the slot of shard ``tag`` (one hash: a field per
        player, and the completeness mark), beside that shard's boards; ``SINGLE`` today."""
        if tag == SINGLE:
            return f"{self.prefix}:profiles"
        return f"{self.prefix}:{tag}:profiles"

    def generation(self) -> str:
        """The generation marker of this shard (``index/redis/generations.py``): a token and the
        identity of the node it was written on, in the shard's slot, so that it lives and
        dies with that node's data: a Redis that came back empty lost it too."""
        return f"{self._base}:gen"

    def confirmed(self) -> str:
        """Beside the marker, in its slot: when the marker was last confirmed on the node
        it names (epoch seconds). A key of its own, so that the marker's value is what
        releases that keep no such time read."""
        return f"{self._base}:gen:at"

    def rebuild_lock(self) -> str:
        """Held (SET NX PX) by the one process that rebuilds a lost index from the store."""
        return f"{self.prefix}:rebuild-lock"

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

    def marks(self) -> str:
        """The board marks (``BoardMarks``): one hash in the aggregator's slot, which every
        process of a split index reads as one, whatever the layout."""
        return f"{self.prefix}:{{agg}}:marks"

    def snapshot_stamp(self, key: BoardKey) -> str:
        """A new value with every snapshot kept (``Snapshots.stamp``): the same tag, one script.
        Named apart from the counter an earlier release bumped here (``snapstamp``), which its
        script would fail to bump over a value of this one during a rolling upgrade."""
        return f"{self.prefix}:{{agg}}:snapver:{key.board}:{key.window}"

    # The layout record (``index/redis/layout.py``): the live shard count a reshard wrote, and
    # beside it, while one runs, the count being built. One tag: one slot, one MGET.
    def layout(self) -> str:
        return f"{self.prefix}:{{layout}}"

    def layout_next(self) -> str:
        return f"{self.prefix}:{{layout}}:next"

    def pattern(self) -> str:
        return f"{self.prefix}:*"
