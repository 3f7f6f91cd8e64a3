"""A player's data: everything podium holds on them as one JSON document, and their erasure
(issue 35, docs/architecture.md §9).

The export is streamed: a generator over the store's pages, section by section, then the
archived results read from the day files, so that a player with 100,000 results is never
held in memory at once. Its schema is schemas/player-export.v1.json (docs/export.md).

An erasure is answered at once with a receipt: the store records it and the keyed hash of
the id in one transaction (from then on the player's new results are refused and the
updaters skip the log's changes of them, as they skip a ban). The eraser role carries it out
in the steps of ``domain.erasure.Step``, each idempotent and noted when done, so a process
killed at any moment resumes at the step it was in. One eraser at a time carries out a
record: it claims it under a lease (``claim_erasures``), renews the lease while a step runs,
and notes each step only while it still holds it, so the counts are those of one run of each
step; a dead eraser's record is taken over once its lease runs out. The last step forgets
the id and the pseudonym: the record keeps the hash, when, by which key, and the counts.

Since no id is kept after that, what brings an erased player back into the index later (a
Redis replica promoted without the erasure's deletes) is found by the hash of each id the
index holds: ``sweep_erased``, run by the mender after a failover and by the reconciler
now and then (docs/architecture.md §9).

Knows the ports, never an adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Coroutine, Sequence
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
BATCH = 10  # erasures an eraser's step carries out at most before it returns to its loop
CLAIM_POLL_S = 1.0  # how often ``carry_out`` looks again at an erasure another eraser holds
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


def eraser_name() -> str:
    """Who holds an erasure's lease: the host and process, for an operator looking at the
    record, and random bits, so that a process that restarts under the same pid on the same
    host does not take its dead predecessor's leases for its own."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


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
        # The lease on a record it carries out (workers/eraser.py): renewed during a step,
        # so its length bounds only how long a dead eraser's record waits to be taken over.
        self.lease_s = settings.workers.erasure_lease_s
        self.owner = eraser_name()

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
        """The eraser role's step: erasures not done, claimed one at a time (a record
        claimed waits for nothing but its own eraser) and carried out to their end; how
        many were taken."""
        taken = 0
        while taken < BATCH:
            claimed = await self.store.claim_erasures(self.owner, self.clock.now(), self.lease_s, 1)
            if not claimed:
                break
            taken += 1
            await self._carry(claimed[0])
        return taken

    async def carry_out(self, e: Erasure) -> None:
        """This erasure carried out here, to its end (``podium player erase --wait``): once
        no other eraser holds it (its lease over, if that eraser died), or once another
        finished it."""
        while True:
            claimed = await self.store.claim_erasures(
                self.owner, self.clock.now(), self.lease_s, 1, only=e.id
            )
            if claimed:
                await self._carry(claimed[0])
            found = await self.store.erasure(e.id)
            if found is None or found.done_at is not None:
                return
            if not claimed:
                await asyncio.sleep(CLAIM_POLL_S)

    async def _carry(self, e: Erasure) -> None:
        """A claimed erasure's steps from the one it is at, each noted under the lease; the
        lease renewed while a step runs. Lost (the eraser stalled a whole lease): the step
        is given up and the erasure left to its new holder, which goes on from the last
        step noted, so that no step's counts are added twice."""
        try:
            await self._steps(e)
        except asyncio.CancelledError:
            # Stopped (a worker's shutdown): the lease given back, so that the next eraser
            # need not wait it out. Best effort: a kill leaves it to run out.
            with contextlib.suppress(Exception):
                await self.store.renew_erasure(e.id, self.owner, self.clock.now(), 0.0)
            raise

    async def _steps(self, e: Erasure) -> None:
        step, counts = e.step, dict(e.counts)
        while step is not Step.DONE:
            if e.player_id is None:  # only DONE clears it
                break
            done = await self._held(e.id, self._do(step, e.player_id, e.pseudonym))
            if done is None:
                log.warning("erasure %s: lease lost during step %s, left to its holder", e.id, step)
                return
            counts = _added(counts, done)
            step = next_step(step)
            if not await self.store.advance_erasure(
                e.id, self.owner, step, counts, self.clock.now(), self.lease_s
            ):
                log.warning("erasure %s: lease lost at step %s, left to its holder", e.id, step)
                return
        log.info("erasure %s done: %s", e.id, counts)  # the receipt, never the id

    async def _held(
        self, erasure_id: str, work: Coroutine[Any, Any, dict[str, int]]
    ) -> dict[str, int] | None:
        """``work``'s counts, its lease renewed every third of it while it runs, however
        long (a sweep of a big index, the settle step's sleep); None, the work cancelled,
        if a renewal finds the lease gone."""
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=self.lease_s / 3)
                if task.done():
                    break
                if not await self.store.renew_erasure(
                    erasure_id, self.owner, self.clock.now(), self.lease_s
                ):
                    return None
            return task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

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
