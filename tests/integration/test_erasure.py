"""A player's erasure on every configuration (embedded, Postgres + Redis, the split fleet's
store and index): their data in every place, erased, then searched for as bytes in every
table, every index key and member, every archive and standings file: no hit; the others'
boards equal the store, their frozen ranks unchanged; a result for them refused."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import gzip
import logging
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from podium import bootstrap
from podium.archive import results as day_files
from podium.archive.standings import read as read_standings
from podium.config.sections import IndexSettings
from podium.config.settings import Settings
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.erasure import PSEUDONYM_PREFIX
from podium.domain.models import ApiKey, PlayerResult, Profile
from podium.domain.retention import StoredResult
from podium.domain.tournaments import Tournament
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import Erased
from podium.index.memory.index import MemoryIndex
from podium.index.redis.cluster import client_for
from podium.index.split.index import SplitIndex
from podium.service.tournaments import TournamentFreezer
from podium.service.upkeep.gapless import Target
from podium.workers import mender
from podium.workers.freezer import Freezer
from podium.workers.reconciler import Reconciler
from podium.workers.webhooks import Deliverer
from tests.integration.conftest import KINDS_WITH_SPLIT, Backends, settings_for
from tests.integration.test_freeze import BOARDS, DAY, Clock, _drain, _midweek
from tests.kafka_cluster import delete_log_topics, need_kafka, topic_name
from tests.nats_cluster import delete_stream, need_nats, stream_messages, stream_name

CONFIG_KINDS = KINDS_WITH_SPLIT
GONE = "zq-gone-7"  # the erased player: no other id or name contains these bytes
KEY = ApiKey("gs", "gs", "h", ("default",))
HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
# A league played by day in cohorts of 3: the erased player's cohort freezes and promotes.
LEAGUE = {
    "name": "league",
    "window": "day",
    "cohort_size": 3,
    "tiers": ["bronze", "silver"],
    "promote": 1,
    "demote": 1,
    "freeze_after_s": 60,
}


@pytest.fixture
def settings(
    config_kind: str, backend_urls: Backends, tmp_path: Path, hook: list[bytes]
) -> Settings:
    return _settings(config_kind, backend_urls, tmp_path, hook[0].decode())


def _settings(kind: str, urls: Backends, tmp_path: Path, hook_url: str, **more: Any) -> Settings:
    """The erasure's settings on ``kind``, a webhook of bans to ``hook_url``; ``more`` (a
    log, the index's shards) on top."""
    pg, prefix, shards = urls
    return settings_for(
        kind,
        f"sqlite:///{tmp_path}/erase.db",
        pg,
        prefix,
        shards=shards,
        boards=[*BOARDS, LEAGUE],
        archive={"dir": str(tmp_path / "archive")},
        server={"page_cache_s": 0},
        workers={"idle_sleep_s": 0.005, "erasure_settle_s": 0.2},
        store={"erasure_secret": "s3cret", **_store(kind, pg, shards, tmp_path)},
        webhooks=[{"url": hook_url, "secret": HOOK_SECRET, "events": ["player.banned"]}],
        **more,
    )


def _store(kind: str, pg: str | None, shards: tuple[str, ...], tmp: Path) -> dict[str, Any]:
    if kind == "embedded":
        return {"url": f"sqlite:///{tmp}/erase.db"}
    out: dict[str, Any] = {"url": pg}
    if shards:
        out |= {"shards": list(shards), "pool_size": 4, "read_pool_size": 3}
    return out


async def _store_hits(s: Settings, needle: str) -> list[str]:
    """Every table row, on every database of the store, whose text holds ``needle``."""
    hits = []
    if s.store.url.startswith("sqlite"):
        conn = sqlite3.connect(s.store.url.removeprefix("sqlite:///"))
        try:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for t in tables:
                for row in conn.execute(f"SELECT * FROM {t}"):
                    if needle in repr(row):
                        hits.append(f"{t}: {row}")
        finally:
            conn.close()
        # And the files as bytes: no free page, freed cell or WAL frame keeps the rows.
        path = Path(s.store.url.removeprefix("sqlite:///"))
        for f in (path, path.with_name(path.name + "-wal")):
            if f.exists() and needle.encode() in f.read_bytes():
                hits.append(f"{f.name}: the file's bytes")
        return hits
    for url in dict.fromkeys([s.store.url, *s.store.shards]):
        conn = await asyncpg.connect(url)
        try:
            tables = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            for t in tables:
                name = t["tablename"]
                rows = await conn.fetch(f'SELECT t::text AS r FROM "{name}" t')
                hits += [f"{name}: {r['r']}" for r in rows if needle in r["r"]]
        finally:
            await conn.close()
    return hits


