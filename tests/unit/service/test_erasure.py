"""The export streamed a page at a time (``service/erasure.py``), never the player's rows at
once, and valid JSON whatever the sections hold."""

from __future__ import annotations

import json
from typing import Any

from podium.config.settings import parse
from podium.domain.erasure import EXPORT_SECTIONS
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
