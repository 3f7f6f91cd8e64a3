"""The ingest role's step on a feed held in memory: progress is committed only over records
done with nothing undone before them, refused records are set aside (with their problem)
before that commit, and a record that met an outage is read again with everything after it
in its partition, while the records of a match id are taken one after the other."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from podium import metrics
from podium.config.ingest import IngestTable
from podium.domain.models import ApiKey
from podium.errors import StoreUnavailable
from podium.ports.ingest import FeedRecord
from podium.workers.ingest import IngestTopic

TABLE = IngestTable(topic="unit-matches", key="gs")
KEY = ApiKey("k1", "gs", "h", ("default",))


class Feed:
    """Partitions of records; what is handed out, set aside and committed, in order."""

    topic = TABLE.topic

    def __init__(self, records: list[FeedRecord]) -> None:
        self.records = records
        self.position = {r.partition: 0 for r in records}
        self.log: list[tuple[str, Any]] = []
        self.committed: dict[int, int] = {}

    async def poll(self, limit: int) -> list[FeedRecord]:
        out = [r for r in self.records if r.offset >= self.position[r.partition]][:limit]
        for r in out:
            self.position[r.partition] = max(self.position[r.partition], r.offset + 1)
        return out

    async def reject(self, records: Sequence[tuple[FeedRecord, dict[str, Any]]]) -> None:
        self.log.append(("reject", [(r.key, p["status"]) for r, p in records]))

    async def commit(self, done: Sequence[FeedRecord]) -> None:
        for r in done:
            self.committed[r.partition] = max(self.committed.get(r.partition, 0), r.offset + 1)
        self.log.append(("commit", sorted((r.partition, r.offset) for r in done)))

    async def rewind(self, pending: Sequence[FeedRecord]) -> None:
        for r in pending:
            self.position[r.partition] = min(self.position[r.partition], r.offset)
        if pending:
            self.log.append(("rewind", sorted((r.partition, r.offset) for r in pending)))

    async def lag(self) -> dict[int, int]:
        ends = {r.partition: r.offset + 1 for r in self.records}
        return {p: e - self.committed.get(p, 0) for p, e in ends.items()}

    async def close(self) -> None:
        pass


class Ingest:
    """Records a match unless told otherwise: ``refuse`` answers a problem, ``fail`` raises an
    outage (once each)."""

    def __init__(self, refuse: set[bytes] = frozenset(), fail: set[bytes] = frozenset()) -> None:
        self.refuse = set(refuse)
        self.fail = set(fail)
        self.taken: list[bytes | None] = []
        self.running: set[bytes | None] = set()
        self.overlapped = False

    async def key(self, name: str) -> ApiKey:
        return KEY

    async def take(self, key: ApiKey, match_id: bytes | None, value: bytes | None) -> Any:
        if match_id in self.running:
            self.overlapped = True
        self.running.add(match_id)
        try:
            await asyncio.sleep(0)
            if match_id in self.fail:
                self.fail.discard(match_id)
                raise StoreUnavailable("the store is down")
            self.taken.append(match_id)
            if match_id in self.refuse:
                return {"status": 422, "detail": "bad", "title": "Invalid input", "type": "x"}
            return None
        finally:
            self.running.discard(match_id)


def _records(*per_partition: list[str]) -> list[FeedRecord]:
    return [
        FeedRecord(p, o, k.encode(), b"{}")
        for p, keys in enumerate(per_partition)
        for o, k in enumerate(keys)
    ]


async def test_refused_records_are_set_aside_before_the_commit() -> None:
    feed = Feed(_records(["a", "bad", "c"], ["d"]))
    ingest = Ingest(refuse={b"bad"})
    before = metrics.INGEST_REJECTED.labels(TABLE.topic, "422")._value.get()
    assert await IngestTopic(TABLE, feed, ingest, 10).step() == 4  # type: ignore[arg-type]
    assert feed.log == [
        ("reject", [(b"bad", 422)]),
        ("commit", [(0, 0), (0, 1), (0, 2), (1, 0)]),
    ]
    assert feed.committed == {0: 3, 1: 1}
    assert metrics.INGEST_REJECTED.labels(TABLE.topic, "422")._value.get() == before + 1
    assert metrics.INGEST_LAG.labels(TABLE.topic, TABLE.group, "0")._value.get() == 0


async def test_an_outage_commits_what_came_before_it_and_reads_the_rest_again() -> None:
    feed = Feed(_records(["a", "b", "c"], ["d", "e"]))
    ingest = Ingest(fail={b"b"})
    step = IngestTopic(TABLE, feed, ingest, 10).step  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable):
        await step()
    # Partition 0 up to its failed record; partition 1 whole. "c" was recorded too, but
    # it comes after the failure: read again, it is a retry (counted once by the store).
    assert feed.committed == {0: 1, 1: 2}
    assert ("rewind", [(0, 1), (0, 2)]) in feed.log
    assert await step() == 2
    assert feed.committed == {0: 3, 1: 2}
    assert ingest.taken.count(b"b") == 1 and ingest.taken.count(b"c") == 2


async def test_the_records_of_one_match_are_taken_one_after_the_other() -> None:
    feed = Feed(_records(["m", "m", "n", "m"]))
    ingest = Ingest()
    assert await IngestTopic(TABLE, feed, ingest, 10).step() == 4  # type: ignore[arg-type]
    assert not ingest.overlapped
    assert ingest.taken.count(b"m") == 3


async def test_a_failed_set_aside_commits_nothing_and_reads_all_again() -> None:
    feed = Feed(_records(["a", "bad"]))

    async def down(records: Any) -> None:
        raise StoreUnavailable("the dead letter is down")

    feed.reject = down  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        await IngestTopic(TABLE, feed, Ingest(refuse={b"bad"}), 10).step()  # type: ignore[arg-type]
    assert feed.committed == {}
    assert feed.position == {0: 0}
