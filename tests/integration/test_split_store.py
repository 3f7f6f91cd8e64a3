"""What only a store split by player has to get right beyond the contract suite: a claim of
the outbox when the rows are all on one database, and pages of every player read while a
bucket has a copy on two databases."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from podium import bootstrap
from podium.config.settings import parse
from podium.domain.boards import BoardSpec
from podium.domain.models import Change, MatchQuery, Profile, ResultRecord, Target
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import ConfigError
from podium.store.postgres import PostgresStore
from podium.store.split import SplitStore
from tests.contract.conftest import postgres_databases  # noqa: F401 (a fixture)

T0 = 1_792_800_000
NOW = float(T0 + 2 * 86_400)
DAY = BoardSpec("day", WindowRule(WindowKind.DAY))
W = DAY.rule.window_at(T0 + 100)
assert W is not None
TARGETS = [(Target("day", W.id, W.start), DAY)]


async def test_a_claim_tops_up_from_the_database_that_has_the_rows(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    home, other = await postgres_databases(2)
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    try:
        # every row on one database: a player's, five results in a row
        p = next(f"p{i}" for i in range(100) if store.url_of(f"p{i}") == other)
        for i in range(5):
            r = ResultRecord(p, f"m{i}", "k1", "ranked", T0 + 100 + i, 300, 1)
            await store.record(r, TARGETS, NOW, None)
        first = await store.claim_changes(4, 30, NOW)  # a share of 2 each, topped up to 4
        assert [c.tally.total for c in first if isinstance(c, Change)] == [1, 2, 3, 4]
        rest = await store.claim_changes(4, 30, NOW)
        assert [c.tally.total for c in rest if isinstance(c, Change)] == [5]
        await store.ack_changes([c.handle for c in first + rest])  # type: ignore[misc]
        assert await store.outbox_backlog(NOW) == (0, 0.0)
    finally:
        await store.close()


async def test_pages_of_every_player_count_a_copied_bucket_once(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    home, other = await postgres_databases(2)
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    try:
        players = [f"p{i:02d}" for i in range(30)]
        for p in players:
            await store.set_profile(Profile(p, p.upper()), NOW)
            await store.record(
                ResultRecord(p, "m", "k1", "ranked", T0 + 100, 300, 3), TARGETS, NOW, None
            )
        # a copy of some players on the database the map does not put them on, as a
        # bucket being moved leaves for a while: stale rows with other names and totals
        copies: dict[str, list[str]] = {}
        for p in players[::3]:
            copies.setdefault(home if store.url_of(p) == other else other, []).append(p)
        for url, ids in copies.items():
            await store.router.db(url).run(
                lambda c, ids=ids: c.execute(  # type: ignore[misc]
                    "INSERT INTO profiles (player_id, name, version) "
                    "SELECT p, 'stale', 9 FROM unnest($1::text[]) AS p",
                    ids,
                ),
                tx=False,
            )
            await store.router.db(url).run(
                lambda c, ids=ids: c.execute(  # type: ignore[misc]
                    "INSERT INTO tallies (board, window_id, player_id, total, reached_at, "
                    "version) SELECT 'day', $2, p, 99, 0, 9 FROM unnest($1::text[]) AS p",
                    ids,
                    W.id,
                ),
                tx=False,
            )
        pages, after = [], ""
        while page := await store.all_profiles(after, 4):
            pages.append(page)
            after = page[-1][0].player_id
        flat = [(pr.player_id, pr.name, v) for page in pages for pr, v in page]
        assert flat == [(p, p.upper(), 1) for p in players]
        assert all(len(page) == 4 for page in pages[:-1])
        standings = [s async for b in store.standings("day", W.id, batch=4) for s in b]
        assert [(s.player_id, s.tally.total) for s in standings] == [(p, 3) for p in players]
    finally:
        await store.close()


async def test_a_record_on_another_database_claims_its_match_if_the_claim_is_gone(
    postgres_databases: Callable[[int], Awaitable[list[str]]],  # noqa: F811
) -> None:
    """The contract's case, with the player and the match id on different databases: the
    record writes the claim on the match id's database again, whether its handle came from
    the call that claimed (and released here) or from a concurrent one that did not."""
    home, other = await postgres_databases(2)
    store = SplitStore.from_urls(home, [home, other])
    await store.migrate()
    try:
        players = [f"p{i}" for i in range(100) if store.url_of(f"p{i}") == other]
        matches = [f"m{i}" for i in range(100) if store.url_of(f"m{i}") == home]
        for p, m in zip(players[:2], matches[:2], strict=True):
            first = await store.open_match(
                MatchQuery(m, "k1", NOW, [p], "ranked", 5, None, TARGETS)
            )
            second = await store.open_match(
                MatchQuery(m, "k1", NOW + 1, [p], "ranked", 5, None, TARGETS)
            )
            assert first.claimed and not second.claimed
            assert await store.release_match(m, "k1", NOW)
            handle = first.handle(p) if m == matches[0] else second.handle(p)
            r = ResultRecord(p, m, "k1", "ranked", T0 + 100, 300, 4)
            await store.record(r, TARGETS, NOW, None, handle)
            again = await store.open_match(MatchQuery(m, "k2", NOW + 2, [], "ranked", 5, None))
            assert (again.owner, again.claimed) == ("k1", False)
        # and the claiming call's own record, with nothing released, writes no claim there
        # (it is there already): the match is still the first key's
        p, m = players[2], matches[2]
        opened = await store.open_match(MatchQuery(m, "k1", NOW, [p], "ranked", 5, None, TARGETS))
        r = ResultRecord(p, m, "k1", "ranked", T0 + 100, 300, 4)
        await store.record(r, TARGETS, NOW, None, opened.handle(p))
        assert (
            await store.open_match(MatchQuery(m, "k2", NOW, [], "ranked", 5, None))
        ).owner == "k1"
    finally:
        await store.close()


def test_bootstrap_builds_the_split_store_for_store_shards() -> None:
    home = "postgresql://podium@db0.invalid/podium"
    shards = [home, "postgresql://podium@db1.invalid/podium"]
    built = bootstrap._store(parse({"store": {"url": home, "shards": shards}}))
    assert isinstance(built, SplitStore)
    assert isinstance(bootstrap._store(parse({"store": {"url": home}})), PostgresStore)
    with pytest.raises(ConfigError, match="postgresql"):
        bootstrap._store(parse({"store": {"url": "sqlite:///x.db", "shards": shards}}))
    with pytest.raises(ConfigError, match="postgresql"):
        bootstrap._store(parse({"store": {"url": home, "shards": ["sqlite:///x.db"]}}))
