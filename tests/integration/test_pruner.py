"""Results past ``[store] keep_results_days`` leave the store for day files, on every
configuration: while results keep arriving, with the pruner killed mid-way and run again,
every pruned result is in the archive exactly once and no write fails; boards and their
rebuilds are unchanged; a retry of a pruned result is refused; a day file is read back
into a scratch database whole."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from podium import bootstrap
from podium.archive import results as result_archive
from podium.archive.results import DayFiles
from podium.cli.main import app as cli
from podium.config.settings import Settings
from podium.domain.boards import BoardSpec
from podium.domain.models import ApiKey, PlayerResult, ResultRecord, Scope, Target
from podium.domain.retention import DAY_S, ResultKey, StoredResult, day_id, day_start
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import InvalidInput
from podium.ports import Retention
from podium.serve.app import create_app
from podium.store.split import SplitStore
from podium.store.sqlite import SqliteStore
from podium.workers.pruner import Pruner
from tests.contract.conftest import postgres_databases  # noqa: F401 (a fixture)
from tests.integration.conftest import KINDS_WITH_SPLIT, Backends, settings_for

CONFIG_KINDS = KINDS_WITH_SPLIT

KEEP_DAYS = 3
# Days in the future: Redis expires a closed window's keys by its own clock.
D0 = (int(time.time()) // DAY_S + 30) * DAY_S
BOARDS = [
    {"name": "all", "window": "all"},
    {"name": "day", "window": "day", "freeze_after_s": 30 * DAY_S},
]
KEY = ApiKey("gs", "gs", "h", ("default",), Scope.GAME, 0.0)
PLAYERS = [f"p{i:02d}" for i in range(12)]


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


class Killed(Exception):
    """What a pruner process killed at this point would have left behind."""


class Interleaved:
    """The store as the pruner sees it, with two hooks: each delete batch waits for a
    result recorded after the one before (so the pruner deletes while results are being
    recorded, on any machine), and a kill after ``kill_after`` pages read or deletes."""

    def __init__(
        self,
        store: Retention,
        writes: asyncio.Condition,
        written: list[int],
        *,
        kill_reads: int | None = None,
        kill_deletes: int | None = None,
    ) -> None:
        self.store = store
        self.writes = writes
        self.written = written
        self.kill_reads = kill_reads
        self.kill_deletes = kill_deletes
        self.reads = 0
        self.deletes = 0

    async def oldest_result(self) -> int | None:
        return await self.store.oldest_result()

    async def results_ended(
        self, start: int, end: int, after: ResultKey | None, limit: int
    ) -> list[StoredResult]:
        self.reads += 1
        if self.kill_reads is not None and self.reads > self.kill_reads:
            raise Killed("while reading")
        return await self.store.results_ended(start, end, after, limit)

    async def delete_results(self, keys: Sequence[tuple[str, str]]) -> int:
        if self.kill_deletes is not None and self.deletes >= self.kill_deletes:
            raise Killed("while deleting")
        self.deletes += 1
        seen = self.written[0]
        async with self.writes:
            await asyncio.wait_for(self.writes.wait_for(lambda: self.written[0] > seen), 60)
        return await self.store.delete_results(keys)


@pytest.fixture
def prune_settings(config_kind: str, backend_urls: Backends, tmp_path: Path) -> Settings:
    pg, prefix, shards = backend_urls
    s = settings_for(
        config_kind,
        f"sqlite:///{tmp_path}/prune.db",
        pg,
        prefix,
        shards=shards,
        boards=BOARDS,
        archive={"dir": str(tmp_path / "archive")},
        server={"page_cache_s": 0},
    )
    return dataclasses.replace(s, store=dataclasses.replace(s.store, keep_results_days=KEEP_DAYS))


async def _record_days(b: bootstrap.Backends, clock: Clock) -> dict[ResultKey, ResultRecord]:
    """Results spread over D0..D0+4 (days D0 and D0+1 to be pruned), four players a match."""
    out: dict[ResultKey, ResultRecord] = {}
    for i in range(120):
        ended = D0 + 1800 + i * 2_700  # 32 matches a day, about four days
        clock.t = ended + 60  # each sent as it ends
        match = f"m{i:03d}"
        players = [PLAYERS[(i + k) % len(PLAYERS)] for k in range(4)]
        await b.podium.matches.record(
            KEY,
            match,
            "default",
            ended,
            60,
            [PlayerResult(p, i % 50 + k, _car(i, k)) for k, p in enumerate(players)],
        )
        for k, p in enumerate(players):
            meta = _car(i, k)
            out[(ended, p, match)] = ResultRecord(
                p,
                match,
                "gs",
                "default",
                ended,
                60,
                i % 50 + k,
                metadata=None if meta is None else f'{{"car":"{meta["car"]}"}}',
            )
    return out


def _car(i: int, k: int) -> dict[str, str] | None:
    """Entry metadata on every other result: a day file keeps it with the result."""
    return {"car": f"c{i}-{k}"} if (i + k) % 2 else None


def _archived(directory: Path) -> Counter[ResultKey]:
    found: Counter[ResultKey] = Counter()
    for f in sorted((directory / "results").glob("*.csv.gz")):
        result_archive.verify(f)
        found.update(r.key for r in result_archive.rows(f))
    return found


async def _all_tallies(b: bootstrap.Backends) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for board in ("all", "day"):
        for window in sorted(await b.store.windows(board)):
            rows: list[object] = []
            async for batch in b.store.standings(board, window):
                rows += batch
            out[f"{board}/{window}"] = sorted(rows, key=lambda s: s.player_id)  # type: ignore[attr-defined]
    return out


async def test_pruning_under_a_stream_of_results_archives_each_result_once(
    prune_settings: Settings, tmp_path: Path
) -> None:
    clock = Clock(D0)
    b = bootstrap.build(prune_settings, clock)
    await b.start()
    try:
        recorded = await _record_days(b, clock)
        tallies = await _all_tallies(b)
        # Two days wholly past the retention: D0 and D0 + 1 (D0 + 2 ends after the bound).
        clock.t = D0 + (2 + KEEP_DAYS) * DAY_S + 60
        pruned = {k for k in recorded if k[0] < D0 + 2 * DAY_S}
        kept = set(recorded) - pruned
        assert pruned and kept

        writes = asyncio.Condition()
        written = [0]
        stop = asyncio.Event()
        stream: dict[str, int] = {}

        async def steady_stream() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                ended = int(clock.t) - 600
                out = await b.podium.matches.record(
                    KEY, f"s{n}", "default", ended, 60, [PlayerResult(f"q{n % 7}", 3)]
                )
                stream[f"s{n}"] = out[f"q{n % 7}"]["all"]
                async with writes:
                    written[0] += 1
                    writes.notify_all()
                await asyncio.sleep(0.001)

        writer = asyncio.create_task(steady_stream())
        directory = tmp_path / "archive"
        try:
            # Killed while writing its first day file: nothing deleted, no file in place.
            first = Interleaved(b.store, writes, written, kill_reads=3)
            with pytest.raises(Killed):
                await Pruner(first, DayFiles(directory), clock, KEEP_DAYS, page=10).step()
            assert b.store is not None and await b.store.oldest_result() == min(recorded)[0]
            # Killed between deletes of its first day, its file written.
            second = Interleaved(b.store, writes, written, kill_deletes=2)
            with pytest.raises(Killed):
                await Pruner(second, DayFiles(directory), clock, KEEP_DAYS, page=10).step()
            assert sum(_archived(directory).values()) > 0
            # A result recorded in the instant a pass went by (its check ran before the
            # pruner's bound moved past it): the next pass adds it to its day, once.
            late = ResultRecord("late", "m-late", "gs", "default", D0 + 900, 60, 7)
            targets = b.podium.matches.targets("default", late.ended_at, D0 + 4 * DAY_S)
            await b.store.record(late, targets, D0 + 4 * DAY_S, None)
            pruned.add((late.ended_at, late.player_id, late.match_id))
            # Run again to the end, while the stream goes on.
            third = Interleaved(b.store, writes, written)
            assert await Pruner(third, DayFiles(directory), clock, KEEP_DAYS, page=10).step() > 0
            assert third.deletes > 0
            # Nothing more to do: a pass with nothing past the bound deletes nothing.
            assert await Pruner(b.store, DayFiles(directory), clock, KEEP_DAYS).step() == 0
        finally:
            stop.set()
            await writer  # a failed write fails the test here

        archived = _archived(directory)
        assert set(archived) == pruned
        assert max(archived.values()) == 1
        assert sorted(p.name for p in (directory / "results").glob("*.csv.gz")) == [
            f"{time.strftime('%Y-%m-%d', time.gmtime(D0 + d * DAY_S))}.csv.gz" for d in (0, 1)
        ]
        # Out of the store, and only they: the later days and the stream are all there.
        assert await b.store.results_ended(D0, D0 + 2 * DAY_S, None, 10) == []
        for _, player, match in kept:
            assert set(await b.store.results_of(match, [player])) == {player}
        assert len(stream) == written[0] > 0
        for match, total in stream.items():
            assert total > 0
            assert len(await b.store.results_of(match, [f"q{int(match[1:]) % 7}"])) == 1

        # Tallies stay: the boards before, and a rebuild of a board from the store after.
        after = await _all_tallies(b)
        for name, rows in tallies.items():  # the stream's players and "late" are new
            assert [s for s in after[name] if s.player_id in PLAYERS] == rows  # type: ignore[attr-defined]
        # The all-time board still sums every result, the pruned ones too, and a rebuild
        # of it from the store (the tallies) gives the same board.
        sums = Counter[str]()
        for r in recorded.values():
            sums[r.player_id] += r.points
        totals = {s.player_id: s.tally.total for s in after["all/all"]}  # type: ignore[attr-defined]
        assert {p: totals[p] for p in sums} == dict(sums)
        assert await b.podium.rebuilds.rebuild("all", "all") == len(totals)
        if prune_settings.index.shards == 1:  # a split index answers pages from snapshots
            b.podium.reads.clear_cache()
            page = await b.podium.reads.page("all", None, 0, 100)
            assert {e.player_id: e.points for e in page.entries} == totals

        # A retry of a pruned result, however late, is refused: it would count again.
        ended, player, match = min(pruned - {(D0 + 900, "late", "m-late")})
        r = recorded[(ended, player, match)]
        with pytest.raises(InvalidInput, match="older than the 3 days the store keeps"):
            await b.podium.matches.record(
                KEY, match, "default", ended, 60, [PlayerResult(player, r.points)]
            )
        assert await b.store.results_of(match, [player]) == {}
    finally:
        await b.close()


async def test_a_pruned_day_restores_into_a_scratch_database(
    prune_settings: Settings, tmp_path: Path
) -> None:
    clock = Clock(D0)
    b = bootstrap.build(prune_settings, clock)
    await b.start()
    try:
        recorded = await _record_days(b, clock)
        clock.t = D0 + (1 + KEEP_DAYS) * DAY_S + 1  # the first day is past the retention
        deleted = await Pruner(
            b.store, DayFiles(tmp_path / "archive"), clock, KEEP_DAYS, page=7
        ).step()
    finally:
        await b.close()
    day = {k: r for k, r in recorded.items() if k[0] < D0 + DAY_S}
    assert deleted == len(day)

    [file] = (tmp_path / "archive" / "results").glob("*.csv.gz")
    manifest = result_archive.verify(file)
    assert manifest["results"] == len(day)
    scratch = SqliteStore.from_url(f"sqlite:///{tmp_path}/scratch.db")
    await scratch.migrate()
    await scratch.close()
    with sqlite3.connect(tmp_path / "scratch.db") as c:
        c.executemany(
            "INSERT INTO results (player_id, match_id, key_id, mode, ended_at, duration_s, "
            "points, recorded_at, flag, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    r.player_id,
                    r.match_id,
                    r.key_id,
                    r.mode,
                    r.ended_at,
                    r.duration_s,
                    r.points,
                    r.recorded_at,
                    r.flag,
                    r.metadata,
                )
                for r in result_archive.rows(file)
            ],
        )
    scratch = SqliteStore.from_url(f"sqlite:///{tmp_path}/scratch.db")
    try:
        for (_, player, match), r in day.items():
            found = await scratch.results_of(match, [player])
            assert found == {player: r}
    finally:
        await scratch.close()


@pytest.mark.parametrize("config_kind", ["embedded"])
async def test_a_result_past_the_retention_is_a_422_that_says_so(
    prune_settings: Settings,
) -> None:
    clock = Clock(D0 + 10 * DAY_S)
    app = create_app(prune_settings, roles=(), clock=clock)
    async with app.router.lifespan_context(app):
        backends: bootstrap.Backends = app.state.backends
        _, secret = await backends.podium.keys.create("gs", ("default",))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x")
        async with client:
            body = {
                "mode": "default",
                "endedAt": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(D0 + 10 * DAY_S - KEEP_DAYS * DAY_S - 5)
                ),
                "durationSeconds": 60,
                "results": [{"playerId": "a", "points": 5}],
            }
            auth = {"Authorization": f"Bearer {secret}"}
            r = await client.post("/v1/matches/old/results", json=body, headers=auth)
            assert r.status_code == 422, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            assert "store.keep_results_days" in r.json()["detail"]
            # Nothing was written, nothing claimed: the match id is free.
            assert await backends.store.results_of("old", ["a"]) == {}
            body["endedAt"] = time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(D0 + 10 * DAY_S - KEEP_DAYS * DAY_S + 5)
            )
            r = await client.post("/v1/matches/old/results", json=body, headers=auth)
            assert r.status_code == 200, r.text


def test_archive_results_by_hand_up_to_the_retention(tmp_path: Path) -> None:
    """By hand, as the role does; never past the retention (the CLI runs its own loop)."""
    config = tmp_path / "podium.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path}/hand.db"\nkeep_results_days = 90\n'
        f'[archive]\ndir = "{tmp_path}/archive"\n'
    )
    now = time.time()
    old, recent = day_start(int(now) - 100 * DAY_S) + 3600, int(now) - DAY_S
    every = BoardSpec("all", WindowRule(WindowKind.ALL))

    async def fill() -> None:
        store = SqliteStore.from_url(f"sqlite:///{tmp_path}/hand.db")
        await store.migrate()
        try:
            for i, ended in enumerate((old, old + 1, recent)):
                rec = ResultRecord(f"p{i}", f"m{i}", "gs", "default", ended, 60, 5)
                await store.record(rec, [(Target("all", "all", 0), every)], now, None)
        finally:
            await store.close()

    async def stored(match: str, player: str) -> set[str]:
        store = SqliteStore.from_url(f"sqlite:///{tmp_path}/hand.db")
        try:
            return set(await store.results_of(match, [player]))
        finally:
            await store.close()

    asyncio.run(fill())
    runner = CliRunner()
    args = ["archive", "results", "--config", str(config), "--before"]
    done = runner.invoke(cli, [*args, day_id(day_start(int(now)) - 80 * DAY_S)])
    assert done.exit_code == 1
    assert "within the 90 days the store keeps" in done.output
    done = runner.invoke(cli, [*args, day_id(day_start(old) + DAY_S)])
    assert done.exit_code == 0, done.output
    assert "2 results moved" in done.output
    [file] = (tmp_path / "archive" / "results").glob("*.csv.gz")
    assert file.name == f"{day_id(day_start(old))}.csv.gz"
    assert [x.match_id for x in result_archive.rows(file)] == ["m0", "m1"]
    assert asyncio.run(stored("m0", "p0")) == set()
    assert asyncio.run(stored("m2", "p2")) == {"p2"}


async def test_a_result_on_two_databases_of_a_split_store_is_archived_once(
    tmp_path: Path,
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    """A bucket being moved has its rows on two databases for a while: one key, one row in
    the day file, deleted from both."""
    home, other = await postgres_databases(2)
    store = SplitStore.from_urls(home, [home, other], pool_size=2, read_pool_size=2)
    await store.migrate()
    try:
        every = BoardSpec("all", WindowRule(WindowKind.ALL))
        players = [f"p{i:02d}" for i in range(12)]
        for i, p in enumerate(players):
            rec = ResultRecord(p, f"m{i}", "gs", "default", D0 + i, 60, 3)
            await store.record(rec, [(Target("all", "all", 0), every)], D0 + 100.0, None)
        copied = players[::3]
        for p in copied:  # the copy on the database the map does not put them on
            url = home if store.url_of(p) == other else other
            await store.router.db(url).run(
                lambda c, p=p: c.execute(  # type: ignore[misc]
                    "INSERT INTO results (player_id, match_id, key_id, mode, ended_at, "
                    "duration_s, points, recorded_at) "
                    f"VALUES ($1, 'm{players.index(p)}', 'gs', 'default', $2, 60, 3, $3)",
                    p,
                    D0 + players.index(p),
                    D0 + 100.0,
                ),
                tx=False,
            )
        page = await store.results_ended(D0, D0 + DAY_S, None, 100)
        assert [r.player_id for r in page] == players
        pruner = Pruner(
            store, DayFiles(tmp_path / "archive"), Clock(D0 + 5 * DAY_S), KEEP_DAYS, page=5
        )
        assert await pruner.step() == len(players) + len(copied)
        [file] = (tmp_path / "archive" / "results").glob("*.csv.gz")
        assert [r.player_id for r in result_archive.rows(file)] == players
        assert await store.oldest_result() is None
    finally:
        await store.close()