async def _index_hits(b: bootstrap.Backends, needle: str) -> list[str]:
    """Every index key, member, field and value that holds ``needle``."""
    hits = []
    if b.settings.index.url.startswith("memory"):
        shards = b.index.shards if isinstance(b.index, SplitIndex) else [b.index]
        for shard in shards:
            assert isinstance(shard, MemoryIndex)
            for key, board in shard._boards.items():
                held = [*board.scores, *board.versions, *board.meta, *board.banned]
                hits += [f"{key}: {m}" for m in held if needle in m]
            hits += [f"profile {p}" for p in shard.copy._held if needle in p]
        return hits
    client = client_for(b.settings.index.url)  # one Redis, or every primary of a cluster
    try:
        async for key in client.scan_iter(match=f"{b.settings.index.prefix}:*"):
            kind = await client.type(key)
            if kind == "zset":
                held = [m for m, _ in await client.zrange(key, 0, -1, withscores=True)]
            elif kind == "hash":
                held = [f"{k}={v}" for k, v in (await client.hgetall(key)).items()]
            elif kind == "set":
                held = list(await client.smembers(key))
            elif kind == "string":
                held = [await client.get(key) or ""]
            else:
                held = []
            hits += [f"{key}: {h}" for h in [key, *held] if needle in h]
    finally:
        await client.aclose()
    return hits


def _file_hits(directory: Path, needle: str) -> list[str]:
    """Every file under ``directory`` whose bytes, or bytes unzipped, hold ``needle``."""
    hits = []
    for f in directory.rglob("*"):
        if not f.is_file():
            continue
        data = f.read_bytes()
        if f.suffix == ".gz":
            data += gzip.decompress(data)
        if needle.encode() in data:
            hits.append(str(f))
    return hits


async def test_an_erased_player_is_nowhere_and_stays_erased(
    settings: Settings, tmp_path: Path, hook: list[bytes]
) -> None:
    await _erased_everywhere(settings, tmp_path, hook)


@pytest.mark.parametrize("config_kind", ["production"])
async def test_on_redis_cluster_an_erased_player_is_nowhere(
    settings: Settings,
    tmp_path: Path,
    redis_cluster: Any,
    cluster_prefix: str,
    hook: list[bytes],
) -> None:
    """The same with the index split in 16 shards over a Redis Cluster's three primaries."""
    index = {"url": redis_cluster.url, "prefix": cluster_prefix, "shards": 16}
    s = dataclasses.replace(settings, index=IndexSettings(**index))
    await _erased_everywhere(s, tmp_path, hook)


@pytest.mark.parametrize("config_kind", ["split"])
async def test_on_the_split_fleet_with_nats_an_erased_player_is_nowhere(
    config_kind: str, backend_urls: Backends, tmp_path: Path, hook: list[bytes]
) -> None:
    """The split fleet: two shard databases and a home, 16 index shards, NATS JetStream as
    the log; every message of the stream searched too."""
    url, name = need_nats(), stream_name()
    s = _settings(
        config_kind,
        backend_urls,
        tmp_path,
        hook[0].decode(),
        index={"shards": 16},
        log={"url": url, "stream": name},
    )
    assert s.index.shards == 16 and len(s.store.shards) == 2
    try:
        await _erased_everywhere(s, tmp_path, hook, stream=(url, name))
    finally:
        await delete_stream([url], name)


async def _applied(b: bootstrap.Backends) -> None:
    """Every committed change applied to the index: relayed into the log first, when the
    log is not the outbox itself."""
    while await b.log.relay(100):
        pass
    await _drain(b)


