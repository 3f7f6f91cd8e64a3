"""The rank index ports (the copy that answers ranks), and the rank source the reads use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from podium.domain.boards import BoardSpec
from podium.domain.histogram import Estimate
from podium.domain.models import Profile
from podium.domain.recount import Move
from podium.ports.status import IndexNode

# A board entry's metadata as the index is given it: the version of the tally it came
# with (what orders two of them) and its canonical JSON, or None for a tally without.
Meta = tuple[int, str | None]


@dataclass(frozen=True, slots=True)
class BoardKey:
    """One board window in the rank index."""

    board: str
    window: str


class RankIndex(Protocol):
    """The copy that answers ranks (invariant 1 of docs/architecture.md: rebuildable from the
    store).

    Order (invariant 4, ``domain.boards.board_key``): on a descending board, higher score
    first, and on equal scores the member that sorts later by bytes first (as ``ZREVRANGE``
    returns them); on an ascending board the reverse of both. Ranks here are 0-based; the API
    adds one. Every rank says whether it is exact (invariant 6): an index that holds a board in
    one sorted set always knows; one split across shards may estimate ranks below the exact
    top, and says so.
    """

    async def ping(self) -> None: ...
    async def close(self) -> None: ...

    async def nodes(self) -> list[IndexNode]:
        """Where each shard's keys are, and that node's replication (``podium status``);
        never raises for a node that is down (``ports/status.py``)."""
        ...

    async def write(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        descending: bool,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> int:
        """Apply absolute scores with ``GT`` (descending) or ``LT`` (ascending) semantics,
        or, when ``versions`` are given (one per entry), only where the version is newer
        than the one held; skip members banned on this key; return how many were written.

        With ``metadata`` (one ``Meta`` per entry: the tally's version and its entry
        metadata), in the same step: where the member's score is now this entry's (written,
        or held already), keep its metadata (none: keep none) unless that of a newer version
        is held, so a change applied twice or late never brings back older metadata."""
        ...

    async def remove(
        self,
        key: BoardKey,
        members: Sequence[str],
        versions: Sequence[int],
        *,
        expire_at: int | None,
    ) -> int:
        """On a versioned board, take members off where the version is newer than the one
        held, and keep that version (a tombstone) so an older write cannot put them back."""
        ...

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        """Members at ranks ``start..stop`` inclusive, in board order."""
        ...

    async def page_after(
        self, key: BoardKey, after: tuple[str, int] | None, n: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        """Up to ``n`` members just behind ``after`` (a member and a score, as the last row
        of the previous page) in board order, that member left out wherever it stands now;
        from the top when ``after`` is None. A keyset page: its cost does not grow with its
        depth (on a split board, n rows of each shard, where ``page`` reads every shard down
        to ``stop``), so a walk of a whole board (the reconciler's) costs each page alike.
        A member that moves past the cursor between two pages may be seen twice or not at
        all in that walk."""
        ...

    async def page_from(
        self, key: BoardKey, at: tuple[str, int], n: int, *, descending: bool, before: bool
    ) -> Slice:
        """Up to ``n`` rows strictly behind the place ``at`` (a member and a score: where a
        row stood in board order) or, with ``before``, strictly ahead of it, the nearest
        ones, in board order; with how many members stand strictly ahead of that place and
        whether one holds it exactly (the member, not moved), counted with the rows, so the
        rows' ranks follow (``Slice``). A page cursor's read: a member that kept its score
        is on one side of every place or holds it, whatever moved meanwhile, so a walk by
        places sees it once. On one sorted set, one step at one instant."""
        ...

    async def rank(self, key: BoardKey, player_id: str, *, descending: bool) -> Placed | None:
        """The player's place, or None when the player is not on the board."""
        ...

    async def around(
        self, key: BoardKey, player_id: str, neighbors: int, *, descending: bool
    ) -> Around | None:
        """The player's rank and the rows around it, all read at one instant, so the
        player's own row is always among them; None when the player is not on the board.
        ``neighbors >= 0``."""
        ...

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[Placed | None]:
        """The place of each player, or None for one not on the board, in the order asked,
        all read at one instant, in one round trip."""
        ...

    async def count(self, key: BoardKey) -> int: ...

    async def count_between(self, key: BoardKey, bounds: Sequence[int]) -> list[int]:
        """How many members have ``bounds[i] <= score < bounds[i+1]``, for each i, read at
        one instant (a histogram of the board)."""
        ...

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        """Remove the player from these boards and refuse later writes of them there."""
        ...

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None: ...

    async def erase_player(self, player_id: str) -> int:
        """The player out of every key the index holds (``ports/erasure.py``)."""
        ...

    async def forget(self, keys: Sequence[BoardKey], player_id: str) -> None:
        """Remove the player from these boards, their versions and metadata (every
        generation's) and ban sets, refusing nothing after: an erased player, whom the
        store refuses by the hash of their id, leaves no id in the index."""
        ...

    async def sweep_erased(self, erased: Callable[[Sequence[str]], set[str]]) -> int:
        """``IndexSweep.sweep_erased`` (``ports/erasure.py``): every erased player the index
        holds, found by the hash of their id, removed; how many entries went."""
        ...

    async def replace(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> None:
        """Swap a board for exactly these entries (and versions, for versioned boards, and
        each entry's metadata) in one step (rebuild)."""
        ...

    async def entry_metadata(self, key: BoardKey, members: Sequence[str]) -> dict[str, str]:
        """The entry metadata held for these members of the board window (canonical JSON,
        ``domain/metadata.py``), none for a member without; one step."""
        ...


class Rebuilding(Protocol):
    """A board window rebuilt beside the live one, without a gap (``service/upkeep/gapless.py``, and
    docs/architecture.md, "Rebuilds without a gap"): a new generation of it, named by a
    token, filled while the live one keeps answering every read, then switched in at once.

    From ``begin_build`` until the switch (or the abort), every write of the window
    (``RankIndex.write``, ``remove``, ``ban``) is applied to both generations in the same
    step, so nothing applied meanwhile is missing from the new one. On an index split across
    shards every call covers every shard; each shard switches in one step."""

    async def begin_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        """Open a new generation of the window, held for ``ttl_s`` unless renewed; False,
        and nothing changes, while another rebuild holds the window."""
        ...

    async def keep_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        """Renew the hold; False once the generation is no longer this rebuild's (its hold
        ran out: writes since may have missed it, so it must not be switched in)."""
        ...

    async def fill_build(
        self,
        key: BoardKey,
        token: str,
        entries: Sequence[tuple[str, int]],
        *,
        descending: bool,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> int:
        """Write a page of entries (the store's) into the new generation: by the board's
        order (``GT``/``LT``: a newer total already there stays) or, with ``versions``, as
        given (a replay of the log afterwards brings back any newer one). Members banned
        are the caller's to leave out; a ban that lands meanwhile holds at the switch."""
        ...

    def built(self, token: str) -> RankIndex:
        """The new generation's reads, to compare it with the live one before the switch."""
        ...

    async def switch_build(
        self, key: BoardKey, token: str, *, expire_at: int | None, grace_s: float
    ) -> bool:
        """Make the new generation the live one in one step (each shard's), the bans
        applied to it again, the old one kept aside until ``drop_build`` (at most
        ``grace_s`` and an hour); False, and nothing changes, if the hold ran out."""
        ...

    async def drop_build(self, key: BoardKey, token: str) -> None:
        """Free what the switch kept aside of the old generation."""
        ...

    async def abort_build(self, key: BoardKey, token: str) -> None:
        """Give the window up without a switch: the new generation is freed, writes go to
        the live one alone again."""
        ...


class EntryMetadata(Protocol):
    """What the reads ask of the index beside ranks: the entry metadata of a page's rows
    (``RankIndex.entry_metadata``), kept by the same writes as the scores."""

    async def entry_metadata(self, key: BoardKey, members: Sequence[str]) -> dict[str, str]: ...


class Slice(NamedTuple):
    """Rows on one side of a place in board order (``RankIndex.page_from``): ``ahead``
    members stand strictly ahead of the place, ``on`` says whether a member holds it
    exactly, and ``rows`` are in board order. The first row behind the place is at 0-based
    rank ``ahead + on``; the first of the rows ahead of it at ``ahead - len(rows)``."""

    ahead: int
    on: bool
    rows: list[tuple[str, int]]


class Resumed(NamedTuple):
    """A page resumed from a place (``RankSource.page_from``): rows in board order, the
    0-based rank of the first (where it stands, or would, when there are none), and the
    time they stand as of."""

    first: int
    rows: list[tuple[str, int]]
    as_of: float


class MarkedScore(NamedTuple):
    """A member's score on one shard (None: not on its part) and that shard's generation
    marker read in the same atomic step (``ShardIndex.marked_score``): ``token`` None where
    the marker is gone; ``marked`` False where the index keeps no markers (the in-process
    one), so none was read."""

    score: int | None
    token: str | None
    marked: bool


class Near(NamedTuple):
    """Where a (member, score) would stand on one shard of a split board (``ShardIndex.near``):
    how many of the shard's members are strictly ahead of it in board order, and up to n of
    the shard's rows just ahead of it and just behind it, each in board order (the member
    itself left out)."""

    ahead: int
    above: list[tuple[str, int]]
    below: list[tuple[str, int]]


class Recounted(NamedTuple):
    """``ShardIndex.recount``'s answer."""

    n: int  # the shard's tally of writes that changed a score (domain/changes.py)
    moves: list[Move] | None  # (old, new) score of each since the tally asked about
    counts: list[list[int]]  # each run's counts
    generation: int = 0  # the tally's ``g`` (domain/changes.py), read with ``n``


class ShardIndex(RankIndex, Rebuilding, Protocol):
    """One shard's part of every board, when boards are split by player (``index.shards``).

    Everything a ``RankIndex`` answers, it answers about its own part (its ranks are ranks
    among its own members), and the few reads that a merge of shards needs besides. Each
    method is one step on the shard (one script, one round trip), so a split board asks
    every shard at once and waits for the slowest, not for the sum."""

    async def scores(self, key: BoardKey, members: Sequence[str]) -> list[int | None]:
        """Each member's score, or None for one not on this shard's part."""
        ...

    def built(self, token: str) -> ShardIndex:
        """This shard's part of the new generation (``Rebuilding.built``)."""
        ...

    async def ahead(
        self, key: BoardKey, probes: Sequence[tuple[str, int]], *, descending: bool
    ) -> list[int]:
        """For each (member, score): how many members of this shard's part are strictly
        ahead of it in board order. The member need not be on this shard."""
        ...

    async def near(
        self, key: BoardKey, member: str, score: int, n: int, *, descending: bool
    ) -> Near:
        """Where (member, score) would stand among this shard's part, with up to ``n`` rows
        on each side."""
        ...

    async def scores_at(
        self, key: BoardKey, ranks: Sequence[int], *, descending: bool
    ) -> list[int | None]:
        """The score at each 0-based rank of this shard's part, in board order (None past
        its end): what the aggregator samples to place a histogram's boundaries."""
        ...

    async def marked_score(self, key: BoardKey, member: str) -> MarkedScore:
        """One member's score and this shard's generation marker, in one atomic step: what
        an estimated rank reads, so that its check needs no second round trip."""
        ...

    async def recount(
        self,
        key: BoardKey,
        since: int | None,
        runs: Sequence[Sequence[int]],
        *,
        generation: int | None = None,
    ) -> Recounted:
        """In one atomic step: the shard's tally of writes ``n`` and generation ``g``, the
        moves since the tally ``since`` (None: not asked, not all held, or ``g`` is not
        ``generation``, the one read with ``since``), and ``count_between`` of each run of
        bounds. What the aggregator counts a histogram with (``domain/recount.py``)."""
        ...

    async def renew_counts(self, windows: Sequence[tuple[BoardKey, int | None]]) -> None:
        """Mark each board window's counts here as a new generation, in one step each (``g``
        moved by a bump drawn below ``domain.changes.RENEWAL``, a mark among the moves), so
        that ``recount`` and ``changes`` tell holders of counts to count afresh; a window
        with no tallies gets them, expiring at ``expire_at`` (None: the held expiry stays).
        The mender's, for a shard whose node took over or lost its data (``mender.py``)."""
        ...

    async def changes(self, key: BoardKey) -> dict[str, int]:
        """This shard's tallies of the writes that changed a score on the board window, by
        band (``domain/changes.py``), each bumped in the same atomic step as its write: what
        the aggregator reads before it counts, and a reader again to widen an estimate's
        interval by what moved since."""
        ...


class SplitBoards(Protocol):
    """What a rank index split across shards offers the read side beyond ``RankIndex``:
    how many shards, and each player's score read from their own shard alone (one call per
    shard holding any of them), the one read an estimated rank needs."""

    @property
    def shard_count(self) -> int: ...

    async def scores(self, key: BoardKey, player_ids: Sequence[str]) -> list[int | None]: ...

    async def marked_score(self, key: BoardKey, player_id: str) -> tuple[int, MarkedScore]:
        """The player's own shard (its position) and ``ShardIndex.marked_score`` there."""
        ...

    async def changes(self, key: BoardKey) -> list[dict[str, int]]:
        """Every shard's ``ShardIndex.changes``, by shard position, read at once."""
        ...


class Snapshots(Protocol):
    """Where the rank aggregator publishes what it merged of a split board (its exact top
    and its histogram, an encoded ``domain.snapshot.Snapshot``), for every API process to
    read; and the lease that keeps one aggregator active at a time.

    Fencing: ``lead`` hands out a fencing token that rises every time the lease changes
    hands, and ``publish`` keeps a snapshot only under the newest token and the lease's holder:
    an aggregator that paused past its lease cannot overwrite its successor's snapshot, even one
    handed the same number (a Redis replica promoted before the counter's last rise)."""

    async def lead(self, token: str, now: float, lease_s: float) -> int | None:
        """Take the lease, or keep it if it is already ``token``'s, until ``now + lease_s``;
        the fencing token it holds under, or None while another aggregator's lease runs."""
        ...

    async def publish(
        self, key: BoardKey, data: bytes, fence: int, ttl_s: float, token: str
    ) -> bool:
        """Keep ``data`` as the board window's snapshot for ``ttl_s`` (then none, not an old one
        forever) if ``fence`` is the newest token and the lease still ``token``'s; else False."""
        ...

    async def erase_player(self, player_id: str) -> int:
        """Drop every snapshot naming the player; the next cycle publishes it again."""
        ...

    async def sweep_erased(self, erased: Callable[[Sequence[str]], set[str]]) -> int:
        """Drop every snapshot whose top names a player ``erased`` picks out (by the hash
        of their id, ``ports/erasure.py``); the next cycle publishes it again."""
        ...

    async def read(self, key: BoardKey) -> bytes | None:
        """The board window's snapshot, or None when there is none (yet, or any more)."""
        ...

    async def stamp(self, key: BoardKey) -> bytes | None:
        """A few bytes never alike for two snapshots of the board window, so that a reader
        holding one tells cheaply whether a newer one is there; None: none kept (or unstamped)."""
        ...


class ProfileCopy(Protocol):
    """The index's copy of profiles (names, avatars, countries), so that a read shows names
    without asking the store. The copy is complete only once one copier filled it from the
    store (``begin_profiles_copy``, every profile written under a lease it keeps,
    ``end_profiles_copy``); until then, and whenever the index lost it, reads ask the store
    instead. A rank index may keep the copy beside its boards and read the rows' names in
    the same step (``Around.profiles``)."""

    async def write_profiles(self, entries: Sequence[tuple[Profile, int]]) -> int:
        """Keep each profile where its version is newer than the one held; return how many
        were kept."""
        ...

    async def profiles(self, player_ids: Sequence[str]) -> dict[str, Profile] | None:
        """The profiles held for these players (none for a player without one), or None
        while the copy is not complete."""
        ...

    async def begin_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        """Take the copy over to fill it, under a lease until ``now + lease_s``: from now on
        it is not complete. False, and nothing changes, while another copier's lease runs:
        that one is left to finish."""
        ...

    async def keep_profiles_copy(self, token: str, now: float, lease_s: float) -> bool:
        """Extend this copier's lease; False once the copy is no longer this copier's (the
        index lost it, or another took it over after the lease ran out): stop filling."""
        ...

    async def end_profiles_copy(self, token: str) -> bool:
        """Mark the copy complete, if it is still this copier's (else False: it may lack
        profiles)."""
        ...

    async def profiles_complete(self) -> bool:
        """Complete, and marked so since the index last started: a Redis restored from a
        snapshot, or a replica that took over, may hold a copy without the latest changes,
        which counts as incomplete here (reads still use it until a copier filled it
        again)."""
        ...


class Placed(NamedTuple):
    """A player's place on a board (``RankIndex.rank``, ``RankIndex.ranks``): the 0-based
    rank, the score, and whether the rank is exact (False: an estimate, invariant 6 of
    docs/architecture.md).

    A named tuple rather than a frozen dataclass: as immutable, and the friends board makes
    one per friend (up to a thousand a read), where a frozen dataclass cost 0.4 us more each.
    """

    rank: int
    score: int
    exact: bool


@dataclass(frozen=True, slots=True)
class Around:
    """A player's place on a board with the rows around it (``RankIndex.around``): their
    0-based rank and score, the rows at ranks ``max(0, rank - neighbors)`` to
    ``rank + neighbors`` in board order, and, when the index's copy of profiles is complete,
    the profiles of those rows' players read in the same step (None otherwise). ``exact``
    (keyword only) says whether the rank is exact (False: an estimate, invariant 6 of
    docs/architecture.md); ``as_of``, when the rows are not the index's now but an older
    reading of it (the aggregator's snapshot, ``RankSource.around``); ``metadata``, the rows'
    entry metadata where the index read it in the same step."""

    rank: int
    score: int
    rows: list[tuple[str, int]]
    profiles: dict[str, Profile] | None
    exact: bool = field(kw_only=True)
    as_of: float | None = field(default=None, kw_only=True)
    # the rows' entry metadata read in the same step (None: not read; the reads ask for it);
    # a side read, left out of equality (the index contract checks it on its own)
    metadata: dict[str, str] | None = field(default=None, kw_only=True, compare=False)
    # the index's generation markers as ``Generations.tokens`` gives them, read in the same
    # atomic step as the rows (None: not read), so that the read's check needs no second
    # round trip (service/ranks/marked.py); a side read, left out of equality
    generation: tuple[str | None, ...] | None = field(default=None, kw_only=True, compare=False)


@dataclass(frozen=True, slots=True)
class Estimated:
    """A rank below the exact top, estimated (invariant 6 of docs/architecture.md): the true
    rank at the moment of the read lies in ``[estimate.low, estimate.high]`` (1-based, as
    shown): the counts as of ``as_of``, widened by every write since (``domain/changes.py``)."""

    estimate: Estimate
    top_percent: float
    score: int
    as_of: float
    # the generation markers of the shards the read asked, by shard position, read in the
    # same atomic step as the score (None: not read), so that the read's check needs no
    # second round trip (service/ranks/marked.py); a side read, left out of equality
    generation: dict[int, str | None] | None = field(default=None, kw_only=True, compare=False)


class Top(NamedTuple):
    """Rows of a board's exact top in board order (``RankSource.top``), and the time they
    stand as of."""

    rows: list[tuple[str, int]]
    as_of: float


class Spread(NamedTuple):
    """How many players hold how many points (``RankSource.spread``): ``players`` on the
    board, and ``buckets`` of (lowest points, highest points, players), each inclusive,
    as of ``as_of``; ``exact`` False where the counts are estimated."""

    players: int
    buckets: list[tuple[int, int, int]]
    as_of: float
    exact: bool


class RankSource(Protocol):
    """How the read side ranks a live board window, whatever the index is made of.

    Two implementations, of which bootstrap picks one: counted on the rank index
    (``counted.py``; one sorted set, or a board split across shards counted exactly on
    every shard), and the aggregator's snapshot of a board split across shards, with ranks
    below its exact top estimated from its histogram (``service/ranks/snapshot.py``), which counts
    on the index whatever its snapshot cannot answer. Ranks are 0-based, as the index's."""

    async def top(self, spec: BoardSpec, key: BoardKey, start: int, stop: int) -> Top:
        """Rows ``start..stop`` inclusive, inside the board's exact top."""
        ...

    async def page_from(
        self, spec: BoardSpec, key: BoardKey, at: tuple[str, int], n: int, before: bool
    ) -> Resumed:
        """Up to ``n`` rows just behind the place ``at`` in board order (with ``before``:
        just ahead of it), as ``RankIndex.page_from``, and the exact rank of the first;
        the caller keeps them inside the exact top."""
        ...

    async def around(
        self, spec: BoardSpec, key: BoardKey, player_id: str, neighbors: int
    ) -> Around | Estimated | None:
        """The player's rank and the rows around it (as ``RankIndex.around``), or, below
        the exact top of a board that estimates there, an estimate without neighbors; None
        when the player is not on the board."""
        ...

    async def places(
        self, spec: BoardSpec, key: BoardKey, player_ids: Sequence[str]
    ) -> list[Placed | None]:
        """Each player's place on the whole board, exact or estimated as each says, in the
        order asked (None: not on the board); the friends board's read."""
        ...

    async def shared_ranks(
        self, spec: BoardSpec, key: BoardKey, scores: Sequence[int]
    ) -> dict[int, int]:
        """The 1-based shared rank of each score: one plus how many members are strictly
        ahead of it, counted at one instant."""
        ...

    async def spread(self, spec: BoardSpec, key: BoardKey, buckets: int) -> Spread:
        """At most ``buckets`` equal-width point buckets from the lowest total on the board
        to the highest, and how many players hold each."""
        ...

    async def version(self, key: BoardKey, stop: int) -> bytes | None:
        """What the board window's top page ending at 0-based row ``stop`` is read from, as
        a token that changes when it does (a split board's snapshot's stamp, or a time slot
        for its first rows, counted on the shards), so that a page held by it is read again
        as soon as a newer one is there; None: pages are held for ``page_cache_s`` alone."""
        ...

    def forget(self, changed_at: float | None = None) -> None:
        """Drop what is held; ``changed_at``: the index changed then (a ban, a rebuild), so
        nothing read before it may answer again."""
        ...
