"""The export of a player's data (issue 35, docs/export.md) against its JSON Schema,
``schemas/player-export.v1.json``: a player whose data fills every section, exported on each
backend through the service the route and the CLI stream from, is a valid document, every
row of every section with the columns and types the schema names."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from podium import bootstrap
from podium.archive import results as day_files
from podium.config.settings import parse
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.models import ApiKey, PlayerResult, Profile
from podium.domain.retention import StoredResult
from podium.domain.tournaments import Tournament
from podium.service import erasure
from podium.service.tournaments import TournamentFreezer
from podium.workers.freezer import Freezer
from podium.workers.webhooks import Deliverer
from tests.integration import test_erasure
from tests.integration.conftest import KINDS_WITH_SPLIT
from tests.integration.test_erasure import _settings
from tests.integration.test_freeze import DAY, Clock, _drain, _midweek

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "player-export.v1.json").read_text())
VALID = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
CONFIG_KINDS = KINDS_WITH_SPLIT  # the split store merges the pages of its databases
P = "zq-full-3"  # the exported player
hook = test_erasure.hook  # a webhook endpoint (a fixture): the ban's event delivered to it
KEY = ApiKey("gs", "gs", "h", ("default",))


async def test_an_export_that_fills_every_section_is_valid_against_its_schema(
    config_kind: str,
    backend_urls: Any,
    tmp_path: Path,
    hook: list[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = _settings(config_kind, backend_urls, tmp_path, hook[0].decode())
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(s, clock)
    await b.start()
    try:
        await _fill(b, clock, day, tmp_path, hook[0].decode())
        doc = json.loads(b"".join([c async for c in await b.podium.erasures.export(P)]))
        # A page of one row: every section read by its keyset key, no row skipped or twice.
        monkeypatch.setattr(erasure, "PAGE", 1)
        paged = json.loads(b"".join([c async for c in await b.podium.erasures.export(P)]))
    finally:
        await b.close()
    assert paged == doc
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in VALID.iter_errors(doc)]
    assert errors == []
    empty = [k for k, v in doc.items() if isinstance(v, list) and not v]
    assert empty == [], "the fill left sections empty: the schema was not checked on them"
    # Both branches of the nullable columns that the fill can reach.
    results = {r["matchId"]: r for r in doc["results"]}
    assert results["jump"]["flag"] and results["jump"]["acceptedAt"] is not None
    assert results["m1"]["metadata"] == {"skin": "red"} and results["h0"]["metadata"] is None
    assert any(d["state"] == "delivered" for d in doc["webhookDeliveries"])


async def _fill(b: bootstrap.Backends, clock: Clock, day: int, tmp: Path, hook_url: str) -> None:
    """Every section of P's export given rows: a tournament joined and frozen, a league
    cohort frozen and a tier, a day window frozen with them and one frozen while banned
    (left out), friends both ways, a profile, a flagged result accepted, a ban and its
    delivered webhook, changes not yet applied, and archived results."""
    svc = b.podium
    await svc.tournaments.create(
        Tournament("cup", "Cup", ("default",), Aggregate.SUM, Order.DESC, Ties.FIRST,
                   day, day + DAY, join_required=True)
    )  # fmt: skip
    for p in ("a", P, "b", "c"):
        await svc.tournaments.join("cup", p, KEY)
    for i, (p, pts) in enumerate({"a": 50, P: 90, "b": 120, "c": 10}.items()):
        meta = {"skin": "red"} if p == P else None
        await svc.matches.record(
            KEY, f"m{i}", "default", day + 60 * i, 60, [PlayerResult(p, pts, meta)]
        )
    for i in range(5):  # a history, then a jump that is flagged, and accepted
        await svc.matches.record(
            KEY, f"h{i}", "default", day - DAY + 60 * i, 60, [PlayerResult(P, 10)]
        )
    await svc.matches.record(
        KEY, "jump", "default", day - DAY + 600, 60, [PlayerResult(P, 200_000)]
    )
    assert [f.player_id for f in await b.store.flagged(None, 10)] == [P]
    await svc.search.accept(P, "jump")
    await svc.player_admin.set_profile(Profile(P, "Full House", "https://x.test/a.png", "DE"))
    await svc.player_admin.set_friends(P, ["a", "b"])
    await svc.player_admin.set_friends("a", [P])
    await _drain(b)
    clock.t = day + DAY + 601  # the day, the tournament's run and the league's cohort freeze
    assert await Freezer(b.settings, b.store, b.clock, svc.lifecycle).step() >= 1
    assert await TournamentFreezer(b.store, svc.lifecycle, b.clock).step() == 1
    assert await svc.leagues.freeze_due() >= 1
    # The next day: a result, then a ban that the day's freeze leaves them out for.
    for i, (p, pts) in enumerate({P: 500, "a": 40}.items()):
        await svc.matches.record(
            KEY, f"n{i}", "default", day + DAY + 60 + i, 60, [PlayerResult(p, pts)]
        )
    assert await svc.player_admin.ban(P, "cheating")
    deliverer = Deliverer(b.settings.webhooks, b.store, b.clock)
    assert await deliverer.fan_out() >= 1
    assert await deliverer.deliver(hook_url) >= 1
    await _drain(b)
    clock.t = day + 2 * DAY + 601
    assert await Freezer(b.settings, b.store, b.clock, svc.lifecycle).step() >= 1
    # Changes not applied yet: the outbox keeps them, two of one window committed at once.
    for i in range(2):
        await svc.matches.record(
            KEY,
            f"late{i}",
            "default",
            day + 2 * DAY + 300 + i,
            60,
            [PlayerResult(P, 7, {"lap": i})],
        )
    writer = day_files.DayWriter(tmp / "archive", day - 40 * DAY)
    writer.add([
        StoredResult(P, "old1", "gs", "default", day - 40 * DAY + 5, 60, 3, 1.5),
        StoredResult(P, "old2", "gs", "default", day - 40 * DAY + 9, 60, 4, 2.5, "jump", '{"a":1}'),
    ])  # fmt: skip
    writer.finish()


async def test_an_export_of_many_results_holds_a_page_not_the_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streamed (docs/export.md): 5,000 results and their matches, read 50 rows at a time,
    take a fraction of the document's size in Python memory at the peak (tracemalloc counts
    bytes allocated, not time, so a busy machine does not change it).
    benchmarks/export_memory.py measures 100,000."""
    n, url = 5_000, f"sqlite:///{tmp_path}/many.db"
    b = bootstrap.build(parse({"store": {"url": url}, "archive": {"dir": str(tmp_path)}}))
    await b.start()
    try:
        conn = sqlite3.connect(tmp_path / "many.db")
        with conn:
            conn.executemany(
                "INSERT INTO results (player_id, match_id, key_id, mode, ended_at, duration_s, "
                "points, recorded_at, metadata) VALUES (?, ?, 'gs', 'default', ?, 60, ?, ?, ?)",
                ((P, f"m{i:05d}", 1_790_000_000 + i, i, 1_790_000_001.5 + i, '{"lap":1}')
                 for i in range(n)),
            )  # fmt: skip
            conn.execute(
                "INSERT INTO matches (match_id, key_id, recorded_at) "
                "SELECT match_id, key_id, recorded_at FROM results"
            )
        conn.close()
        monkeypatch.setattr(erasure, "PAGE", 50)
        size, rows = 0, 0
        tracemalloc.start()
        try:
            async for chunk in await b.podium.erasures.export(P):
                size += len(chunk)
                rows += chunk.count(b'"matchId"')
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        await b.close()
    assert rows == 2 * n  # every result and every match
    assert size > 1_000_000 and peak < size / 4, (peak, size)