async def _erased_everywhere(
    settings: Settings,
    tmp_path: Path,
    hook: list[bytes],
    stream: tuple[str, str] | None = None,
) -> None:
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(settings, clock)
    await b.start()
    try:
        svc = b.podium
        # A tournament of the day that the players join, and whose run freezes with them.
        cup, _ = await svc.tournaments.create(
            Tournament("cup", "Cup", ("default",), Aggregate.SUM, Order.DESC, Ties.FIRST,
                       day, day + DAY, join_required=True)
        )  # fmt: skip
        for p in ("a", GONE, "b", "c", "d"):
            await svc.tournaments.join("cup", p, KEY)
        # The day window: four players, the erased one second of them.
        for i, (p, pts) in enumerate({"a": 50, GONE: 90, "b": 120, "c": 10, "d": 70}.items()):
            await svc.matches.record(
                KEY, f"m{i}", "default", day + 60 * i, 60, [PlayerResult(p, pts, {"skin": "red"})]
            )
        # The day before (counting for the week): a history, then a jump that is flagged.
        for i in range(5):
            await svc.matches.record(
                KEY, f"h{i}", "default", day - DAY + 60 * i, 60, [PlayerResult(GONE, 10)]
            )
        await svc.matches.record(
            KEY, "jump", "default", day - DAY + 600, 60, [PlayerResult(GONE, 200_000)]
        )
        assert [f.player_id for f in await b.store.flagged(None, 10)] == [GONE]
        await svc.player_admin.set_profile(Profile(GONE, "Gone Girl", None, "DE"))
        await svc.player_admin.set_profile(Profile("a", "Ann", None, "FR"))
        await svc.player_admin.set_friends(GONE, ["a", "b"])
        await svc.player_admin.set_friends("a", [GONE, "c"])
        # A ban of theirs, lifted, its event delivered to the webhook.
        assert await svc.player_admin.ban(GONE, "x")
        await svc.player_admin.unban(GONE)
        deliverer = Deliverer(b.settings.webhooks, b.store, b.clock)
        assert await deliverer.fan_out() >= 1
        assert await deliverer.deliver(hook[0].decode()) == 1
        assert sum(GONE.encode() in body for body in hook[1:]) == 1
        await _applied(b)
        clock.t = day + DAY + 601
        assert await Freezer(b.settings, b.store, b.clock, svc.lifecycle).step() >= 1
        assert await TournamentFreezer(b.store, svc.lifecycle, b.clock).step() == 1
        assert await svc.leagues.freeze_due() >= 1
        run = (await b.store.frozen(cup.board)).popitem()[0]
        cup_before = await b.store.final_page(cup.board, run, 1, 9)
        assert GONE in {e.player_id for e in cup_before}
        tiers = await b.store.player_tiers(GONE)
        assert tiers, "the erased player's cohort froze and moved them"
        window = svc.boards.board("day").rule.window_at(day)
        assert window is not None
        frozen = (await b.store.frozen("day"))[window.id]
        assert frozen.archive is not None
        before = [
            (e.position, e.rank, e.points) for e in await b.store.final_page("day", window.id, 1, 9)
        ]
        standings_before = read_standings(tmp_path / "archive", frozen.archive)
        assert GONE in {e.player_id for e in standings_before}
        # The next day, live: the erased player on top, others below.
        for i, (p, pts) in enumerate({GONE: 500, "a": 40, "b": 30}.items()):
            await svc.matches.record(
                KEY, f"n{i}", "default", day + DAY + 60 + i, 60, [PlayerResult(p, pts)]
            )
        await _applied(b)
        live = svc.boards.board("day").rule.window_at(day + DAY + 60)
        assert live is not None
        page = await svc.reads.page("day", live.id, 0, 10)
        assert [e.player_id for e in page.entries] == [GONE, "a", "b"]
        # Results the pruner archived: a day file holding them and another player's.
        writer = day_files.DayWriter(tmp_path / "archive", day - 40 * DAY)
        writer.add([
            StoredResult("a", "old1", "gs", "default", day - 40 * DAY + 5, 60, 3, 1.5),
            StoredResult(GONE, "old2", "gs", "default", day - 40 * DAY + 9, 60, 4, 2.5, None, "{}"),
        ])  # fmt: skip
        writer.finish()

        # Exported first: everything, in one document.
        doc = b"".join([c async for c in await svc.erasures.export(GONE)])
        assert b'"old2"' in doc and b"Gone Girl" in doc and b'"m1"' in doc

        if stream is not None:  # the log held their changes and the ban's event
            assert len(await _stream_hits(*stream, GONE)) >= 3
        receipt = await svc.erasures.request(GONE, "admin-key")
        again = await svc.erasures.request(GONE, "admin-key")
        assert again.id == receipt.id
        # From the receipt on: a result for them is refused, a retry of an old match too.
        with pytest.raises(Erased):
            await svc.matches.record(
                KEY, "late", "default", day + DAY + 90, 60, [PlayerResult(GONE, 1)]
            )
        with pytest.raises(Erased):
            await svc.matches.record(
                KEY, "n0", "default", day + DAY + 60, 60, [PlayerResult(GONE, 500)]
            )
        await svc.erasures.erase_due()
        done = await svc.erasures.status(receipt.id)
        assert done is not None and done.done_at is not None and done.player_id is None
        assert done.counts["results"] == 8 and done.counts["archivedResults"] == 1
        assert done.counts["standingsFiles"] == 4 and done.counts["indexEntries"] >= 1

        assert await _store_hits(settings, GONE) == []
        assert await _index_hits(b, GONE) == []
        assert _file_hits(tmp_path / "archive", GONE) == []

        # The frozen window: the same ranks and points, the pseudonym in the erased place;
        # its file written again with a manifest that matches it, and the store's sha256.
        page_after = await b.store.final_page("day", window.id, 1, 9)
        assert [(e.position, e.rank, e.points) for e in page_after] == before
        standings = read_standings(tmp_path / "archive", frozen.archive)
        assert [(e.position, e.rank, e.points) for e in standings] == [
            (e.position, e.rank, e.points) for e in standings_before
        ]
        renamed = {e.player_id for e in standings} - {e.player_id for e in standings_before}
        assert len(renamed) == 1 and next(iter(renamed)).startswith(PSEUDONYM_PREFIX)
        refrozen = (await b.store.frozen("day"))[window.id]
        assert refrozen.checksum == await svc.lifecycle.archive.checksum(frozen.archive)
        assert refrozen.checksum != frozen.checksum
        for manifest in (tmp_path / "archive" / "results").glob("*.csv.gz"):
            day_files.verify(manifest)
        # The tournament's run: its ranks and points paid from, unchanged.
        cup_after = await b.store.final_page(cup.board, run, 1, 9)
        assert [(e.position, e.rank, e.points) for e in cup_after] == [
            (e.position, e.rank, e.points) for e in cup_before
        ]
        assert await b.store.player_tiers(GONE) == []
        # The live board: the others moved up, and equal the store.
        page = await svc.reads.page("day", live.id, 0, 10)
        assert [(e.rank, e.player_id) for e in page.entries] == [(1, "a"), (2, "b")]
        cup_now = await b.store.tournament("cup")
        assert cup_now is not None and cup_now.entrants == 4  # their place is free
        # Nor does an admin's profile or friends write, nor a join.
        with pytest.raises(Erased):
            await svc.player_admin.set_profile(Profile(GONE, "Back"))
        with pytest.raises(Erased):
            await svc.player_admin.set_friends(GONE, ["a"])
        with pytest.raises(Erased):
            await svc.tournaments.join("cup", GONE, KEY)
        await svc.player_admin.set_friends("a", [GONE, "b"])
        assert await b.store.friends("a") == ["b"]
        # It stays erased: a replay of the log, a rebuild from the store bring nothing back.
        await b.store.requeue_players(["a", "b", GONE], clock.t)
        await _applied(b)
        assert await b.rebuild_live() >= 0
        if b.layout is not None:  # a split Redis index: a reshard, from the store, too
            boards = svc.boards
            targets = [
                Target(boards.board(n), boards.window(boards.board(n), None))
                for n in ("day", "week")
            ]
            count = 8 if b.settings.index.shards != 8 else 6
            await b.reshard().run(targets, count, grace_s=0.2)
            await b.layout.follow()
            assert b.layout.count == count
            page = await svc.reads.page("day", live.id, 0, 10)
            assert [(e.rank, e.player_id) for e in page.entries] == [(1, "a"), (2, "b")]
        reconciler = Reconciler(b.settings, b.store, b.index, b.clock)
        for _ in range(20):
            await reconciler.step()
        assert await b.store.flagged(None, 10) == []
        assert await _index_hits(b, GONE) == []
        assert await _store_hits(settings, GONE) == []
        assert _file_hits(tmp_path / "archive", GONE) == []
        if stream is not None:
            assert await _stream_hits(*stream, GONE) == []
    finally:
        await b.close()


