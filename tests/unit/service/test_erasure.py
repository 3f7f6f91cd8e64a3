"""The export streamed a page at a time (``service/erasure.py``), never the player's rows at
once, and valid JSON whatever the sections hold."""

from __future__ import annotations

import json
from typing import Any

from podium.config.settings import parse
from podium.domain.erasure import EXPORT_SECTIONS, erased_among, erased_digest, new_secret
from podium.ports import SystemClock
from podium.service import erasure
from podium.service.erasure import Erasures


class PagedStore:
    """As much as the export reads: ``export_page`` over rows held by section."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]]) -> None:
        self.rows = rows
        self.asked: list[int] = []

    async def erased(self, ids: list[str]) -> set[str]:
        return set()

    async def export_page(
        self, player_id: str, section: str, after: str, limit: int
    ) -> list[tuple[str, dict[str, Any]]]:
        self.asked.append(limit)
        keyed = [(f"{i:08d}", r) for i, r in enumerate(self.rows.get(section, []))]
        return [(k, r) for k, r in keyed if k > after][:limit]


async def test_the_export_is_valid_json_read_a_page_at_a_time() -> None:
    results = [{"match_id": f"m{i}", "points": i, "metadata": '{"k":1}'} for i in range(2_500)]
    store = PagedStore({"results": results, "profile": [{"name": "Vex", "country": None}]})
    svc = Erasures(parse({}), store, [], None, SystemClock())  # type: ignore[arg-type]
    chunks = [c async for c in await svc.export("p1")]
    doc = json.loads(b"".join(chunks))
    assert doc["playerId"] == "p1" and doc["erased"] is False
    assert [r["matchId"] for r in doc["results"]] == [f"m{i}" for i in range(2_500)]
    assert doc["results"][7]["metadata"] == {"k": 1}  # the stored JSON, not a string
    assert doc["profile"] == [{"name": "Vex", "country": None}]
    assert set(doc) == {"format", "playerId", "exportedAt", "erased", *EXPORT_SECTIONS,
                        "archivedResults"}  # fmt: skip
    assert all(
        section == []
        for k, section in doc.items()
        if k not in ("results", "profile") and isinstance(section, list)
    )
    # Never more than a page asked at once: 3 pages of results, one of each other section.
    assert max(store.asked) == erasure.PAGE
    assert len(store.asked) == 3 + len(EXPORT_SECTIONS) - 1


class Hashes:
    """The store as a sweep reads it: its key and the hashes of erased ids."""

    def __init__(self, key: str, erased: list[str]) -> None:
        self.key = key
        self.digests = {erased_digest(key, p) for p in erased}
        self.keys_asked = 0

    async def erasure_key(self) -> str:
        self.keys_asked += 1
        return self.key

    async def erased_digests(self) -> set[str]:
        return self.digests


class Swept:
    """An index holding ids, asking ``erased`` a page of them at a time."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.pages = 0

    async def sweep_erased(self, erased: Any) -> int:
        gone = set()
        for i in range(0, len(self.ids), 2):
            self.pages += 1
            gone |= erased(self.ids[i : i + 2])
        self.ids = [p for p in self.ids if p not in gone]
        return len(gone)


async def test_a_sweep_removes_the_ids_whose_keyed_hash_is_kept() -> None:
    store, index = Hashes("k" * 64, ["gone-1", "gone-2"]), Swept(["a", "gone-1", "b", "gone-2"])
    assert await erasure.sweep_erased(store, [index]) == 2
    assert index.ids == ["a", "b"]
    # another key: the same ids are not erased under it
    other = Swept(["gone-1"])
    assert await erasure.sweep_erased(Hashes("x" * 64, ["nobody"]), [other]) == 0
    assert other.ids == ["gone-1"]


async def test_with_no_erasure_ever_a_sweep_reads_nothing_of_the_index() -> None:
    store, index = Hashes("k" * 64, []), Swept(["a", "b"])
    assert await erasure.sweep_erased(store, [index]) == 0
    assert index.pages == 0 and store.keys_asked == 0


def test_erased_among_is_the_keyed_hash_of_each_id() -> None:
    digests = {erased_digest("s", "p1")}
    assert erased_among("s", digests, ["p1", "p2"]) == {"p1"}
    assert erased_among("t", digests, ["p1"]) == set()  # another key
    assert erased_among("s", set(), ["p1"]) == set()
    assert len(new_secret()) == 64 and new_secret() != new_secret()
