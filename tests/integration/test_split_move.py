"""Moving a bucket of players to a new database while results keep arriving, from two
processes (one of which learns of the move only when the old database refuses it): nothing
lost, nothing doubled, and reads keep answering throughout."""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from podium.cli.main import app
from podium.domain.boards import BoardSpec
from podium.domain.models import MatchQuery, Profile, RecordOutcome, ResultRecord, Target
from podium.domain.sharding import bucket_of
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import InvalidInput, StoreUnavailable
from podium.store.postgres import PostgresStore
from podium.store.split import SplitStore
from tests.contract.conftest import postgres_databases  # noqa: F401 (a fixture)

T0 = 1_792_800_000
NOW = float(T0 + 2 * 86_400)
WEEK = BoardSpec("week", WindowRule(WindowKind.WEEK))
W = WEEK.rule.window_at(T0 + 100)
assert W is not None
TARGETS = [(Target("week", W.id, W.start), WEEK)]

# A bucket moves to a new database, which the move migrates itself: nothing in it before.
pytestmark = pytest.mark.empty_database


def in_bucket(bucket: int, n: int) -> list[str]:
    return [p for p in (f"p{i}" for i in range(400_000)) if bucket_of(p) == bucket][:n]


async def test_sql_bucket_is_the_domains(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    [home, other] = await postgres_databases(2)
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    rng = random.Random(3)
    ids = [
        "",
        "p_000123",
        "é☃漢字",
        *(secrets.token_urlsafe(rng.randint(1, 40)) for _ in range(200)),
    ]
    try:
        got = await store.router.home.run(
            lambda c: c.fetch("SELECT p, podium_bucket(p) AS b FROM unnest($1::text[]) AS p", ids),
            tx=False,
        )
        assert {r["p"]: r["b"] for r in got} == {p: bucket_of(p) for p in ids}
    finally:
        await store.close()


async def test_a_move_copies_every_table_the_players_own(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    """The tables a move copies are read from the catalog (the ones the bucket fence
    guards): every table with a player id but the outbox (delivered from where its rows were
    written), final standings and who a freeze left out, and tournament entrants (the
    home's, as tournaments are). A table added for players without the fence fails here."""
    [home, other] = await postgres_databases(2)
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    try:
        for url in (home, other):
            db = store.router.db(url)
            rows = await db.run(
                lambda c: c.fetch(
                    "SELECT table_name FROM information_schema.columns "
                    "WHERE column_name = 'player_id' AND table_schema = current_schema()"
                ),
                tx=False,
            )
            # tiers are decided on the home, in a cohort's freeze, and never move; nor do
            # the players a freeze left out, written with its final standings; nor the
            # erasure requests, kept on the home (their hash is noted on every database)
            home_only = {
                "final_standings",
                "left_out",
                "tournament_entrants",
                "league_tiers",
                "erasures",
            }
            owned = {r["table_name"] for r in rows} - {"outbox"} - home_only
            assert set(await db.bucket_tables()) == owned
            assert owned >= {"results", "tallies", "profiles", "friends", "bans", "cohort_members"}
    finally:
        await store.close()


async def test_a_bucket_moves_while_results_keep_arriving(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    home, other, new = await postgres_databases(3)
    stores = [SplitStore.from_urls(home, [home, other]) for _ in range(2)]  # two processes
    await stores[0].migrate()
    bucket = bucket_of("p0")
    moving = in_bucket(bucket, 4)
    staying = [f"q{i}" for i in range(8)]
    source = stores[0].url_of(moving[0])
    for p in moving:
        await stores[0].set_profile(Profile(p, f"name {p}"), NOW)
    accepted: dict[str, int] = {}
    seen: dict[str, int] = {}
    stop = asyncio.Event()
    rng = random.Random(11)

    async def write(i: int) -> RecordOutcome:
        s = stores[i % 2]
        p = (moving + staying)[i % (len(moving) + len(staying))]
        r = ResultRecord(p, f"m{i}", "k1", "ranked", T0 + 100, 300, rng.randint(1, 9))
        if i % 3:  # as the service does: a read first, then the write from it
            opened = await s.open_match(
                MatchQuery(r.match_id, "k1", NOW, [p], "ranked", 0, None, TARGETS)
            )
            out = await s.record(r, TARGETS, NOW, None, opened.handle(p))
        else:
            out = await s.record(r, TARGETS, NOW, None)
        accepted[p] = accepted.get(p, 0) + r.points
        return out

    async def writer(start: int) -> int:
        n = 0
        while not stop.is_set():
            await write(start + n * 4)
            n += 1
        return n

    async def reader() -> int:
        # Each process's reads never go back in time. Across the two they may, for up to
        # the map's TTL: once the bucket is the target's, the mover's process writes there
        # while the other, by its older map, still reads the source's copy (unchanged since
        # the fence, as move.py says), until it learns the new map.
        n = 0
        while not stop.is_set():
            for i, s in enumerate(stores):
                for p in moving:
                    total = (await s.totals(p, [TARGETS[0][0]])).get("week", 0)
                    assert total >= seen.get(f"{i}:{p}", 0), "a read went back in time"
                    seen[f"{i}:{p}"] = total
                    n += 1
            await asyncio.sleep(0.002)
        return n

    async def updater() -> None:  # drains the outbox, as the updaters do
        while not stop.is_set():
            changes = await stores[0].claim_changes(500, 30, NOW)
            await stores[0].ack_changes([c.handle for c in changes])  # type: ignore[misc]
            await asyncio.sleep(0.005)

    async def mover() -> bool:
        await asyncio.sleep(0.3)
        try:
            return await stores[0].move_bucket(bucket, new, grace_s=0.3)
        finally:
            await asyncio.sleep(0.3)
            stop.set()

    tasks = [*(writer(k) for k in range(4)), reader(), updater(), mover()]
    try:
        got = await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert got[-1] is True
        assert sum(got[:4]) > 40 and got[4] > 0
        # nothing lost, nothing doubled: every total is the sum of the accepted results
        fresh = SplitStore.from_urls(home, [home, other])
        for s in (*stores, fresh):
            for p in moving + staying:
                assert (await s.totals(p, [TARGETS[0][0]])) == {"week": accepted[p]}, p
            standings = [x async for b in s.standings("week", W.id, batch=3) for x in b]
            assert sorted(x.player_id for x in standings) == sorted(moving + staying)
            assert {x.player_id: x.tally.total for x in standings} == accepted
            profiles = await s.all_profiles("", 100)
            assert [p.player_id for p, _ in profiles] == sorted(moving)
        assert fresh.url_of(moving[0]) == new and fresh.url_of(staying[0]) != new
        assert new in fresh.router.urls()
        await fresh.close()
        # The source holds none of them any more, and refuses a write of them by an old map.
        old = PostgresStore.from_url(source)
        try:
            assert await old.player_standings(moving[0]) == []
            r = ResultRecord(moving[0], "late", "k1", "ranked", T0 + 100, 300, 1)
            with pytest.raises(StoreUnavailable, match="moved"):
                await old.record(r, TARGETS, NOW, None)
        finally:
            await old.close()
        assert not await stores[1].move_bucket(bucket, new)  # there already
        with pytest.raises(InvalidInput):
            await stores[1].move_bucket(4096, new)
    finally:
        for s in stores:
            await s.close()


async def split_with_config(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
    tmp_path: Path,
) -> tuple[SplitStore, Path, str]:
    """A store split over a home and one more database, its settings file for the command
    line, and a third database to move a bucket to."""
    home, other, new = await postgres_databases(3)
    conf = tmp_path / "podium.toml"
    conf.write_text(f'[store]\nurl = "{home}"\nshards = ["{home}", "{other}"]\n')
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    return store, conf, new


async def test_the_command_line_moves_a_bucket(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
    tmp_path: Path,
) -> None:
    store, conf, new = await split_with_config(postgres_databases, tmp_path)
    p = in_bucket(7, 1)[0]
    await store.set_profile(Profile(p, "seven"), NOW)
    # applied, as the fleet's updaters would (the move waits for the bucket's outbox rows)
    await store.ack_changes([c.handle for c in await store.claim_changes(10, 30, NOW)])  # type: ignore[misc]
    args = ["store", "move-bucket", "--bucket", "7", "--to", new, "--grace", "0"]
    try:
        done = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--config", str(conf)])
        assert done.exit_code == 0, done.output
        assert f"bucket 7 moved to {new}" in done.output
        await store.router.refresh_map()
        assert store.url_of(p) == new
        assert await store.profiles([p]) == {p: Profile(p, "seven")}
        again = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--config", str(conf)])
        assert again.exit_code == 0 and "already" in again.output
    finally:
        await store.close()


async def test_a_move_that_cannot_drain_is_undone(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    home, other, new = await postgres_databases(3)
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    p = in_bucket(7, 1)[0]
    source = store.url_of(p)
    # no updater runs: the bucket's outbox row never drains
    await store.set_profile(Profile(p, "seven"), NOW)
    try:
        with pytest.raises(StoreUnavailable, match=r"did not move.*did not drain"):
            await store.move_bucket(7, new, grace_s=0, drain_timeout_s=0.3)
        await store.router.refresh_map()
        assert store.url_of(p) == source  # the map still names the source
        # and the source takes the bucket's writes again, at once
        out = await store.record(
            ResultRecord(p, "m-after", "k", "ranked", T0 + 100, 60, 5), TARGETS, NOW, None
        )
        assert isinstance(out, RecordOutcome) and out.totals == {"week": 5}
        moving = await store.router.home.run(
            lambda c: c.fetchval("SELECT moving_to FROM bucket_map WHERE bucket = 7"), tx=False
        )
        assert moving is None
    finally:
        await store.close()


async def test_a_move_killed_halfway_is_undone_by_abort(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
    tmp_path: Path,
) -> None:
    store, conf, new = await split_with_config(postgres_databases, tmp_path)
    p = in_bucket(7, 1)[0]
    record = ResultRecord(p, "m1", "k", "ranked", T0 + 100, 60, 5)
    # a mover killed while it waited for the outbox to drain: the bucket fenced, marked
    await store.set_profile(Profile(p, "seven"), NOW)
    mover = asyncio.create_task(store.move_bucket(7, new, grace_s=0, drain_timeout_s=60))

    async def fenced() -> bool:
        return bool(
            await store.router.db(store.url_of(p)).run(
                lambda c: c.fetchval("SELECT count(*) FROM bucket_fences"), tx=False
            )
        )

    try:
        for _ in range(500):
            if await fenced():
                break
            await asyncio.sleep(0.01)
        mover.cancel()
        with pytest.raises(asyncio.CancelledError):
            await mover
        with pytest.raises(StoreUnavailable):  # refused, as a half-done move leaves it
            await store.record(record, TARGETS, NOW, None)
        args = ["store", "move-bucket", "--bucket", "7", "--abort", "--config", str(conf)]
        done = await asyncio.to_thread(CliRunner().invoke, app, args)
        assert done.exit_code == 0 and "undone" in done.output, done.output
        again = await asyncio.to_thread(CliRunner().invoke, app, args)
        assert again.exit_code == 0 and "not moving" in again.output, again.output
        out = await store.record(record, TARGETS, NOW, None)
        assert isinstance(out, RecordOutcome) and out.totals == {"week": 5}
    finally:
        await store.close()


async def test_a_move_sends_no_event_twice(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    """A flagged result's event and a ban's stay on the database they were written on, and
    are delivered from there: the copy a move makes of the result and the ban writes no
    event (a flag's would be the same id twice, a ban's a second event under a new id)."""
    home, other, new = await postgres_databases(3)
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    p = in_bucket(7, 1)[0]
    source = store.url_of(p)
    try:
        flagged = ResultRecord(p, "m1", "k", "ranked", T0 + 100, 60, 10, flag="jump: a test")
        await store.record(flagged, TARGETS, NOW, None)
        await store.ban(p, "aimbot", NOW)
        while changes := await store.claim_changes(100, 60.0, NOW):  # as the updaters do
            await store.ack_changes([m.handle for m in changes if isinstance(m.handle, int)])
        before = [(e.event_id, e.event_type) for e in await store.unpublished_events(100)]
        assert sorted(t for _, t in before) == ["player.banned", "player.flagged"]
        assert await store.move_bucket(7, new, grace_s=0)
        assert store.url_of(p) == new
        assert await store.router.db(new).unpublished_events(100) == []
        after = [(e.event_id, e.event_type) for e in await store.unpublished_events(100)]
        assert sorted(after) == sorted(before)
        assert {
            (e.event_id, e.event_type)
            for e in await store.router.db(source).unpublished_events(100)
        } == set(before)
    finally:
        await store.close()