@pytest.fixture
def hook() -> Iterator[list[bytes]]:
    """A webhook endpoint on a free loopback port that answers 204 to everything: the
    bodies it was sent."""
    got: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            got.append(self.rfile.read(int(self.headers["content-length"])))
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    got.append(f"http://127.0.0.1:{server.server_port}/hook".encode())
    try:
        yield got
    finally:
        server.shutdown()


async def test_the_admin_api_exports_erases_and_refuses(
    make_api: Any, caplog: pytest.LogCaptureFixture, hook: list[bytes]
) -> None:
    """Through HTTP, with every role running in the process (the eraser among them), a ban
    delivered to a webhook; what podium logs from the erasure on never names the player."""
    url = hook.pop(0).decode()
    api = await make_api(
        workers={"idle_sleep_s": 0.005, "erasure_settle_s": 0.1},
        webhooks=[{"url": url, "secret": HOOK_SECRET, "events": ["player.banned"]}],
    )
    caplog.set_level(logging.DEBUG, logger="podium")
    assert (await api.submit("m1", [(GONE, 30), ("a", 20), ("b", 10), ("c", 5)])).status_code == 200
    await api.settle()
    admin = api.auth(api.admin_key)
    r = await api.client.post("/v1/admin/players/c/ban", json={"reason": "x"}, headers=admin)
    assert r.status_code == 204, r.text
    r = await api.client.post(f"/v1/admin/players/{GONE}/ban", json={"reason": "x"}, headers=admin)
    assert r.status_code == 204, r.text
    r = await api.client.delete(f"/v1/admin/players/{GONE}/ban", headers=admin)
    assert r.status_code in (200, 204), r.text

    async def delivered() -> bool:
        listed = await api.client.get("/v1/admin/webhooks/deliveries", headers=admin)
        states = [d["state"] for d in listed.json()["deliveries"]]
        return states == ["delivered", "delivered"] and sum(GONE.encode() in b for b in hook) == 1

    assert await api.until(delivered, timeout=20), "the ban's webhook was not delivered"
    await api.settle()
    r = await api.client.get(f"/v1/admin/players/{GONE}/export", headers=admin)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["playerId"] == GONE and doc["erased"] is False
    assert [x["matchId"] for x in doc["results"]] == ["m1"] and doc["archivedResults"] == []
    assert [e["type"] for e in doc["webhookEvents"]] == ["player.banned"]
    assert [d["state"] for d in doc["webhookDeliveries"]] == ["delivered"]
    # Only an admin key.
    assert (
        await api.client.get(f"/v1/admin/players/{GONE}/export", headers=api.auth())
    ).status_code == 403
    caplog.clear()
    r = await api.client.delete(f"/v1/admin/players/{GONE}", headers=admin)
    assert r.status_code == 202, r.text
    receipt = r.json()
    assert r.headers["location"] == f"/v1/admin/erasures/{receipt['id']}"
    assert GONE not in r.text
    # A result for them: a problem, nothing recorded.
    late = await api.submit("m2", [(GONE, 5), ("a", 5)])
    assert late.status_code == 403 and late.headers["content-type"] == "application/problem+json"
    assert late.json()["title"] == "Player erased"

    async def done() -> dict[str, Any] | None:
        got = await api.client.get(f"/v1/admin/erasures/{receipt['id']}", headers=admin)
        body: dict[str, Any] = got.json()
        return body if body["state"] == "done" else None

    finished = await api.until(done, timeout=20)
    assert finished is not None and finished["counts"]["results"] == 1
    assert GONE not in str(finished)
    await api.settle()
    page = await api.page("week")
    assert [e["playerId"] for e in page["entries"]] == ["a", "b"]

    # The record says done, then the WAL is cut (store/sqlite/erasure.py), a moment later
    # while the process's reads keep it busy.
    async def gone() -> bool:
        if await _store_hits(api.backends.settings, GONE) == []:
            return True
        await asyncio.sleep(0.2)  # this search reads the file too: not in the cut's way
        return False

    assert await api.until(gone, timeout=30), await _store_hits(api.backends.settings, GONE)
    # The match refused for them, beside its claim, left no claim behind: another game
    # server's key records the same match id (the erased player left out), which a claim
    # kept by the first key would refuse (403, recorded by another game server). After the
    # erasure, whose last step cuts the embedded store's WAL, so as not to race it.
    _, other = await api.podium.keys.create("other", ["default"], False)
    free = await api.submit("m2", [("a", 5)], key=other)
    assert free.status_code == 200, free.text
    listed = await api.client.get("/v1/admin/webhooks/deliveries", headers=admin)
    assert GONE not in listed.text and len(listed.json()["deliveries"]) == 1  # c's ban's
    after = (await api.client.get(f"/v1/admin/players/{GONE}/export", headers=admin)).json()
    assert after["erased"] is True and after["results"] == [] and after["profile"] == []
    missing = await api.client.get(f"/v1/admin/erasures/era_{'0' * 24}", headers=admin)
    assert missing.status_code == 404
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("podium")]
    assert any(receipt["id"] in line for line in logged)  # the erasure, by its receipt
    assert [line for line in logged if GONE in line] == []


