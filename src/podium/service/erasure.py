"""A player's data: everything podium holds on them as one JSON document, and their erasure
(issue 35, docs/architecture.md §9).

The export is streamed: a generator over the store's pages, section by section, then the
archived results read from the day files, so that a player with 100,000 results is never
held in memory at once. Its schema is docs/export.md.

An erasure is answered at once with a receipt: the store records it and the keyed hash of
the id in one transaction (from then on the player's new results are refused and the
updaters skip the log's changes of them, as they skip a ban). The eraser role carries it out
in the steps of ``domain.erasure.Step``, each idempotent and noted when done, so a process
killed at any moment resumes at the step it was in. The last step forgets the id and the
pseudonym: the record keeps the hash, when, by which key, and the counts.

Since no id is kept after that, what brings an erased player back into the index later (a
Redis replica promoted without the erasure's deletes) is found by the hash of each id the
index holds: ``sweep_erased``, run by the mender after a failover and by the reconciler
now and then (docs/architecture.md §9).

Knows the ports, never an adapter.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from podium.config.settings import Settings
from podium.domain.erasure import (
    EXPORT_SECTIONS,
    Erasure,
    Step,
    erased_among,
    erased_digest,
    next_step,
    pseudonym,
    receipt_id,
)
from podium.domain.validation import id_problem
from podium.domain.windows import to_rfc3339
from podium.errors import InvalidInput
from podium.ports import Clock
from podium.ports.erasure import ArchiveErasure, IndexErasure, IndexSweep, PlayerData
from podium.ports.store import Windows

log = logging.getLogger("podium.erasure")

PAGE = 1000  # rows of a section read at a time
JSON_COLUMNS = {"metadata", "data"}  # columns that hold a JSON document as text


class ErasureStore(PlayerData, Windows, Protocol):
    """The store's part: the player's rows, the erasure records, the frozen windows'
    archive names (``set_archive``)."""


class ErasedHashes(Protocol):
    """What a sweep reads of the store: the key of the hashes and every hash kept."""

    async def erasure_key(self) -> str: ...

    async def erased_digests(self) -> set[str]: ...


async def sweep_erased(store: ErasedHashes, indexes: Sequence[IndexSweep]) -> int:
    """Every erased player the index holds, found by the keyed hash of each id it holds
    (``domain.erasure.erased_among``) and removed: the copies a promoted replica brought
    back after the erasure forgot the id. No erasure ever: one read of the store, and the
    index is not walked. How many entries went; logged by count, never by id."""
    digests = await store.erased_digests()
    if not digests:
        return 0
    key = await store.erasure_key()

    def erased(ids: Sequence[str]) -> set[str]:
        return erased_among(key, digests, ids)

    gone = 0
    for index in indexes:
        gone += await index.sweep_erased(erased)
    if gone:
        log.warning("swept %d index entries of erased players back out of the index", gone)
    return gone


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _row(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if k in JSON_COLUMNS and isinstance(v, str):
            v = json.loads(v)
        out[_camel(k)] = v
    return out


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def check_player(player_id: str) -> None:
    if why := id_problem("playerId", player_id):
        raise InvalidInput(why)


class Erasures:
    def __init__(
        self,
        settings: Settings,
        store: ErasureStore,
        indexes: Sequence[IndexErasure],
        files: ArchiveErasure | None,
        clock: Clock,
        log: IndexErasure | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.indexes = list(indexes)  # the rank index, and the aggregator's snapshots
        self.files = files
        self.clock = clock
        self.log = log  # a stream that keeps the player's messages (JetStream), or None
        # how long after the store's step its rows and the index are swept again
        self.settle_s = settings.workers.erasure_settle_s

    # -- the export ----------------------------------------------------------------------

    async def export(self, player_id: str) -> AsyncIterator[bytes]:
        """The document, a chunk at a time (docs/export.md). Checks the id before the first
        chunk, so a bad one is a 422 rather than a broken stream."""
        check_player(player_id)
        erased = bool(await self.store.erased([player_id]))
        return self._chunks(player_id, erased)

    async def _chunks(self, player_id: str, erased: bool) -> AsyncIterator[bytes]:
        head = {
            "format": "podium.player-export/1",
            "playerId": player_id,
            "exportedAt": to_rfc3339(self.clock.now()),
            "erased": erased,
        }
        yield _dumps(head)[:-1]
        for section in EXPORT_SECTIONS:
            yield b',"' + section.encode() + b'":['
            after, first = "", True
            while True:
                page = await self.store.export_page(player_id, section, after, PAGE)
                if not page:
                    break
                chunk = b",".join(_dumps(_row(r)) for _, r in page)
                yield chunk if first else b"," + chunk
                first = False
                after = page[-1][0]
                if len(page) < PAGE:
                    break
            yield b"]"
        yield b',"archivedResults":['
        if self.files is not None:
            first = True
            async for r in self._archived(player_id):
                yield (b"" if first else b",") + _dumps(_row(r))
                first = False
        yield b"]}"

    async def _archived(self, player_id: str) -> AsyncIterator[dict[str, Any]]:
        assert self.files is not None
        rows = self.files.archived_results(player_id)
        done = object()
        while True:  # each row read in a thread: a day file is read from disk
            batch = await asyncio.to_thread(lambda: [next(rows, done) for _ in range(PAGE)])
            for r in batch:
                if r is done:
                    return
                assert isinstance(r, dict)
                yield r

    # -- the erasure ---------------------------------------------------------------------

    async def request(self, player_id: str, by_key: str) -> Erasure:
        """Record the erasure (or find the one of this id already recorded): from the
        moment this returns, the player's new results are refused."""
        check_player(player_id)
        wanted = Erasure(
            id=receipt_id(),
            digest=erased_digest(await self.store.erasure_key(), player_id),
            player_id=player_id,
            pseudonym=pseudonym(),
            step=Step.INDEX,  # the gate is this very record and its hash
            requested_at=self.clock.now(),
            requested_by=by_key,
        )
        return await self.store.open_erasure(wanted)

    async def status(self, erasure_id: str) -> Erasure | None:
        return await self.store.erasure(erasure_id)

    async def erase_due(self) -> int:
        """The eraser role's step: every erasure not done carried out to its end; how many."""
        due = await self.store.erasures_due(10)
        for e in due:
            await self.carry_out(e)
        return len(due)

    async def carry_out(self, e: Erasure) -> None:
        step, counts = e.step, dict(e.counts)
        while step is not Step.DONE:
            if e.player_id is None:  # only DONE clears it
                break
            counts = _added(counts, await self._do(step, e.player_id, e.pseudonym))
            step = next_step(step)
            await self.store.advance_erasure(e.id, step, counts, self.clock.now())
        log.info("erasure %s done: %s", e.id, counts)  # the receipt, never the id

    async def _do(self, step: Step, player_id: str, name: str) -> dict[str, int]:
        if step is Step.GATE:
            return {}
        if step is Step.INDEX:
            return {"indexEntries": await self._erase_index(player_id)}
        if step is Step.STORE:
            counts = await self.store.erase_rows(player_id, name)
            return counts | await self._erase_log(player_id)
        if step is Step.ARCHIVE:
            return await self._erase_files(player_id, name)
        # SETTLE: a record or an index write that began before the gate and ended after
        # the steps above is caught by a sweep once it must have ended; a freeze that read
        # the player's tally before the store's step, by its standings renamed again.
        await asyncio.sleep(self.settle_s)
        again = await self.store.erase_rows(player_id, name)
        more = await self._erase_index(player_id)
        log_again = (await self._erase_log(player_id)).get("logMessages", 0)
        files = await self._erase_files(player_id, name, days=False)
        return {
            "settleRows": sum(again.values()),
            "settleIndexEntries": more,
            "settleLogMessages": log_again,
            "settleStandingsFiles": files.get("standingsFiles", 0),
        }

    async def _erase_log(self, player_id: str) -> dict[str, int]:
        """The stream's messages naming the player, after the outbox rows: none is relayed
        since (an outbox log keeps nothing but those rows; Kafka keeps its records until
        its retention, docs/architecture.md §9)."""
        if self.log is None:
            return {}
        return {"logMessages": await self.log.erase_player(player_id)}

    async def _erase_index(self, player_id: str) -> int:
        gone = 0
        for index in self.indexes:
            gone += await index.erase_player(player_id)
        return gone

    async def _erase_files(self, player_id: str, name: str, days: bool = True) -> dict[str, int]:
        """The day files without the player (``days``), and every standings file that
        holds the pseudonym's window written with it."""
        if self.files is None:
            return {}
        files = self.files
        archived = await asyncio.to_thread(files.drop_results, player_id) if days else 0
        rewritten = 0
        for board, window, archive in await self.store.renamed_windows(name):
            file = archive or f"{board}/{window}.csv.gz"
            renamed, checksum = await asyncio.to_thread(
                files.rename_in_standings, file, player_id, name
            )
            rewritten += renamed
            # Again after a crash between the file and this: the file's checksum as it is.
            if checksum is not None and archive is not None:
                await self.store.set_archive(board, window, archive, checksum)
        return {"archivedResults": archived, "standingsFiles": rewritten}


def _added(counts: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    out = dict(counts)
    for k, v in more.items():
        out[k] = out.get(k, 0) + v
    return out
