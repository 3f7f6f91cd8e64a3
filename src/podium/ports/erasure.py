"""A player's data, exported and erased (issue 35): what the store, the rank index and the
archive each do for it. The eraser (``service/erasure.py``) drives them in the steps of
``domain.erasure.Step``; every call here is idempotent, so a step killed midway is done
again from its start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from podium.domain.erasure import Erasure, Step

ExportRow = dict[str, Any]


class PlayerData(Protocol):
    """The store's side: a player's rows a page at a time, their erasure in one
    transaction per database, and the durable record of each erasure."""

    erasure_secret: str  # [store] erasure_secret as configured ('' : the store's own)

    async def erasure_key(self) -> str:
        """The key of the hashes kept of erased ids: ``erasure_secret`` when set, else one
        the store generated once and keeps (on a split store, on the home database), the
        same for every process from then on (docs/architecture.md §9)."""
        ...

    async def erased_digests(self) -> set[str]:
        """The keyed hash of every erased id: what a sweep of the index compares the ids it
        finds with (``domain.erasure.erased_among``), never an id."""
        ...

    async def export_page(
        self, player_id: str, section: str, after: str, limit: int
    ) -> list[tuple[str, ExportRow]]:
        """Up to ``limit`` rows of one section (``domain.erasure.EXPORT_SECTIONS``), each
        with its key, in key order after ``after`` ('' from the first)."""
        ...

    async def erase_rows(self, player_id: str, pseudonym: str) -> dict[str, int]:
        """Every row of the player deleted, or given ``pseudonym`` where another player's
        record depends on it; how many rows of each kind. Again: all zero."""
        ...

    async def erased(self, player_ids: Sequence[str]) -> set[str]:
        """Which of these players were erased (their keyed hash is kept)."""
        ...

    async def open_erasure(self, erasure: Erasure) -> Erasure:
        """Record an erasure and the hash of its id (in one transaction), unless one of
        that hash is recorded already: then that one, unchanged."""
        ...

    async def erasure(self, erasure_id: str) -> Erasure | None: ...

    async def claim_erasures(
        self, owner: str, now: float, lease_s: float, limit: int, only: str = ""
    ) -> list[Erasure]:
        """Up to ``limit`` erasures not done, oldest first, that no other eraser holds (free,
        or their lease ended by ``now``: the eraser that held it died), taken for ``owner``
        until ``now + lease_s``, atomically: two erasers claiming at once never get one
        record both. ``only``: that erasure alone. One ``owner`` holds already: its again."""
        ...

    async def renew_erasure(self, erasure_id: str, owner: str, now: float, lease_s: float) -> bool:
        """The lease held until ``now + lease_s`` while ``owner`` holds it (during a long
        step); False when it does not (any more): it stops carrying the erasure."""
        ...

    async def advance_erasure(
        self,
        erasure_id: str,
        owner: str,
        step: Step,
        counts: dict[str, int],
        now: float,
        lease_s: float,
    ) -> bool:
        """Note a step done while ``owner`` holds the record: the next ``step`` and the counts
        so far, the lease renewed until ``now + lease_s``. At ``Step.DONE``, the id and the
        pseudonym are forgotten, ``done_at`` set and the lease cleared. False, and nothing
        written, when ``owner`` no longer holds it (its lease ended and another eraser took
        it, which goes on from the last step noted) or it is done."""
        ...

    async def renamed_windows(self, pseudonym: str) -> list[tuple[str, str, str | None]]:
        """(board, window, archive file) of every frozen window whose standings hold the
        pseudonym: the standings files to write again."""
        ...

    async def set_archive(self, board: str, window: str, archive: str, checksum: str) -> None: ...


class IndexErasure(Protocol):
    """The rank index's side: every copy of the player it holds, gone."""

    async def erase_player(self, player_id: str) -> int:
        """Remove the player from every key: boards of every window (cohorts and
        tournaments included), their versions, metadata and ban sets, the copy of
        profiles, and any snapshot naming them (the aggregator publishes it again). How
        many entries it removed; again: 0."""
        ...


# Which of a batch of ids are erased (``domain.erasure.erased_among`` under the store's key
# and hashes): what a sweep of the index asks of each page of ids it reads.
ErasedAmong = Callable[[Sequence[str]], set[str]]


class IndexSweep(Protocol):
    """The rank index swept for erased players by the hash of each id it holds, since the
    erasure keeps no id once it is done: what a Redis replica promoted without the
    erasure's deletes brought back (docs/architecture.md §9)."""

    async def sweep_erased(self, erased: ErasedAmong) -> int:
        """Every place that names a player (boards of every window and generation, their
        versions, metadata and ban sets, the copy of profiles) read a page at a time, and
        the ids ``erased`` picks out of each page removed; how many entries went."""
        ...


class ArchiveErasure(Protocol):
    """The archive's side: archived results and frozen standings files."""

    def archived_results(self, player_id: str) -> Iterator[dict[str, Any]]:
        """The player's rows in the day files of pruned results (blocking: run in a thread)."""
        ...

    def drop_results(self, player_id: str) -> int:
        """Every day file holding the player written again without their rows, with a new
        manifest, the old file replaced; how many rows went (blocking)."""
        ...

    def rename_in_standings(
        self, name: str, player_id: str, pseudonym: str
    ) -> tuple[bool, str | None]:
        """A standings file written again with the pseudonym for the player, positions and
        points unchanged, with a new manifest: whether it was written (not when it does
        not name the player: written already), and the sha256 of the file as it is now
        (None: no such file). Blocking."""
        ...