async def _stream_hits(url: str, name: str, needle: str) -> list[str]:
    """Every message of the stream whose subject, headers or body hold ``needle``."""
    return [
        f"{m.seq} {m.subject}"
        for m in await stream_messages(url, name)
        if needle.encode() in f"{m.subject} {m.headers} ".encode() + (m.data or b"")
    ]


async def erasure_done(api: Any, admin: dict[str, str], receipt: str, timeout: float) -> Any:
    """The erasure ``receipt`` polled until done: its record then, or None if not in time."""

    async def done() -> dict[str, Any] | None:
        got = await api.client.get(f"/v1/admin/erasures/{receipt}", headers=admin)
        body: dict[str, Any] = got.json()
        return body if body["state"] == "done" else None

    return await api.until(done, timeout=timeout)


async def test_on_nats_the_stream_keeps_no_message_naming_them(
    make_api: Any, tmp_path: Path, config_kind: str
) -> None:
    """With JetStream as the log, every message naming the player (their changes, the ban's
    and the freeze's events) is deleted from the stream by the erasure, not left to the
    stream's retention."""
    url = need_nats()
    name = stream_name()
    try:
        api = await make_api(
            log={"url": url, "stream": name},
            archive={"dir": str(tmp_path / "standings")},
            workers={"idle_sleep_s": 0.005, "erasure_settle_s": 0.3},
            # the split fleet's: two shard databases and a home, 16 index shards, NATS
            **({"index": {"shards": 16}} if config_kind == "split" else {}),
        )
        now = time.time()
        day = WindowRule(WindowKind.DAY).window_at(int(now))
        assert day is not None
        assert (await api.submit("m1", [(GONE, 30), ("a", 20)], ended_at=now)).status_code == 200
        assert (await api.submit("m2", [(GONE, 31), ("b", 2)], ended_at=now)).status_code == 200
        admin = api.auth(api.admin_key)
        freeze = f"/v1/admin/boards/day/windows/{day.id}/freeze"
        assert (await api.client.post(freeze, headers=admin)).status_code == 200
        r = await api.client.post(
            f"/v1/admin/players/{GONE}/ban", json={"reason": "x"}, headers=admin
        )
        assert r.status_code in (202, 204), r.text
        await api.settle()

        async def named() -> list[str]:
            return await _stream_hits(url, name, GONE)

        assert await api.until(named, timeout=15), "the stream never held their messages"
        r = await api.client.delete(f"/v1/admin/players/{GONE}", headers=admin)
        assert r.status_code == 202
        assert await erasure_done(api, admin, r.json()["id"], timeout=30)
        assert await _stream_hits(url, name, GONE) == []
        assert [x.player_id for x in (await api.podium.reads.page("week", None, 0, 9)).entries] == [
            "a",
            "b",
        ]
    finally:
        await delete_stream([url], name)


