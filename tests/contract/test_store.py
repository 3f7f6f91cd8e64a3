"""The score store contract: one body per behaviour, run against SQLite and Postgres.

Every test gets a fresh, migrated store. Times are passed explicitly (``now``), never read
from a clock, so leases, hourly caps and backlog ages are exact on both backends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from podium.domain.boards import Aggregate, BoardSpec, Tally
from podium.domain.models import (
    ApiKey,
    Change,
    MatchQuery,
    Profile,
    ProfileChange,
    RecordOutcome,
    ResultRecord,
    Scope,
    Standing,
    Target,
)
from podium.domain.windows import WindowKind, WindowRule, grouped
from podium.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    RateLimited,
    StoreUnavailable,
    WindowClosed,
)
from podium.ports import MatchFacts, MatchRead, ScoreStore
from podium.ports.status import Heartbeat
from podium.store.postgres import PostgresStore
from podium.store.postgres.record import REPLANS
from podium.store.split import SplitStore
from podium.store.sqlite import SqliteStore
from tests.conftest import stored_results

T0 = 1_792_800_000  # 2026-10-24T00:00:00Z, a Saturday: a day window starts here
NOW = float(T0 + 2 * 86_400)  # wall time of the writes, after every match below
DAY = BoardSpec("day", WindowRule(WindowKind.DAY))
WEEK = BoardSpec("week", WindowRule(WindowKind.WEEK))
ALL_BEST = BoardSpec("best", WindowRule(WindowKind.ALL), aggregate=Aggregate.BEST)


def targets(ended_at: int, *specs: BoardSpec) -> list[tuple[Target, BoardSpec]]:
    """What ``Matches.targets`` builds: the window holding ``ended_at`` on each board."""
    out = []
    for spec in specs or (DAY, WEEK):
        w = spec.rule.window_at(ended_at)
        assert w is not None
        out.append((Target(spec.name, w.id, w.start), spec))
    return out


def result(
    match: str, points: int, ended_at: int = T0 + 100, *, player: str = "p1", key: str = "k1"
) -> ResultRecord:
    return ResultRecord(player, match, key, "ranked", ended_at, 300, points)


def tally_of(standings: Sequence[Standing], board: str) -> Tally:
    [s] = [s for s in standings if s.board == board]
    return s.tally


async def claim(store: ScoreStore, match_id: str, key_id: str, now: float) -> str:
    """Claim a match (an ``open_match`` of no players): the owner's key id."""
    return (await store.open_match(MatchQuery(match_id, key_id, now, [], "ranked", 0, None))).owner


async def read(
    store: ScoreStore,
    match_id: str,
    player_ids: list[str],
    mode: str,
    recent: int,
    since: float | None,
    t: Sequence[tuple[Target, BoardSpec]] = (),
) -> MatchRead:
    """The checks' read (``open_match``) under the key the results here are recorded with."""
    return await store.open_match(
        MatchQuery(match_id, "k1", NOW, player_ids, mode, recent, since, t)
    )


def make(kind: str, url: str) -> ScoreStore:
    if kind == "sqlite":
        return SqliteStore.from_url(url)
    if kind == "postgres":
        return PostgresStore.from_url(url)
    # Split by player: on two databases the home holds players too; on three it does not.
    urls = url.split(" ")
    return SplitStore.from_urls(urls[0], urls if len(urls) == 2 else urls[1:])


@pytest.fixture
async def split2_url(postgres_databases: Callable[[int], Awaitable[list[str]]]) -> str:
    """Two fresh databases, space-separated: the home and one more, both holding players."""
    return " ".join(await postgres_databases(2))


@pytest.fixture
async def split3_url(postgres_databases: Callable[[int], Awaitable[list[str]]]) -> str:
    """Three: a home that holds no players, and two that do."""
    return " ".join(await postgres_databases(3))


