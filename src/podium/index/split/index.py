"""A board split by player across index shards (``index.shards``), as one ``RankIndex``.

Each player lives on one shard (``domain.sharding.shard_of``), so a write touches only the
writer's shard, and a read that needs the whole board asks every shard at once (one call
each, concurrently: a read waits for the slowest shard, not for the sum) and merges the
answers in the one board order (invariant 4 of docs/architecture.md), so that a merged page
lists exactly what one sorted set holding every shard's members would.

Every answer here is exact: a rank is the number of members strictly ahead of the player,
counted on every shard. The cheaper answers of a split board (slices of the aggregator's
merged top, estimates from its histogram) are the read side's (``service/ranks/snapshot.py``),
which uses this class where it needs exactness. Reads of several shards are not one instant: a
result landing on one shard between two shards' answers may show in one and not the other, by
at most the writes of that moment.

The shards are ``ShardIndex`` adapters (a ``MemoryIndex`` each, or a ``RedisIndex`` per hash
tag sharing one client, on one Redis or a Redis Cluster); this module knows only the port.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from itertools import islice

from podium.domain import cohorts
from podium.domain.boards import merge_in_board_order
from podium.domain.models import Profile
from podium.domain.sharding import shard_of
from podium.index.reads import ComposedReads
from podium.index.split.profiles import SplitProfileCopy
from podium.ports import BoardKey, MarkedScore, Meta, Near, Placed, ProfileCopy, ShardIndex, Slice
from podium.ports.erasure import ErasedAmong
from podium.ports.status import IndexNode


class SplitIndex(ComposedReads):
    def __init__(
        self,
        shards: Sequence[ShardIndex],
        close: Callable[[], Awaitable[None]] | None = None,
        copies: Sequence[ProfileCopy] | None = None,
    ) -> None:
        if not shards:
            raise ValueError("a split index needs at least one shard")
        self.shards = list(shards)
        self._close = close
        # The copy of profiles, each shard's beside its boards (index/split/profiles.py).
        self.copy = SplitProfileCopy(copies) if copies else None

    @property
    def shard_count(self) -> int:
        return len(self.shards)

    def shard_of(self, player_id: str) -> int:
        return shard_of(player_id, len(self.shards))

    def _home(self, key: BoardKey) -> int | None:
        """The one shard a league cohort's key lives on (``domain.cohorts.cohort_shard``):
        a cohort is small and read whole, so it is one sorted set, never split by player."""
        if cohorts.parse(key.window) is None:
            return None
        return cohorts.cohort_shard(key.board, key.window, len(self.shards))

    def _of(self, key: BoardKey) -> list[ShardIndex]:
        """The shards that hold ``key``: every one, or a cohort's own."""
        home = self._home(key)
        return self.shards if home is None else [self.shards[home]]

    def _by_shard(self, key: BoardKey, members: Sequence[str]) -> dict[int, list[int]]:
        """Positions of ``members`` grouped by the shard that holds them on ``key``."""
        home = self._home(key)
        if home is not None:
            return {home: list(range(len(members)))} if members else {}
        groups: dict[int, list[int]] = {}
        for i, m in enumerate(members):
            groups.setdefault(self.shard_of(m), []).append(i)
        return groups

    async def ping(self) -> None:
        await asyncio.gather(*(s.ping() for s in self.shards))

    async def nodes(self) -> list[IndexNode]:
        found = await asyncio.gather(*(s.nodes() for s in self.shards))
        # Numbered by position here: an in-process shard does not know its own number.
        return [dataclasses.replace(n, shard=i) for i, part in enumerate(found) for n in part]

    async def close(self) -> None:
        if self._close is not None:
            await self._close()
        else:
            for s in self.shards:
                await s.close()

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
        groups = self._by_shard(key, [m for m, _ in entries])
        written = await asyncio.gather(
            *(
                self.shards[s].write(
                    key,
                    [entries[i] for i in at],
                    descending=descending,
                    expire_at=expire_at,
                    versions=None if versions is None else [versions[i] for i in at],
                    metadata=None if metadata is None else [metadata[i] for i in at],
                )
                for s, at in groups.items()
            )
        )
        return sum(written)

    async def remove(
        self,
        key: BoardKey,
        members: Sequence[str],
        versions: Sequence[int],
        *,
        expire_at: int | None,
    ) -> int:
        groups = self._by_shard(key, members)
        removed = await asyncio.gather(
            *(
                self.shards[s].remove(
                    key, [members[i] for i in at], [versions[i] for i in at], expire_at=expire_at
                )
                for s, at in groups.items()
            )
        )
        return sum(removed)

    async def page(
        self, key: BoardKey, start: int, stop: int, *, descending: bool
    ) -> list[tuple[str, int]]:
        """Ranks ``start..stop``: each shard's first ``stop + 1`` rows, merged. Costs every
        shard the whole depth, which is why pages stop at the exact top and the aggregator
        serves them from its snapshot."""
        if start > stop:
            return []
        parts = await asyncio.gather(
            *(s.page(key, 0, stop, descending=descending) for s in self._of(key))
        )
        return list(islice(merge_in_board_order(parts, descending), start, stop + 1))

    async def page_from(
        self, key: BoardKey, at: tuple[str, int], n: int, *, descending: bool, before: bool
    ) -> Slice:
        """Each shard's ``n`` rows on that side of the place, merged, the nearest ``n``
        kept; its count ahead of the place summed (exact, counted on every shard), and held
        by whichever shard holds it. Board order is one total order on (score, member) on
        every shard, so the rows beside the place on each shard are exactly the merged
        board's rows beside it: S * n rows whatever the depth."""
        if n < 0:
            raise ValueError(f"page_from: n must not be negative, not {n}")
        parts = await asyncio.gather(
            *(s.page_from(key, at, n, descending=descending, before=before) for s in self._of(key))
        )
        if before:  # the nearest n ahead: the merge run from the place outwards, reversed
            outwards = ((p.rows[::-1] for p in parts), not descending)
            rows = list(islice(merge_in_board_order(*outwards), n))[::-1]
        else:
            rows = list(islice(merge_in_board_order((p.rows for p in parts), descending), n))
        return Slice(sum(p.ahead for p in parts), any(p.on for p in parts), rows)

    async def scores(self, key: BoardKey, player_ids: Sequence[str]) -> list[int | None]:
        """Each player's score, read from their own shard (one call per shard holding any
        of them)."""
        groups = self._by_shard(key, player_ids)
        found = await asyncio.gather(
            *(self.shards[s].scores(key, [player_ids[i] for i in at]) for s, at in groups.items())
        )
        out: list[int | None] = [None] * len(player_ids)
        for at, scores in zip(groups.values(), found, strict=True):
            for i, score in zip(at, scores, strict=True):
                out[i] = score
        return out

    async def marked_score(self, key: BoardKey, player_id: str) -> tuple[int, MarkedScore]:
        """The player's shard, and their score there with its marker read in the same step."""
        home = self._home(key)
        shard = self.shard_of(player_id) if home is None else home
        return shard, await self.shards[shard].marked_score(key, player_id)

    async def changes(self, key: BoardKey) -> list[dict[str, int]]:
        """Every shard's tallies, in shard order, as the aggregator reads them."""
        return list(await asyncio.gather(*(s.changes(key) for s in self.shards)))

    async def ranks(
        self, key: BoardKey, player_ids: Sequence[str], *, descending: bool
    ) -> list[Placed | None]:
        """Scores from each player's shard, then, for all of them at once, how many are
        ahead on every shard: two steps, each one call per shard."""
        scores = await self.scores(key, player_ids)
        probes = [(p, s) for p, s in zip(player_ids, scores, strict=True) if s is not None]
        if not probes:
            return [None] * len(player_ids)
        counts = await asyncio.gather(
            *(s.ahead(key, probes, descending=descending) for s in self._of(key))
        )
        ahead = [sum(c) for c in zip(*counts, strict=True)]
        placed = iter(Placed(a, s, True) for a, (_, s) in zip(ahead, probes, strict=True))
        return [None if s is None else next(placed) for s in scores]

    async def near(
        self, key: BoardKey, member: str, score: int, n: int, *, descending: bool
    ) -> Near:
        """Every shard's count ahead of (member, score) summed, and its rows on each side
        merged, the closest ``n`` kept: exact, counted on every shard (``around``'s step,
        ``index/reads.py``)."""
        parts = await asyncio.gather(
            *(s.near(key, member, score, n, descending=descending) for s in self._of(key))
        )
        above = list(merge_in_board_order((p.above for p in parts), descending))
        below = list(islice(merge_in_board_order((p.below for p in parts), descending), n))
        return Near(sum(p.ahead for p in parts), above[len(above) - min(n, len(above)) :], below)

    async def _beside(
        self, key: BoardKey, members: list[str]
    ) -> tuple[dict[str, Profile] | None, dict[str, str]]:
        """The rows' names from the copy of profiles, where it is complete, and their
        metadata, for ``around``: each lives on its row's own shard, so one more step, taken
        at once on the shards holding those rows."""
        names, meta = await asyncio.gather(self._names(members), self.entry_metadata(key, members))
        return names, meta

    async def _names(self, members: list[str]) -> dict[str, Profile] | None:
        return None if self.copy is None else await self.copy.profiles(members)

    async def entry_metadata(self, key: BoardKey, members: Sequence[str]) -> dict[str, str]:
        """Each member's metadata from their own shard (one call per shard holding any)."""
        groups = self._by_shard(key, members)
        found = await asyncio.gather(
            *(
                self.shards[s].entry_metadata(key, [members[i] for i in at])
                for s, at in groups.items()
            )
        )
        return {m: text for part in found for m, text in part.items()}

    async def count(self, key: BoardKey) -> int:
        return sum(await asyncio.gather(*(s.count(key) for s in self._of(key))))

    async def count_between(self, key: BoardKey, bounds: Sequence[int]) -> list[int]:
        parts = await asyncio.gather(*(s.count_between(key, bounds) for s in self._of(key)))
        return [sum(c) for c in zip(*parts, strict=True)]

    def _keys_by_shard(self, keys: Sequence[BoardKey], player_id: str) -> dict[int, list[BoardKey]]:
        """The player's keys by the shard each is on: theirs, a cohort's its own."""
        mine = self.shard_of(player_id)
        out: dict[int, list[BoardKey]] = {}
        for k in keys:
            home = self._home(k)
            out.setdefault(mine if home is None else home, []).append(k)
        return out

    async def ban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        groups = self._keys_by_shard(keys, player_id)
        await asyncio.gather(*(self.shards[s].ban(ks, player_id) for s, ks in groups.items()))

    async def unban(self, keys: Sequence[BoardKey], player_id: str) -> None:
        groups = self._keys_by_shard(keys, player_id)
        await asyncio.gather(*(self.shards[s].unban(ks, player_id) for s, ks in groups.items()))

    async def forget(self, keys: Sequence[BoardKey], player_id: str) -> None:
        groups = self._keys_by_shard(keys, player_id)
        await asyncio.gather(*(self.shards[s].forget(ks, player_id) for s, ks in groups.items()))

    async def sweep_erased(self, erased: ErasedAmong) -> int:
        """Each shard in turn (one at a time: a sweep is background work, kept gentle on
        the Redis the shards share); on Redis a shard sweeps the keys of its number in
        every layout (``index/redis/erasure.py``)."""
        gone = 0
        for shard in self.shards:
            gone += await shard.sweep_erased(erased)
        return gone

    async def erase_player(self, player_id: str) -> int:
        """On every shard: a player's rows live on one, but a reshard's other layout, and a
        key left from before one, may hold them elsewhere."""
        gone = await asyncio.gather(*(s.erase_player(player_id) for s in self.shards))
        return sum(gone)

    async def replace(
        self,
        key: BoardKey,
        entries: Sequence[tuple[str, int]],
        *,
        expire_at: int | None,
        versions: Sequence[int] | None = None,
        metadata: Sequence[Meta] | None = None,
    ) -> None:
        """Every shard swaps its part for exactly its players' entries (an empty part too,
        so that a shard left with nobody is emptied). Each shard swaps in one step; the
        shards swap one after another within moments, not at one instant."""
        groups = self._by_shard(key, [m for m, _ in entries])
        await asyncio.gather(
            *(
                shard.replace(
                    key,
                    [entries[i] for i in groups.get(n, [])],
                    expire_at=expire_at,
                    versions=None if versions is None else [versions[i] for i in groups.get(n, [])],
                    metadata=None if metadata is None else [metadata[i] for i in groups.get(n, [])],
                )
                for n, shard in enumerate(self.shards)
                if self._home(key) in (None, n)
            )
        )

    # -- rebuilds beside the live generation (ports/index.py: Rebuilding) ------------------

    async def begin_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        """Every shard's part opened at once; if any shard refuses (another rebuild holds
        it), those opened are given up again."""
        opened = await asyncio.gather(*(s.begin_build(key, token, ttl_s) for s in self.shards))
        if all(opened):
            return True
        await asyncio.gather(
            *(s.abort_build(key, token) for s, ok in zip(self.shards, opened, strict=True) if ok)
        )
        return False

    async def keep_build(self, key: BoardKey, token: str, ttl_s: float) -> bool:
        kept = await asyncio.gather(*(s.keep_build(key, token, ttl_s) for s in self.shards))
        return all(kept)

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
        """Each shard's players of the page written to that shard, every shard at once."""
        groups = self._by_shard(key, [m for m, _ in entries])
        filled = await asyncio.gather(
            *(
                self.shards[s].fill_build(
                    key,
                    token,
                    [entries[i] for i in at],
                    descending=descending,
                    versions=None if versions is None else [versions[i] for i in at],
                    metadata=None if metadata is None else [metadata[i] for i in at],
                )
                for s, at in groups.items()
            )
        )
        return sum(filled)

    def built(self, token: str) -> SplitIndex:
        return SplitIndex([s.built(token) for s in self.shards], close=_nothing)

    async def switch_build(
        self, key: BoardKey, token: str, *, expire_at: int | None, grace_s: float
    ) -> bool:
        """Every shard switched at once, each in one step: a read between two shards'
        switches sees each shard's part whole, old or new, both written alike meanwhile.
        Every shard's hold is renewed first: if any ran out, none is switched (False)."""
        if not await self.keep_build(key, token, _SWITCH_HOLD_S):
            return False
        done = await asyncio.gather(
            *(s.switch_build(key, token, expire_at=expire_at, grace_s=grace_s) for s in self.shards)
        )
        return all(done)

    async def drop_build(self, key: BoardKey, token: str) -> None:
        await asyncio.gather(*(s.drop_build(key, token) for s in self.shards))

    async def abort_build(self, key: BoardKey, token: str) -> None:
        await asyncio.gather(*(s.abort_build(key, token) for s in self.shards))


_SWITCH_HOLD_S = 30.0  # the holds renewed just before a switch, for the moments it takes


async def _nothing() -> None:
    """A view shares its shards' client: closing it closes nothing."""