async def test_results_racing_the_erasure_do_not_bring_them_back(
    settings: Settings, tmp_path: Path
) -> None:
    """A game server keeps sending the player's results while the erasure is asked and
    carried out, and the updater keeps applying the log: those recorded before the receipt
    are swept, those after are refused, and nothing of the player is left."""
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(settings, clock)
    await b.start()
    svc = b.podium
    accepted, refused = 0, 0
    stop = asyncio.Event()

    async def game_server() -> None:
        nonlocal accepted, refused
        i = 0
        while not stop.is_set():
            i += 1
            try:
                await svc.matches.record(
                    KEY,
                    f"r{i}",
                    "default",
                    day + i % 3000,
                    60,
                    [PlayerResult(GONE, i), PlayerResult("a", 1)],
                )
                accepted += 1
            except Erased:
                refused += 1
            await asyncio.sleep(0)

    async def updater() -> None:
        while not stop.is_set():
            await _drain(b)
            await asyncio.sleep(0.001)

    try:
        tasks = [asyncio.create_task(game_server()), asyncio.create_task(updater())]
        deadline = time.monotonic() + 20
        while accepted < 3 and time.monotonic() < deadline:  # results of theirs in flight
            await asyncio.sleep(0.01)
        receipt = await svc.erasures.request(GONE, "admin-key")
        await svc.erasures.erase_due()
        while refused < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*tasks)
        await _drain(b)
        assert accepted > 0 and refused > 0
        done = await svc.erasures.status(receipt.id)
        assert done is not None and done.done_at is not None
        assert await _store_hits(settings, GONE) == []
        assert await _index_hits(b, GONE) == []
    finally:
        stop.set()
        await b.close()