@pytest.fixture(params=["sqlite", "postgres", "split2", "split3"])
def backend(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(kind, url of a fresh empty database; for a store split across databases, the URLs
    of fresh ones, space-separated); Postgres is skipped or failed when absent."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return request.param, url


@pytest.fixture
async def store(backend: tuple[str, str]) -> AsyncIterator[ScoreStore]:
    s = make(*backend)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


# -- schema and credentials ----------------------------------------------------------------


async def test_migrate_again_is_harmless(store: ScoreStore) -> None:
    await store.add_key(ApiKey("k1", "server", "h1", ("ranked",), Scope.GAME, 1.0))
    await store.migrate()
    await asyncio.gather(store.migrate(), store.migrate())
    assert await store.key_by_hash("h1") is not None
    await store.ping()


@pytest.mark.empty_database
async def test_concurrent_first_migrations_on_an_empty_database(backend: tuple[str, str]) -> None:
    stores = [make(*backend) for _ in range(3)]
    try:
        await asyncio.gather(*(s.migrate() for s in stores))
        await stores[0].add_key(ApiKey("k1", "server", "h1"))
        assert await stores[2].key_by_hash("h1") is not None
    finally:
        for s in stores:
            await s.close()


async def test_the_store_time_is_its_own_clock_read_now(store: ScoreStore) -> None:
    """What the freezer decides due-ness by: a wall clock (the database server's), read at
    each call. Every server here runs on this machine, so it agrees with ours to within
    the round trip; and it moves."""
    before = time.time()
    first = await store.store_time()
    after = time.time()
    assert before - 1 <= first <= after + 1
    await asyncio.sleep(0.05)
    assert await store.store_time() > first


async def test_keys_round_trip(store: ScoreStore) -> None:
    server = ApiKey("k1", "eu-1", "hash-1", ("ranked", "casual"), Scope.GAME, 1_700_000_000.5)
    admin = ApiKey("k2", "boss", "hash-2", (), Scope.ADMIN, 1_700_000_001.0)
    ops = ApiKey("k3", "grafana", "hash-3", (), Scope.OPS, 1_700_000_002.0)
    for key in (server, admin, ops):
        await store.add_key(key)
    assert await store.key_by_hash("hash-1") == server
    assert await store.key_by_hash("hash-2") == admin
    assert await store.key_by_hash("hash-3") == ops
    assert await store.key_by_hash("nope") is None


async def test_keys_are_listed_oldest_first(store: ScoreStore) -> None:
    assert await store.list_keys() == []
    later = ApiKey("k2", "b", "hash-2", (), Scope.OPS, 2.0)
    first = ApiKey("k1", "a", "hash-1", ("ranked",), Scope.GAME, 1.0)
    await store.add_key(later)
    await store.add_key(first)
    assert await store.list_keys() == [first, later]


async def test_revoke_marks_the_key_once_and_keeps_it_listed(store: ScoreStore) -> None:
    key = ApiKey("k1", "eu-1", "hash-1", ("ranked",), Scope.GAME, 1.0)
    other = ApiKey("k2", "eu-2", "hash-2", ("ranked",), Scope.GAME, 2.0)
    await store.add_key(key)
    await store.add_key(other)
    revoked = await store.revoke_key("k1", 10.0)
    assert revoked is not None and revoked.revoked_at == 10.0 and revoked.revoked
    assert await store.key_by_hash("hash-1") == revoked
    # Revoking again keeps the first time; the other key is untouched.
    assert await store.revoke_key("k1", 20.0) == revoked
    assert await store.key_by_hash("hash-2") == other
    assert await store.list_keys() == [revoked, other]
    assert await store.revoke_key("nope", 10.0) is None


async def test_claim_match_returns_the_first_owner(store: ScoreStore) -> None:
    assert await claim(store, "m1", "k1", NOW) == "k1"
    assert await claim(store, "m1", "k2", NOW + 1) == "k1"
    assert await claim(store, "m1", "k1", NOW + 2) == "k1"
    assert await claim(store, "m2", "k2", NOW) == "k2"


async def test_concurrent_claims_of_one_match_agree_on_the_owner(store: ScoreStore) -> None:
    for m in range(10):
        owners = await asyncio.gather(*(claim(store, f"m{m}", f"k{i}", NOW) for i in range(8)))
        assert len(set(owners)) == 1 and owners[0] in {f"k{i}" for i in range(8)}


async def test_open_match_claims_and_reads_in_one_call(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    await store.record(result("m1", 10, player="a"), t, NOW - 100, None)
    await store.record(result("m0", 7, player="a"), t, NOW - 50, None)
    prior = await store.open_match(
        MatchQuery("m1", "k1", NOW, ["a", "b"], "ranked", 5, NOW - 3600, t)
    )
    assert prior.owner == "k1"
    assert prior == await read(store, "m1", ["a", "b"], "ranked", 5, NOW - 3600, t)
    assert prior.existing == {"a": result("m1", 10, player="a")}
    assert prior.counts == {"a": (2, NOW - 100)}
    # the first key keeps the match; another key reads who has it
    assert (
        await store.open_match(MatchQuery("m1", "k2", NOW, ["a"], "ranked", 5, None))
    ).owner == "k1"
    assert (
        await store.open_match(MatchQuery("m2", "k2", NOW, [], "ranked", 5, None))
    ).owner == "k2"
    assert await claim(store, "m2", "k1", NOW) == "k2"


async def test_concurrent_opens_of_one_match_agree_on_the_owner(store: ScoreStore) -> None:
    for m in range(10):
        opened = await asyncio.gather(
            *(
                store.open_match(MatchQuery(f"m{m}", f"k{i}", NOW, ["p1"], "ranked", 5, None))
                for i in range(8)
            )
        )
        owners = {o.owner for o in opened}
        assert len(owners) == 1 and owners <= {f"k{i}" for i in range(8)}


async def test_a_claim_fixes_the_facts_of_the_match(store: ScoreStore) -> None:
    first = await store.open_match(
        MatchQuery("m1", "k1", NOW, ["a"], "ranked", 5, None, ended_at=T0 + 100, duration_s=300)
    )
    assert first.claimed and first.facts == MatchFacts("ranked", T0 + 100, 300)
    # a later open, of any key, players or facts, reads the facts of the claim and claims
    # nothing
    for key, ended in (("k1", T0 + 101), ("k2", T0 + 100)):
        again = await store.open_match(
            MatchQuery("m1", key, NOW + 1, ["b"], "casual", 5, None, ended_at=ended, duration_s=9)
        )
        assert (again.owner, again.claimed) == ("k1", False)
        assert again.facts == MatchFacts("ranked", T0 + 100, 300)
    nothing = await store.open_match(MatchQuery("m2", "k1", NOW, [], "ranked", 5, None))
    assert nothing.claimed and nothing.facts is None


async def test_released_claim_frees_the_match_id(store: ScoreStore) -> None:
    opened = await store.open_match(MatchQuery("m1", "k1", NOW, ["a"], "ranked", 5, None))
    assert opened.claimed
    # only this call's claim: another key's, or another time's, is left alone
    assert not await store.release_match("m1", "k2", NOW)
    assert not await store.release_match("m1", "k1", NOW + 1)
    assert await store.release_match("m1", "k1", NOW)
    assert not await store.release_match("m1", "k1", NOW)  # a retry changes nothing
    assert await claim(store, "m1", "k2", NOW + 2) == "k2"


async def test_a_claim_with_results_is_never_released(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    opened = await store.open_match(MatchQuery("m1", "k1", NOW, ["a", "b"], "ranked", 5, None, t))
    await store.record(result("m1", 10, player="b"), t, NOW, None, opened.handle("b"))
    assert not await store.release_match("m1", "k1", NOW)
    assert await claim(store, "m1", "k2", NOW + 1) == "k1"


async def test_a_record_claims_its_match_if_the_claim_is_gone(store: ScoreStore) -> None:
    # The same key's concurrent rejection released the claim between this record's read and
    # its write: the record claims the match again, so no result is ever without its owner.
    t = targets(T0 + 100)
    opened = await store.open_match(MatchQuery("m1", "k1", NOW, ["a"], "ranked", 5, None, t))
    assert await store.release_match("m1", "k1", NOW)
    await store.record(result("m1", 10, player="a"), t, NOW, None, opened.handle("a"))
    assert await claim(store, "m1", "k2", NOW + 1) == "k1"
    again = await store.open_match(MatchQuery("m1", "k1", NOW + 1, ["b"], "ranked", 5, None))
    assert again.facts == MatchFacts("ranked", T0 + 100, 300)


async def test_handle_checks_the_fold_without_writing(store: ScoreStore) -> None:
    small = BoardSpec("week", WindowRule(WindowKind.WEEK))
    limit = small.codec.points_limit
    t = targets(T0 + 100, small)
    await store.record(result("m0", limit - 1, player="a"), t, NOW, None)
    opened = await store.open_match(MatchQuery("m1", "k1", NOW, ["a", "b"], "ranked", 5, None, t))
    handle_a, handle_b = opened.handle("a"), opened.handle("b")
    assert handle_a is not None and handle_b is not None
    handle_b.check(result("m1", 1, player="b"), t, NOW, None)
    with pytest.raises(InvalidInput, match="capacity"):
        handle_a.check(result("m1", 1, player="a"), t, NOW, None)
    assert await stored_results(store, "m1", ["a", "b"]) == {}
    # and the record refuses it too, under its locks
    with pytest.raises(InvalidInput, match="capacity"):
        await store.record(result("m1", 1, player="a"), t, NOW, None, handle_a)


# -- recording ------------------------------------------------------------------------------


async def test_sum_board_folds_out_of_order_results(store: ScoreStore) -> None:
    # Arrival order 100, 300, 200: reached_at is the latest end of a match that moved the
    # total (300), not the end of whichever arrived last.
    for match, points, ended in [("m1", 10, T0 + 100), ("m2", 5, T0 + 300), ("m3", 7, T0 + 200)]:
        out = await store.record(result(match, points, ended), targets(ended), NOW, None)
        assert not out.replayed
    assert out.totals == {"day": 22, "week": 22}
    day = tally_of(await store.player_standings("p1"), "day")
    assert day == Tally(22, T0 + 300, 3)
    assert (await store.outbox_backlog(NOW))[0] == 6

    # A zero-point match is stored but moves nothing: same tally, no outbox row.
    out = await store.record(result("m4", 0, T0 + 400), targets(T0 + 400), NOW, None)
    assert out == type(out)({"day": 22, "week": 22}, False)
    assert tally_of(await store.player_standings("p1"), "day") == Tally(22, T0 + 300, 3)
    assert (await store.outbox_backlog(NOW))[0] == 6
    assert "p1" in await stored_results(store, "m4", ["p1"])


async def test_best_board_keeps_the_best_and_the_first_time_it_was_set(store: ScoreStore) -> None:
    for match, points, ended in [("m1", 50, T0 + 300), ("m2", 40, T0 + 400), ("m3", 50, T0 + 100)]:
        await store.record(result(match, points, ended), targets(ended, ALL_BEST), NOW, None)
    assert tally_of(await store.player_standings("p1"), "best") == Tally(50, T0 + 100, 2)


async def test_retry_with_same_content_is_replayed(store: ScoreStore) -> None:
    r = result("m1", 10)
    first = await store.record(r, targets(r.ended_at), NOW, None)
    await store.record(result("m2", 5), targets(r.ended_at), NOW, None)
    again = await store.record(r, targets(r.ended_at), NOW + 60, None)
    assert first.totals == {"day": 10, "week": 10}
    assert again.replayed
    assert again.totals == {"day": 15, "week": 15}  # the stored totals, now
    assert (await store.outbox_backlog(NOW))[0] == 4
    assert tally_of(await store.player_standings("p1"), "day").version == 2


async def test_same_key_different_content_conflicts_and_changes_nothing(store: ScoreStore) -> None:
    r = result("m1", 10)
    await store.record(r, targets(r.ended_at), NOW, None)
    before = await store.player_standings("p1")
    with pytest.raises(Conflict):
        await store.record(result("m1", 11), targets(r.ended_at), NOW, None)
    assert await store.player_standings("p1") == before
    assert await stored_results(store, "m1", ["p1"]) == {"p1": r}
    assert (await store.outbox_backlog(NOW))[0] == 2


async def test_another_servers_match_is_forbidden(store: ScoreStore) -> None:
    r = result("m1", 10)
    await store.record(r, targets(r.ended_at), NOW, None)
    with pytest.raises(Forbidden):
        await store.record(result("m1", 10, key="k2"), targets(r.ended_at), NOW, None)
    assert await stored_results(store, "m1", ["p1"]) == {"p1": r}
    assert (await store.outbox_backlog(NOW))[0] == 2


async def test_hourly_cap(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    await store.record(result("old", 1), t, NOW - 5000, 2)  # outside the hour: not counted
    await store.record(result("m1", 1), t, NOW - 1000, 2)
    await store.record(result("m2", 1), t, NOW - 500, 2)
    with pytest.raises(RateLimited) as e:
        await store.record(result("m3", 1), t, NOW, 2)
    assert e.value.retry_after == 3600 - 1000 + 1  # when the oldest counted result ages out
    assert await stored_results(store, "m3", ["p1"]) == {}
    assert await store.totals("p1", [x for x, _ in t]) == {"day": 3, "week": 3}
    prior = await read(store, "m3", ["p1", "p2"], "ranked", 0, NOW - 3600)
    assert prior.counts == {"p1": (2, NOW - 1000)}
    # A retry of a stored result is still answered: the cap counts new results only.
    assert (await store.record(result("m2", 1), t, NOW, 2)).replayed
    # No cap, no limit.
    assert not (await store.record(result("m3", 1), t, NOW, None)).replayed


async def test_points_the_board_cannot_encode_write_nothing(store: ScoreStore) -> None:
    # 2**36 fits the all-time board (no time bits) but not a day board (17 time bits), so
    # the first target folds and the second refuses: the whole transaction must roll back.
    r = result("m1", 2**36)
    with pytest.raises(InvalidInput):
        await store.record(r, targets(r.ended_at, ALL_BEST, DAY), NOW, None)
    assert await stored_results(store, "m1", ["p1"]) == {}
    assert await store.player_standings("p1") == []
    assert await store.outbox_backlog(NOW) == (0, 0.0)
    # The same match with sane points is then accepted as new, not as a conflict.
    ok = await store.record(result("m1", 5), targets(r.ended_at, ALL_BEST, DAY), NOW, None)
    assert ok.totals == {"best": 5, "day": 5} and not ok.replayed


async def test_stored_results_and_totals(store: ScoreStore) -> None:
    a, b = result("m1", 10, player="a"), result("m1", 20, player="b")
    for r in (a, b):
        await store.record(r, targets(r.ended_at), NOW, None)
    assert await stored_results(store, "m1", ["a", "b", "c"]) == {"a": a, "b": b}
    assert await stored_results(store, "m1", []) == {}
    assert await stored_results(store, "m2", ["a"]) == {}
    day_t, _ = targets(T0 + 100, DAY)[0]
    other_day = Target("day", "2026-10-25", T0 + 86_400)
    assert await store.totals("b", [day_t, other_day]) == {"day": 20}
    assert await store.totals("nobody", [day_t]) == {}


async def test_concurrent_records_of_one_player_all_fold(store: ScoreStore) -> None:
    t = targets(T0 + 100, DAY)
    outs = await asyncio.gather(
        *(store.record(result(f"m{i}", i + 1, T0 + 100 + i), t, NOW, None) for i in range(20))
    )
    assert not any(o.replayed for o in outs)
    assert sorted(o.totals["day"] for o in outs)[-1] == sum(range(1, 21))
    assert tally_of(await store.player_standings("p1"), "day") == Tally(210, T0 + 119, 20)
    assert (await store.outbox_backlog(NOW))[0] == 20


async def test_concurrent_identical_retries_fold_once(store: ScoreStore) -> None:
    r = result("m1", 7)
    outs = await asyncio.gather(*(store.record(r, targets(r.ended_at), NOW, 3) for _ in range(5)))
    assert sorted(o.replayed for o in outs) == [False, True, True, True, True]
    assert all(o.totals == {"day": 7, "week": 7} for o in outs)
    assert (await store.outbox_backlog(NOW))[0] == 2
    assert tally_of(await store.player_standings("p1"), "day").version == 1


# -- writing from an earlier read (``prior``) -----------------------------------------------
# The service reads every player's state for a match once, then records each player with
# that read. A store may write from it; whatever changed in between, the outcome must be
# the one a record that reads again gives. (SQLite reads again every time: ``seen`` empty.)

GDAY = BoardSpec("gday", WindowRule(WindowKind.DAY), group_by="country")


async def read_then_record(
    store: ScoreStore, r: ResultRecord, t: list[tuple[Target, BoardSpec]], cap: int | None = None
) -> tuple[MatchRead, RecordOutcome]:
    """What ``Matches.record`` does for one player."""
    since = None if cap is None else NOW - 3600
    prior = await read(store, r.match_id, [r.player_id], r.mode, 5, since, t)
    return prior, await store.record(r, t, NOW, cap, prior.handle(r.player_id))


async def test_prior_read_sees_what_a_record_would_read(store: ScoreStore) -> None:
    await store.set_profile(Profile("p1", country="FR"), NOW)
    t = targets(T0 + 100, DAY, GDAY, ALL_BEST)
    for i, points in enumerate([10, 5, 0, 30]):
        prior, out = await read_then_record(store, result(f"m{i}", points, T0 + 100 + i), t)
        assert not out.reread and not out.replayed
    assert out.totals == {"day": 45, "gday": 45, "best": 30}
    prior = await read(store, "m9", ["p1", "p2"], "ranked", 5, None, t)
    # one outbox row per change, in order: m2 (0 points) moved nothing but the best board
    changes = await store.claim_changes(100, 30, NOW)
    assert [
        (c.board, c.tally.total) for c in changes if isinstance(c, Change) and c.board == "day"
    ] == [
        ("day", 10),
        ("day", 15),
        ("day", 45),
    ]
    # The read's handles are fresh, for a player with tallies and for one without: records
    # written from them read nothing again.
    for player in ("p1", "p2"):
        out = await store.record(result("m9", 1, player=player), t, NOW, None, prior.handle(player))
        assert not out.reread and not out.replayed


async def test_a_stale_prior_read_is_read_again(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    prior = await read(store, "m2", ["p1"], "ranked", 5, None, t)
    await store.record(result("m1", 10), t, NOW, None)  # lands between the read and the write
    out = await store.record(result("m2", 5), t, NOW, None, prior.handle("p1"))
    assert out.totals == {"day": 15, "week": 15} and not out.replayed
    assert out.reread
    assert tally_of(await store.player_standings("p1"), "day") == Tally(15, T0 + 100, 2)
    assert (await store.outbox_backlog(NOW))[0] == 4


async def test_a_prior_read_before_the_same_match_landed_is_a_replay(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    prior = await read(store, "m1", ["p1"], "ranked", 5, None, t)
    await store.record(result("m1", 10), t, NOW, None)
    out = await store.record(result("m1", 10), t, NOW, None, prior.handle("p1"))
    assert out.replayed and out.totals == {"day": 10, "week": 10}
    with pytest.raises(Conflict):
        await store.record(result("m1", 11), t, NOW, None, prior.handle("p1"))
    assert (await store.outbox_backlog(NOW))[0] == 2


async def test_a_freeze_after_the_prior_read_keeps_the_result_out(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    await store.record(result("m0", 1, player="p2"), t, NOW, None)
    prior = await read(store, "m1", ["p1"], "ranked", 5, None, t)
    day = DAY.rule.window_at(T0 + 100)
    assert day is not None
    assert await store.freeze(DAY, day, 100, NOW)
    out = await store.record(result("m1", 10), t, NOW, None, prior.handle("p1"))
    assert out.totals == {"week": 10}  # the day was frozen before the write: not counted
    assert [e.player_id for e in await store.final_page("day", day.id, 1, 10)] == ["p2"]
    assert {s.board for s in await store.player_standings("p1")} == {"week"}


async def test_a_freeze_leaves_out_players_banned_before_it(store: ScoreStore) -> None:
    """Banned players are in no final standings of a window frozen after their ban: the
    ranks close up behind them (a banned first makes the next player first), the window's
    count leaves them out, and the store keeps who was left out (so the archive, written
    again from the tallies, leaves them out too). An unban, or a ban, after the freeze
    changes none of it: frozen standings are final."""
    t = targets(T0 + 100)
    for i, (p, pts) in enumerate([("a", 10), ("b", 20), ("c", 50), ("d", 5)]):
        await store.record(result(f"m{i}", pts, player=p), t, NOW, None)
    await store.ban("c", "aimbot", NOW)
    day = DAY.rule.window_at(T0 + 100)
    assert day is not None
    assert await store.freeze(DAY, day, 2, NOW + 1)

    async def final() -> tuple[list[tuple[int, int, str, int]], int, set[str]]:
        page = await store.final_page("day", day.id, 1, 10)
        info = (await store.frozen("day"))[day.id]
        rows = [(e.position, e.rank, e.player_id, e.points) for e in page]
        return rows, info.players, await store.left_out("day", day.id)

    frozen = await final()
    assert frozen == ([(1, 1, "b", 20), (2, 2, "a", 10)], 3, {"c"})
    assert await store.final_entry("day", day.id, "c") is None
    assert await store.unban("c")
    await store.ban("b", "smurf", NOW + 2)
    assert not await store.freeze(DAY, day, 2, NOW + 3)
    assert await final() == frozen
    assert await store.left_out("week", "2026-W43") == set()  # not frozen: no one left out


async def test_a_move_between_groups_after_the_prior_read(store: ScoreStore) -> None:
    base = GDAY.rule.window_at(T0 + 100)
    assert base is not None
    t = targets(T0 + 100, GDAY)
    await store.set_profile(Profile("p1", country="FR"), NOW)
    await store.record(result("m0", 3), t, NOW, None)
    prior = await read(store, "m1", ["p1"], "ranked", 5, None, t)
    await store.set_profile(Profile("p1", country="DE"), NOW)
    out = await store.record(result("m1", 10), t, NOW, None, prior.handle("p1"))
    assert out.totals == {"gday": 13} and out.reread
    assert {s.window: s.tally.total for s in await store.player_standings("p1")} == {
        grouped(base, "DE").id: 13
    }


async def test_the_hourly_cap_holds_against_a_stale_prior_read(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    await store.record(result("m1", 1), t, NOW - 100, 2)
    prior = await read(store, "m3", ["p1"], "ranked", 5, NOW - 3600, t)
    assert prior.counts == {"p1": (1, NOW - 100)}
    await store.record(result("m2", 1), t, NOW - 50, 2)
    with pytest.raises(RateLimited):
        await store.record(result("m3", 1), t, NOW, 2, prior.handle("p1"))
    assert await stored_results(store, "m3", ["p1"]) == {}


async def test_concurrent_records_of_one_player_from_prior_reads_all_fold(
    store: ScoreStore,
) -> None:
    t = targets(T0 + 100, DAY)
    outs = await asyncio.gather(
        *(read_then_record(store, result(f"m{i}", i + 1, T0 + 100 + i), t) for i in range(20))
    )
    assert not any(o.replayed for _, o in outs)
    assert tally_of(await store.player_standings("p1"), "day") == Tally(210, T0 + 119, 20)
    assert (await store.outbox_backlog(NOW))[0] == 20


async def test_a_refused_record_among_concurrent_ones_writes_nothing_and_sinks_none(
    store: ScoreStore,
) -> None:
    """Records that arrive together may be written together (a group commit), each still
    its own unit: the one refused inside its write (its match is another key's) writes
    nothing, and every other is written."""
    t = targets(T0 + 100)
    assert await claim(store, "taken", "k2", NOW) == "k2"
    players = [f"q{i}" for i in range(12)]
    reads = [await read(store, f"m{i}", [p], "ranked", 5, None, t) for i, p in enumerate(players)]
    stolen = await read(store, "taken", ["qx"], "ranked", 5, None, t)
    assert stolen.owner == "k2"
    records = [result(f"m{i}", i + 1, player=p) for i, p in enumerate(players)]
    together = zip(records, reads, strict=True)
    outs = await asyncio.gather(
        *(store.record(r, t, NOW, None, got.handle(r.player_id)) for r, got in together),
        store.record(result("taken", 5, player="qx"), t, NOW, None, stolen.handle("qx")),
        return_exceptions=True,
    )
    assert isinstance(outs[-1], Forbidden)
    for i, out in enumerate(outs[:-1]):
        assert isinstance(out, RecordOutcome) and not out.replayed
        assert out.totals == {"day": i + 1, "week": i + 1}
    assert await store.results_of("taken", ["qx"]) == {}
    assert (await store.outbox_backlog(NOW))[0] == 2 * len(players)


async def test_prior_results_reads_what_the_checks_need(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    for i, (player, at) in enumerate([("a", NOW - 5000), ("a", NOW - 100), ("b", NOW - 50)]):
        await store.record(result(f"m{i}", 10 + i, T0 + 100 + i, player=player), t, at, None)
    await store.record(ResultRecord("a", "c1", "k1", "casual", T0, 300, 99), t, NOW - 10, None)
    ids = ["a", "b", "c"]
    got = await read(store, "m1", ids, "ranked", 5, NOW - 3600)
    assert got.existing == {"a": result("m1", 11, T0 + 101, player="a")}
    assert got.recent_points == {"a": [11, 10], "b": [12], "c": []}
    assert got.counts == {"a": (1, NOW - 100), "b": (1, NOW - 50)}
    assert (await read(store, "m1", ids, "ranked", 1, None)).counts == {}
    assert (await read(store, "m1", ids, "ranked", 1, None)).recent_points["a"] == [11]


async def test_refused_records_leave_the_store_usable(
    store: ScoreStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Every refusal inside a record rolls back and hands its connection back clean (on
    Postgres the pool would otherwise log a reset with an open transaction)."""
    t = targets(T0 + 100)
    await store.record(result("m1", 1), t, NOW, 1)
    refusals: list[tuple[type[Exception], ResultRecord, int | None]] = [
        (Conflict, result("m1", 2), None),
        (Forbidden, result("m1", 1, key="k2"), None),
        (RateLimited, result("m2", 1), 1),
        (InvalidInput, result("m3", 2**40), None),  # too many points for a day board
    ]
    for _ in range(3):  # more times than the pool has idle connections to hide a dirty one
        for error, r, cap in refusals:
            with pytest.raises(error):
                await store.record(r, t, NOW, cap)
    out = await store.record(result("m4", 5), t, NOW, None)
    assert out.totals == {"day": 6, "week": 6} and not out.replayed
    assert not [r for r in caplog.records if "transaction" in r.getMessage()]


async def test_grouped_windows_freeze_against_concurrent_records(store: ScoreStore) -> None:
    """A record on a grouped board locks its window before it knows the player's group;
    a freeze of one group's window still sees every result that counts for it."""
    board = BoardSpec("gday", WindowRule(WindowKind.DAY), group_by="country")
    base = board.rule.window_at(T0 + 100)
    assert base is not None
    fr = grouped(base, "FR")
    players = [f"p{i}" for i in range(6)]
    for i, p in enumerate(players):
        await store.set_profile(Profile(p, None, None, "FR" if i % 2 else "DE"), NOW)
    t = targets(T0 + 100, board, WEEK)

    async def submit(i: int) -> None:
        r = result(f"m{i}", 1 + i, T0 + 100 + i, player=players[i % len(players)])
        await store.record(r, t, NOW, None)

    async def freeze_soon() -> None:
        await asyncio.sleep(0.005)
        assert await store.freeze(board, fr, 100, NOW)

    await asyncio.gather(*(submit(i) for i in range(40)), freeze_soon())
    live = {s.player_id: s.tally.total async for b in store.standings("gday", fr.id) for s in b}
    final = await store.final_page("gday", fr.id, 1, 100)
    assert {e.player_id: e.points for e in final} == live
    assert (await store.frozen("gday"))[fr.id].players == len(live)
    # The frozen group refuses a result that counts for nothing else; the other group is open.
    with pytest.raises(WindowClosed):
        await store.record(result("late", 1, player="p1"), targets(T0 + 100, board), NOW, None)
    ok = await store.record(result("late", 1, player="p0"), targets(T0 + 100, board), NOW, None)
    assert not ok.replayed
    weekly = [(await store.totals(p, [t[1][0]]))["week"] for p in players]
    assert sum(weekly) == sum(1 + i for i in range(40))  # every result counted for the week


async def test_postgres_vacuums_the_outbox_it_drains(postgres_url: str) -> None:
    """Postgres only: claims and acks leave dead rows that autovacuum reaches too late."""
    store = PostgresStore(postgres_url, vacuum_outbox_every=30)
    await store.migrate()

    async def vacuums() -> int:
        rows = await store._fetch(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'outbox'"
        )
        return int(rows[0][0])

    try:
        before = await vacuums()
        t = targets(T0 + 100)
        for i in range(20):  # 40 outbox rows: one vacuum at the 30th acked row
            await store.record(result(f"m{i}", 1, player=f"p{i}"), t, NOW, None)
        for _ in range(4):
            await store.ack_changes([c.handle for c in await store.claim_changes(10, 30, NOW)])
        assert await store.outbox_backlog(NOW) == (0, 0.0)
        assert await vacuums() == before + 1
    finally:
        await store.close()


async def test_postgres_plans_a_stale_record_again_in_a_later_group(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Postgres only: a record whose player changed between its read and its group is read
    and planned again and written by a later group, not by the locked path (whose
    transaction holds the player's lock across four round trips); a retry of a stored
    result is answered from the read; one that changed every time is done by the locked
    path after ``REPLANS`` tries."""
    store = PostgresStore(postgres_url)
    await store.migrate()
    t = targets(T0 + 100)
    locked = 0
    real = store._locked

    async def counted(*args: Any) -> RecordOutcome:
        nonlocal locked
        locked += 1
        return await real(*args)

    monkeypatch.setattr(store, "_locked", counted)
    try:
        prior = await read(store, "m2", ["p1"], "ranked", 5, None, t)
        await store.record(result("m1", 10), t, NOW, None, None)  # between read and write
        assert locked == 1
        out = await store.record(result("m2", 5), t, NOW, None, prior.handle("p1"))
        assert out.totals == {"day": 15, "week": 15} and out.reread and not out.replayed
        assert locked == 1  # planned again, not locked
        # A retry of it, read after it was stored: a replay from the read, not locked.
        again = await read(store, "m2", ["p1"], "ranked", 5, None, t)
        out = await store.record(result("m2", 5), t, NOW, None, again.handle("p1"))
        assert out.replayed and out.totals == {"day": 15, "week": 15}
        with pytest.raises(Conflict):
            await store.record(result("m2", 6), t, NOW, None, again.handle("p1"))
        assert locked == 1
        # Changed again before each of its groups: the locked path, after REPLANS tries.
        real_read = store.read_players

        async def changing(q: MatchQuery) -> MatchRead:
            got = await real_read(q)
            await store.record(result(f"x{locked}", 1), t, NOW, None)
            return got

        monkeypatch.setattr(store, "read_players", changing)
        prior = await read(store, "m3", ["p1"], "ranked", 5, None, t)
        await store.record(result("m0", 1), t, NOW, None, None)
        before = locked
        out = await store.record(result("m3", 100), t, NOW, None, prior.handle("p1"))
        assert out.reread and not out.replayed
        assert locked - before == 1 + REPLANS  # each change a locked record; then m3's own
        day = tally_of(await store.player_standings("p1"), "day")
        assert day.total == 10 + 5 + 1 + REPLANS + 100
    finally:
        await store.close()


# -- standings ------------------------------------------------------------------------------


async def test_player_standings_windows_and_paged_standings(store: ScoreStore) -> None:
    for i, p in enumerate(["p3", "p1", "p5", "p2", "p4"]):
        r = result("m1", 10 * (i + 1), player=p)
        await store.record(r, targets(r.ended_at), NOW, None)
    r = result("m2", 1, T0 + 86_400 + 5, player="p1")  # the next day, the same week
    await store.record(r, targets(r.ended_at), NOW, None)

    mine = await store.player_standings("p1")
    assert sorted((s.board, s.window, s.tally.total) for s in mine) == [
        ("day", "2026-10-24", 20),
        ("day", "2026-10-25", 1),
        ("week", "2026-W43", 21),
    ]
    assert await store.player_standings("nobody") == []
    assert await store.windows("day") == ["2026-10-24", "2026-10-25"]
    assert await store.windows("week") == ["2026-W43"]
    assert await store.windows("season") == []

    batches = [b async for b in store.standings("day", "2026-10-24", batch=2)]
    assert [len(b) for b in batches] == [2, 2, 1]
    flat = [s for b in batches for s in b]
    assert [s.player_id for s in flat] == ["p1", "p2", "p3", "p4", "p5"]
    assert flat[2] == Standing("day", "2026-10-24", "p3", Tally(10, T0 + 100, 1))
    assert [b async for b in store.standings("day", "1999-01-01")] == []

    # what a rebuild reads: the same tallies as plain rows, paged the same way
    rows = [b async for b in store.tally_rows("day", "2026-10-24", batch=2)]
    assert [len(b) for b in rows] == [2, 2, 1]
    assert [r for b in rows for r in b] == [
        (s.player_id, s.tally.total, s.tally.reached_at, s.tally.version, s.tally.metadata)
        for s in flat
    ]
    assert [b async for b in store.tally_rows("day", "1999-01-01")] == []
    assert await store.tally_count("day", "2026-10-24") == 5
    assert await store.tally_count("day", "1999-01-01") == 0


async def test_tallied_says_who_has_a_tally_in_one_window(store: ScoreStore) -> None:
    players = [f"t{i}" for i in range(12)]  # enough to land on every database of a split
    for p in players[:8]:
        r = result("m1", 5, player=p)
        await store.record(r, targets(r.ended_at), NOW, None)
    r = result("m2", 1, T0 + 86_400 + 5, player="t9")  # the next day: not in the first's
    await store.record(r, targets(r.ended_at), NOW, None)
    asked = [*players, "t3", "nobody"]  # a duplicate, and a player the store never saw
    assert await store.tallied("day", "2026-10-24", asked) == set(players[:8])
    assert await store.tallied("day", "2026-10-25", asked) == {"t9"}
    assert await store.tallied("week", "2026-W43", asked) == {*players[:8], "t9"}
    assert await store.tallied("week", "1999-W01", asked) == set()
    assert await store.tallied("season", "2026-10-24", asked) == set()
    assert await store.tallied("day", "2026-10-24", []) == set()


# -- the outbox -----------------------------------------------------------------------------


async def test_claim_leases_rows_and_ack_deletes_them(store: ScoreStore) -> None:
    for i in range(3):
        r = result(f"m{i}", 1, player=f"p{i}")
        await store.record(r, targets(r.ended_at, DAY), NOW, None)
    first = await store.claim_changes(10, 30, NOW + 1)
    # In row id order (on each database, where the store is split by player).
    assert sorted(c.player_id for c in first) == ["p0", "p1", "p2"]
    assert [c.handle for c in first] == sorted(c.handle for c in first)
    c0 = first[0]
    assert (c0.board, c0.window, c0.tally, c0.committed_at) == (
        "day",
        "2026-10-24",
        Tally(1, T0 + 100, 1),
        NOW,
    )
    assert await store.claim_changes(10, 30, NOW + 2) == []  # leased
    again = await store.claim_changes(10, 30, NOW + 31)  # the lease ran out
    assert [c.handle for c in again] == [c.handle for c in first]

    await store.ack_changes([first[0].handle, first[2].handle])
    await store.ack_changes([])
    assert (await store.outbox_backlog(NOW + 100))[0] == 1
    assert [c.handle for c in await store.claim_changes(10, 30, NOW + 100)] == [first[1].handle]


async def test_claim_is_by_row_not_by_high_water_mark(store: ScoreStore) -> None:
    for i in range(3):
        r = result(f"m{i}", 1, player=f"p{i}")
        await store.record(r, targets(r.ended_at, DAY), NOW, None)
    [a] = await store.claim_changes(1, 30, NOW)
    [b] = await store.claim_changes(1, 30, NOW)  # the next free row, not "after a"
    assert a.handle < b.handle  # type: ignore[operator]
    await store.ack_changes([b.handle])
    r = result("m9", 1, player="p9")
    await store.record(r, targets(r.ended_at, DAY), NOW, None)
    # The unclaimed lower row and the new row both come; the acked one never does; the
    # leased one comes back once its lease runs out, though its id is below ones handed out.
    later = await store.claim_changes(10, 30, NOW + 1)
    assert [c.handle for c in later] == sorted(c.handle for c in later)
    assert {c.player_id for c in later} == {"p0", "p1", "p2", "p9"} - {a.player_id, b.player_id}
    assert len(later) == 2
    assert [c.handle for c in await store.claim_changes(10, 30, NOW + 30)] == [a.handle]
    assert await store.claim_changes(0, 30, NOW + 1000) == []


async def test_requeue_player_writes_one_row_per_tally(store: ScoreStore) -> None:
    r = result("m1", 4)
    await store.record(r, targets(r.ended_at), NOW, None)
    await store.ack_changes([c.handle for c in await store.claim_changes(10, 30, NOW)])
    assert await store.requeue_player("p1", NOW + 5) == 2
    assert await store.requeue_player("nobody", NOW + 5) == 0
    rows = await store.claim_changes(10, 30, NOW + 6)
    assert sorted((c.board, c.tally.total, c.committed_at) for c in rows) == [
        ("day", 4, NOW + 5),
        ("week", 4, NOW + 5),
    ]


async def test_requeue_players_writes_every_players_tallies_in_one_call(
    store: ScoreStore,
) -> None:
    for i, points in enumerate((4, 7, 9)):
        r = result(f"m{i}", points, player=f"p{i}")
        await store.record(r, targets(r.ended_at), NOW, None)
    await store.ack_changes([c.handle for c in await store.claim_changes(10, 30, NOW)])
    # Each player once, whatever the list repeats; a player with no tally writes nothing.
    assert await store.requeue_players(["p2", "p0", "nobody", "p0"], NOW + 5) == 4
    assert await store.requeue_players([], NOW + 5) == 0
    rows = await store.claim_changes(10, 30, NOW + 6)
    assert sorted((c.player_id, c.board, c.tally.total, c.committed_at) for c in rows) == [
        ("p0", "day", 4, NOW + 5),
        ("p0", "week", 4, NOW + 5),
        ("p2", "day", 9, NOW + 5),
        ("p2", "week", 9, NOW + 5),
    ]


async def test_outbox_backlog_counts_and_ages(store: ScoreStore) -> None:
    assert await store.outbox_backlog(NOW) == (0, 0.0)
    r = result("m1", 4)
    await store.record(r, targets(r.ended_at), NOW, None)
    r = result("m2", 4)
    await store.record(r, targets(r.ended_at), NOW + 3, None)
    assert await store.outbox_backlog(NOW + 10) == (4, 10.0)
    await store.claim_changes(10, 30, NOW + 10)  # claimed is still not applied
    assert await store.outbox_backlog(NOW + 10) == (4, 10.0)


# -- players and bans -----------------------------------------------------------------------


async def test_profiles_round_trip(store: ScoreStore) -> None:
    await store.set_profile(Profile("p1", "Vex", "https://example.test/v.png"), NOW)
    await store.set_profile(Profile("p2", "Nyx", country="FR"), NOW)
    await store.set_profile(Profile("p2", "Nyx II", None, "FR"), NOW)
    assert await store.profiles(["p1", "p2", "p3"]) == {
        "p1": Profile("p1", "Vex", "https://example.test/v.png"),
        "p2": Profile("p2", "Nyx II", None, "FR"),
    }
    assert await store.profiles([]) == {}


async def test_profile_changes_are_versioned_and_go_to_the_outbox(store: ScoreStore) -> None:
    assert await store.set_profile(Profile("p1", "Vex"), NOW) == 1
    assert await store.set_profile(Profile("p2", "Nyx"), NOW + 1) == 1
    assert await store.set_profile(Profile("p1", "Vex II", country="FR"), NOW + 2) == 2
    assert await store.versioned_profiles(["p1", "p2", "p3"]) == {
        "p1": (Profile("p1", "Vex II", None, "FR"), 2),
        "p2": (Profile("p2", "Nyx"), 1),
    }
    assert await store.versioned_profiles([]) == {}
    changes = await store.claim_changes(100, 30.0, NOW + 3)
    profile_changes = [
        (c.player_id, c.version, c.committed_at) for c in changes if isinstance(c, ProfileChange)
    ]
    # each player's in commit order (players on several databases come in no set order)
    assert sorted(profile_changes) == [("p1", 1, NOW), ("p1", 2, NOW + 2), ("p2", 1, NOW + 1)]
    assert [v for p, v, _ in profile_changes if p == "p1"] == [1, 2]
    # only profile rows: nobody has a tally, so the move to FR moved nothing
    assert all(isinstance(c, ProfileChange) for c in changes)


async def test_all_profiles_pages_by_player_id(store: ScoreStore) -> None:
    for i in (3, 1, 5, 2, 4):
        await store.set_profile(Profile(f"p{i}", f"n{i}"), NOW)
    await store.set_profile(Profile("p4", "n4 again"), NOW)
    pages, after = [], ""
    while page := await store.all_profiles(after, 2):
        pages.append([(p.player_id, p.name, v) for p, v in page])
        after = page[-1][0].player_id
    assert pages == [
        [("p1", "n1", 1), ("p2", "n2", 1)],
        [("p3", "n3", 1), ("p4", "n4 again", 2)],
        [("p5", "n5", 1)],
    ]


async def test_set_friends_replaces_the_list(store: ScoreStore) -> None:
    assert await store.friends("p1") == []
    await store.set_friends("p1", ["c", "a", "b", "a"])
    assert await store.friends("p1") == ["a", "b", "c"]
    await store.set_friends("p1", ["d"])
    assert await store.friends("p1") == ["d"]
    await store.set_friends("p1", [])
    assert await store.friends("p1") == []
    assert await store.friends("p2") == []


async def test_ban_unban_banned(store: ScoreStore) -> None:
    await store.ban("p1", "aimbot", NOW)
    await store.ban("p1", "aimbot, confirmed", NOW + 1)  # again: updates, no error
    await store.ban("p2", "smurf", NOW)
    assert await store.banned(["p1", "p2", "p3", "p1"]) == {"p1", "p2"}
    assert await store.banned([]) == set()
    assert await store.every_ban() == {"p1", "p2"}
    assert await store.unban("p1") is True
    assert await store.unban("p1") is False
    assert await store.banned(["p1", "p2"]) == {"p2"}
    assert await store.every_ban() == {"p2"}


# -- failure --------------------------------------------------------------------------------


async def test_unreachable_postgres_is_store_unavailable_quickly() -> None:
    # Port 1 on loopback refuses at once; nothing to skip, no service needed.
    store = PostgresStore.from_url("postgresql://postgres@127.0.0.1:1/podium")
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailable):
            await store.migrate()
        with pytest.raises(StoreUnavailable):
            await store.record(result("m1", 1), targets(T0 + 100), NOW, None)
    finally:
        await store.close()
    assert time.monotonic() - started < 10


# -- retention: results leaving the store --------------------------------------------------


async def test_results_are_read_by_day_of_ended_at_in_key_order(store: ScoreStore) -> None:
    assert await store.oldest_result() is None
    day2 = T0 + 86_400
    # Player ids out of order, equal endedAt on one of them: the key orders them.
    rows = [
        ("m1", "zed", T0 + 500),
        ("m2", "ann", T0 + 500),
        ("m3", "bob", T0 + 100),
        ("m4", "ann", T0 + 100),
        ("m5", "cy", day2 + 10),
    ]
    for i, (m, p, ended) in enumerate(rows):
        flagged = ResultRecord(p, m, "k1", "ranked", ended, 300, 10 + i, "jump" if i == 2 else None)
        await store.record(flagged, targets(ended), NOW + i / 4, None)
    assert await store.oldest_result() == T0 + 100
    first = await store.results_ended(T0, day2, None, 10)
    assert [(r.ended_at, r.player_id, r.match_id) for r in first] == [
        (T0 + 100, "ann", "m4"),
        (T0 + 100, "bob", "m3"),
        (T0 + 500, "ann", "m2"),
        (T0 + 500, "zed", "m1"),
    ]
    bob = first[1]  # every column, as recorded
    assert (bob.key_id, bob.mode, bob.duration_s, bob.points) == ("k1", "ranked", 300, 12)
    assert (bob.recorded_at, bob.flag) == (NOW + 0.5, "jump")
    assert first[0].flag is None
    # A page at a time, from the first key after the last one seen.
    pages, after = [], None
    while page := await store.results_ended(T0, day2, after, 3):
        pages.append(page)
        after = page[-1].key
    assert [len(p) for p in pages] == [3, 1]
    assert [r for p in pages for r in p] == first
    assert [r.match_id for r in await store.results_ended(day2, day2 + 86_400, None, 10)] == ["m5"]


async def test_deleted_results_leave_tallies_and_claims(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    await store.record(result("m1", 10, player="a"), t, NOW, None)
    await store.record(result("m1", 20, player="b"), t, NOW, None)
    await store.record(result("m2", 5, player="a", ended_at=T0 + 200), t, NOW, None)
    before = {p: await store.player_standings(p) for p in ("a", "b")}
    assert await store.delete_results([("a", "m1"), ("b", "m1"), ("nobody", "m1")]) == 2
    assert await store.results_of("m1", ["a", "b"]) == {}
    assert set(await store.results_of("m2", ["a"])) == {"a"}
    assert await store.delete_results([("a", "m1")]) == 0  # a retry deletes nothing more
    assert await store.delete_results([]) == 0
    # The tallies stay (boards, rebuilds and bans read them), and so does the claim.
    assert {p: await store.player_standings(p) for p in ("a", "b")} == before
    assert await claim(store, "m1", "k2", NOW) == "k1"
    assert await store.oldest_result() == T0 + 200


# -- entry metadata ---------------------------------------------------------------------------
# Stored with the result, on each tally the result changed (on best boards only the result
# that set the score changes it; on sums every one that moved the total), and on each change
# of the outbox, so that the index (and a rebuild from ``standings``) shows it.

CAR = '{"car":"mx5"}'
KART = '{"car":"kart"}'


def with_meta(r: ResultRecord, text: str | None) -> ResultRecord:
    return dataclasses.replace(r, metadata=text)


async def test_metadata_is_stored_with_the_result_and_the_tally_it_set(store: ScoreStore) -> None:
    t = targets(T0 + 100, DAY, ALL_BEST)
    first = with_meta(result("m1", 50, T0 + 100), CAR)
    await store.record(first, t, NOW, None)
    # through the read before the write too (the one round trip path on Postgres)
    second = with_meta(result("m2", 40, T0 + 200), KART)
    await read_then_record(store, second, t)
    standings = await store.player_standings("p1")
    assert tally_of(standings, "best").metadata == CAR  # 40 set nothing on the best board
    assert tally_of(standings, "day").metadata == KART  # the latest that moved the sum
    assert await stored_results(store, "m1", ["p1"]) == {"p1": first}
    assert (await stored_results(store, "m2", ["p1"]))["p1"].metadata == KART
    # a result without metadata that moves a total leaves that tally without
    await store.record(result("m3", 5, T0 + 300), t, NOW, None)
    assert tally_of(await store.player_standings("p1"), "day").metadata is None
    changes = [c for c in await store.claim_changes(100, 30, NOW) if isinstance(c, Change)]
    assert [(c.board, c.tally.metadata) for c in changes] == [
        ("day", CAR), ("best", CAR), ("day", KART), ("day", None),
    ]  # fmt: skip
    # what a rebuild reads
    day = DAY.rule.window_at(T0 + 100)
    assert day is not None
    [page] = [p async for p in store.standings("day", day.id)]
    assert [(s.player_id, s.tally.metadata) for s in page] == [("p1", None)]
    [page] = [p async for p in store.standings("best", "all")]
    assert [(s.player_id, s.tally.metadata) for s in page] == [("p1", CAR)]
    [rows] = [p async for p in store.tally_rows("best", "all")]
    assert [(r[0], r[4]) for r in rows] == [("p1", CAR)]


async def test_a_retry_with_other_metadata_conflicts(store: ScoreStore) -> None:
    t = targets(T0 + 100)
    r = with_meta(result("m1", 10), CAR)
    await store.record(r, t, NOW, None)
    assert (await store.record(r, t, NOW + 5, None)).replayed
    _, again = await read_then_record(store, r, t)
    assert again.replayed
    before = await store.player_standings("p1")
    for other in (KART, None):
        with pytest.raises(Conflict):
            await store.record(with_meta(r, other), t, NOW, None)
        with pytest.raises(Conflict):
            await read_then_record(store, with_meta(r, other), t)
    assert await store.player_standings("p1") == before
    assert await stored_results(store, "m1", ["p1"]) == {"p1": r}


async def test_a_requeue_and_a_group_move_keep_the_metadata(store: ScoreStore) -> None:
    await store.set_profile(Profile("p1", country="FR"), NOW)
    t = targets(T0 + 100, DAY, GDAY)
    await store.record(with_meta(result("m1", 10), CAR), t, NOW, None)
    await store.ack_changes([c.handle for c in await store.claim_changes(100, 30, NOW)])
    assert await store.requeue_player("p1", NOW) == 2
    requeued = [c for c in await store.claim_changes(100, 30, NOW) if isinstance(c, Change)]
    assert sorted((c.board, c.tally.metadata) for c in requeued) == [("day", CAR), ("gday", CAR)]
    await store.ack_changes([c.handle for c in requeued])
    await store.set_profile(Profile("p1", country="DE"), NOW)
    moved = [c for c in await store.claim_changes(100, 30, NOW) if isinstance(c, Change)]
    assert [(c.removed, c.tally.metadata) for c in moved] == [(True, CAR), (False, CAR)]
    g = tally_of(await store.player_standings("p1"), "gday")
    assert g.metadata == CAR


# -- what podium status reads ----------------------------------------------------------------


async def test_heartbeats_keep_each_process_s_newest_and_forget_silent_ones(
    store: ScoreStore,
) -> None:
    assert await store.heartbeats() == []
    await store.beat("h1:1", {"updater": (100.0, 0.05), "freezer": (90.0, 5.0)})
    await store.beat("h2:2", {"updater": (110.0, 0.05)})
    await store.beat("h1:1", {"updater": (120.0, 0.05)})
    await store.beat("h1:1", {})  # a process whose roles have not looped yet writes nothing
    assert await store.heartbeats() == [
        Heartbeat("updater", "h1:1", 120.0, 0.05),
        Heartbeat("updater", "h2:2", 110.0, 0.05),
        Heartbeat("freezer", "h1:1", 90.0, 5.0),
    ]
    # a week of silence later, a beat forgets the processes that stopped
    later = 120.0 + 8 * 86_400
    await store.beat("h3:3", {"pruner": (later, 300.0)})
    assert await store.heartbeats() == [Heartbeat("pruner", "h3:3", later, 300.0)]


async def test_every_database_is_listed_reachable_without_credentials(
    store: ScoreStore, backend: tuple[str, str]
) -> None:
    found = await store.databases()
    assert len(found) == len(backend[1].split(" "))
    assert all(d.up and d.why is None for d in found), found
    assert all("@" not in d.name and "://" not in d.name for d in found), found
