"""A player's data on a store split by player (``ports/erasure.py``).

A player's rows may be on more than one database (a bucket moved while the player played,
or being moved), and the home holds what is global (final standings, tournaments' entrants,
league tiers, the erasure records). So an export reads every database and merges each
section by its key, each key once, and an erasure runs the same transaction on every
database; the hash of an erased id is kept on each, so that each refuses the player by
itself, as it does a ban. The erasure records live on the home database, and so does the
key of the hashes the store generated where ``[store] erasure_secret`` is empty: every
other database's store asks the home for it once, then keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

from podium.domain.erasure import Erasure, Step
from podium.ports.erasure import ExportRow
from podium.store.erasure import added
from podium.store.split.routing import Part
from podium.util.aio import gather_all


class PlayerData(Part):
    @property
    def erasure_secret(self) -> str:
        return self.router.erasure_secret

    @erasure_secret.setter
    def erasure_secret(self, secret: str) -> None:
        self.router.erasure_secret = secret
        for url in self.router.urls_known():
            self.router.db(url).erasure_secret = secret

    async def erasure_key(self) -> str:
        # The home's: every other database's store asks it too (routing.py's ``db``).
        return await self.router.home.erasure_key()

    async def erased_digests(self) -> set[str]:
        # The home keeps every hash (open_erasure writes it there first).
        return await self.router.home.erased_digests()

    def _all_dbs(self) -> list[str]:
        return list(dict.fromkeys([self.router.home_url, *self.router.urls()]))

    async def export_page(
        self, player_id: str, section: str, after: str, limit: int
    ) -> list[tuple[str, ExportRow]]:
        await self.router.ready()
        pages = await gather_all(
            self.router.db(u).export_page(player_id, section, after, limit) for u in self._all_dbs()
        )
        # Past the last key of a full page a database may hold rows not read yet.
        full = [p[-1][0] for p in pages if p and len(p) >= limit]
        cut = min(full) if full else None
        rows = {k: r for p in pages for k, r in p if cut is None or k <= cut}
        return [(k, rows[k]) for k in sorted(rows)][:limit]

    async def erase_rows(self, player_id: str, pseudonym: str) -> dict[str, int]:
        await self.router.ready()
        parts = await gather_all(
            self.router.db(u).erase_rows(player_id, pseudonym) for u in self._all_dbs()
        )
        counts: dict[str, int] = {}
        for part in parts:
            counts = added(counts, part)
        return counts

    async def erased(self, player_ids: Sequence[str]) -> set[str]:
        # Each player's own database (every one holds every erased hash, as ``banned``
        # reads it): a match is refused or recorded without the home, which may be down
        # while keys already verified keep recording.
        parts = await self.router.by_player(player_ids, lambda db, ids: db.erased(ids))
        return set().union(*parts)

    async def open_erasure(self, erasure: Erasure) -> Erasure:
        await self.router.ready()
        held = await self.router.home.open_erasure(erasure)
        await gather_all(
            self.router.db(u).note_erased(held.digest, held.requested_at) for u in self._all_dbs()
        )
        return held

    async def erasure(self, erasure_id: str) -> Erasure | None:
        return await self.router.home.erasure(erasure_id)

    # The records and their leases live on the home database: one claim there, atomic as
    # on a single database.
    async def claim_erasures(
        self, owner: str, now: float, lease_s: float, limit: int, only: str = ""
    ) -> list[Erasure]:
        return await self.router.home.claim_erasures(owner, now, lease_s, limit, only)

    async def renew_erasure(self, erasure_id: str, owner: str, now: float, lease_s: float) -> bool:
        return await self.router.home.renew_erasure(erasure_id, owner, now, lease_s)

    async def advance_erasure(
        self,
        erasure_id: str,
        owner: str,
        step: Step,
        counts: dict[str, int],
        now: float,
        lease_s: float,
    ) -> bool:
        return await self.router.home.advance_erasure(erasure_id, owner, step, counts, now, lease_s)

    async def renamed_windows(self, pseudonym: str) -> list[tuple[str, str, str | None]]:
        await self.router.ready()
        parts = await gather_all(
            self.router.db(u).renamed_windows(pseudonym) for u in self._all_dbs()
        )
        found: dict[tuple[str, str], str | None] = {}
        for part in parts:
            for board, window, archive in part:
                found[(board, window)] = found.get((board, window)) or archive
        return [(b, w, a) for (b, w), a in sorted(found.items())]