@pytest.fixture
async def kafka_topic() -> AsyncIterator[tuple[str, str]]:
    """The machine's broker and a topic name of this test's own, its topics deleted after the
    test's app is closed (a fixture asked for before ``make_api`` is torn down after it): one
    deleted while the app still runs is made again by its relay's next write."""
    kafka, topic = need_kafka(), topic_name()
    try:
        yield kafka, topic
    finally:
        await delete_log_topics(kafka, topic)


async def test_on_kafka_a_replay_of_the_topic_brings_nothing_back(
    kafka_topic: tuple[str, str], make_api: Any
) -> None:
    """Kafka keeps the player's records until the topic's retention (docs/architecture.md
    §9): a replay of them after the erasure (as after a Redis failover) is skipped by the
    updaters, as a banned player's is."""
    kafka, topic = kafka_topic
    api = await make_api(
        log={
            "url": f"kafka://{kafka}",
            "partitions": 2,
            "kafka": {"topic": topic, "events_topic": f"{topic}-events", "group": f"{topic}-u"},
        },
        workers={"idle_sleep_s": 0.005, "erasure_settle_s": 0.3},
    )
    assert (await api.submit("m1", [(GONE, 30), ("a", 20)])).status_code == 200

    async def shown() -> bool:
        page = await api.page("week")
        return [e["playerId"] for e in page["entries"]] == [GONE, "a"]

    assert await api.until(shown, timeout=20), "the results did not reach the board"
    admin = api.auth(api.admin_key)
    r = await api.client.delete(f"/v1/admin/players/{GONE}", headers=admin)
    assert await erasure_done(api, admin, r.json()["id"], timeout=30)
    await api.backends.replay(3600)  # the topic's records of them, applied again
    await asyncio.sleep(1.0)
    await api.fresh()
    assert [e["playerId"] for e in (await api.page("week"))["entries"]] == ["a"]
    assert await _index_hits(api.backends, GONE) == []


async def _held_index(b: bootstrap.Backends) -> Any:
    """The whole index as it is now, to be put back by ``_put_back``: every key's DUMP on
    Redis (the generation markers with them), a deep copy of each in-process shard."""
    if b.settings.index.url.startswith("memory"):
        shards = b.index.shards if isinstance(b.index, SplitIndex) else [b.index]
        return copy.deepcopy(
            [(s._boards, s._retired, s._next, s.copy._held, s.copy._complete) for s in shards]
        )
    client = client_for(b.settings.index.url)
    try:
        return {
            k: await client.dump(k)
            async for k in client.scan_iter(match=f"{b.settings.index.prefix}:*")
        }
    finally:
        await client.aclose()


async def _put_back(b: bootstrap.Backends, held: Any) -> None:
    """The index as ``_held_index`` saw it: what a replica that took over lacking the last
    writes holds (on Redis), or the in-process index's state as it was."""
    if b.settings.index.url.startswith("memory"):
        shards = b.index.shards if isinstance(b.index, SplitIndex) else [b.index]
        for shard, (boards, retired, nxt, profiles, complete) in zip(
            shards, copy.deepcopy(held), strict=True
        ):
            assert isinstance(shard, MemoryIndex)
            shard._boards, shard._retired, shard._next = boards, retired, nxt
            shard.copy._held, shard.copy._complete = profiles, complete
        return
    client = client_for(b.settings.index.url)
    try:
        for k, v in held.items():
            await client.restore(k, 0, v, replace=True)
    finally:
        await client.aclose()


async def _erased_then_put_back(b: bootstrap.Backends, day: float) -> None:
    """GONE, a and b on the day's boards and a league cohort, GONE with a profile; GONE
    erased to the end; then the index put back as it was before the erasure."""
    svc = b.podium
    for i, (p, pts) in enumerate({GONE: 90, "a": 50, "b": 20}.items()):
        await svc.matches.record(
            KEY, f"m{i}", "default", day + 60 * i, 60, [PlayerResult(p, pts, {"k": "v"})]
        )
    await svc.player_admin.set_profile(Profile(GONE, "Gone Girl", None, "DE"))
    await _drain(b)
    held = await _held_index(b)
    assert await _index_hits(b, GONE)
    receipt = await svc.erasures.request(GONE, "admin-key")
    await svc.erasures.erase_due()
    done = await svc.erasures.status(receipt.id)
    assert done is not None and done.done_at is not None
    assert await _index_hits(b, GONE) == []
    await _put_back(b, held)
    assert await _index_hits(b, GONE)  # the copies are back


async def test_a_replica_promoted_without_the_erasures_deletes_does_not_bring_them_back(
    settings: Settings,
) -> None:
    """A Redis replica that took over lacking the erasure's deletes (the index's keys put
    back as they were before it, the generation markers with them; in process, the index's
    state put back), then what the mender does on a failover (the log's last hour applied
    again) and the reconciler's passes: the player is not on the boards, and no index key
    or member names them."""
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(settings, clock)
    await b.start()
    try:
        await _erased_then_put_back(b, day)
        await b.replay(3600)
        await _drain(b)
        reconciler = Reconciler(b.settings, b.store, b.index, b.clock)
        for _ in range(20):
            await reconciler.step()
        window = b.podium.boards.board("day").rule.window_at(day)
        assert window is not None
        page = await b.podium.reads.page("day", window.id, 0, 10)
        assert [e.player_id for e in page.entries] == ["a", "b"]
        assert await _index_hits(b, GONE) == []
    finally:
        await b.close()


@pytest.mark.parametrize("config_kind", ["production"])
async def test_the_reconciler_forgets_an_erased_member_without_a_ban(settings: Settings) -> None:
    """Before its next sweep is due, the reconciler's own walk finds the erased player back
    on the day and week boards (a member the store has no tally of) and takes them off
    without writing their id into a ban set: the store refuses them by the hash of it."""
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(settings, clock)
    await b.start()
    try:
        await _erased_then_put_back(b, day)
        reconciler = Reconciler(b.settings, b.store, b.index, b.clock)
        reconciler._swept_at = clock.now()  # the sweep is not due: the walk alone
        for _ in range(40):
            await reconciler.step()
        window = b.podium.boards.board("day").rule.window_at(day)
        assert window is not None
        page = await b.podium.reads.page("day", window.id, 0, 10)
        assert [e.player_id for e in page.entries] == ["a", "b"]
        hits = await _index_hits(b, GONE)
        assert not [h for h in hits if ":ban: " in h]  # no ban set names them
        # off the day and week boards; only what the walk does not read is left
        assert hits and all("profiles" in h or "league" in h for h in hits), hits
        assert await reconciler.sweep() > 0  # the rest (profile copy, cohort) by the sweep
        assert await _index_hits(b, GONE) == []
    finally:
        await b.close()


@pytest.mark.parametrize("config_kind", ["production", "split"])
async def test_the_mender_sweeps_an_erased_player_out_after_a_failover(settings: Settings) -> None:
    """The replica that took over seen as the mender sees it (every generation marker
    naming another node than the one that holds it now): its look replays the log and
    sweeps the index by hash, and no key or member names the player, before any reconciler
    pass."""
    day = _midweek(30)
    clock = Clock(day + 3600)
    b = bootstrap.build(settings, clock)
    await b.start()
    client = client_for(settings.index.url)
    try:
        await _erased_then_put_back(b, day)
        markers = [k async for k in client.scan_iter(match=f"{settings.index.prefix}:*gen")]
        assert markers
        for k in markers:  # written on the old primary: its identity, not this node's
            token = (await client.get(k)).partition(" ")[0]
            await client.set(k, f"{token} old-run:old-replid")
        m = mender.mender(b.needs())
        assert m is not None
        await m.step()
        assert await _index_hits(b, GONE) == []
        window = b.podium.boards.board("day").rule.window_at(day)
        assert window is not None
        page = await b.podium.reads.page("day", window.id, 0, 10)
        assert [e.player_id for e in page.entries] == ["a", "b"]
    finally:
        await client.aclose()
        await b.close()
