"""A player's data exported a page at a time and erased (``ports/erasure.py``), the same
bodies on every store: SQLite, Postgres, and Postgres split by player (the home holding
players, or not)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from podium.domain.erasure import EXPORT_SECTIONS, Erasure, Step, erased_digest
from podium.domain.models import Profile
from podium.ports import ScoreStore
from tests.contract import test_store as contract
from tests.contract.test_store import (  # noqa: F401
    DAY,
    NOW,
    T0,
    WEEK,
    result,
    split2_url,
    split3_url,
    targets,
)

NAME = "erased-0123456789abcdef01234567"


@pytest.fixture(params=["sqlite", "postgres", "split2", "split3"])
def kind_and_url(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def store(kind_and_url: tuple[str, str]) -> AsyncIterator[ScoreStore]:
    s = contract.make(*kind_and_url)
    s.erasure_secret = "test-secret"
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def _all(store: ScoreStore, player: str, section: str, limit: int) -> list[str]:
    keys: list[str] = []
    after = ""
    while page := await store.export_page(player, section, after, limit):
        keys += [k for k, _ in page]
        after = page[-1][0]
    return keys


async def _fill(store: ScoreStore) -> None:
    """p1 and p2 in one day window (then frozen) and the week; p1 with a profile, friends
    both ways, a ban; p3 on the boards after."""
    t = targets(T0 + 100)
    for i in range(12):
        await store.record(result(f"m{i:02d}", 10 + i, player="p1"), t, NOW, None)
    await store.record(result("x1", 500, player="p2"), t, NOW, None)
    await store.record(result("x2", 1, player="p3"), t, NOW, None)
    await store.set_profile(Profile("p1", "Vex", None, "DE"), NOW)
    await store.set_friends("p1", ["p2"])
    await store.set_friends("p2", ["p1", "p3"])
    day = DAY.rule.window_at(T0 + 100)
    assert day is not None
    assert await store.freeze(DAY, day, 100, NOW + 1)
    await store.ban("p1", "aimbot", NOW + 2)


async def test_an_export_reads_every_section_a_page_at_a_time(store: ScoreStore) -> None:
    await _fill(store)
    keys = await _all(store, "p1", "results", 5)
    assert keys == [f"m{i:02d}" for i in range(12)]  # each once, in key order
    assert await _all(store, "p1", "matches", 5) == keys
    [(_, profile)] = await store.export_page("p1", "profile", "", 10)
    assert (profile["name"], profile["country"]) == ("Vex", "DE")
    assert [r["friend_id"] for _, r in await store.export_page("p1", "friends", "", 10)] == ["p2"]
    assert [r["player_id"] for _, r in await store.export_page("p1", "friendOf", "", 10)] == ["p2"]
    [(_, ban)] = await store.export_page("p1", "ban", "", 10)
    assert ban["reason"] == "aimbot"
    final = await store.export_page("p1", "finalStandings", "", 10)
    assert [(r["board"], r["position"]) for _, r in final] == [("day", 2)]
    boards = {r["board"] for _, r in await store.export_page("p1", "tallies", "", 10)}
    assert boards == {"day", "week"}
    events = await store.export_page("p1", "webhookEvents", "", 10)
    assert "player.banned" in {r["type"] for _, r in events}
    for section in EXPORT_SECTIONS:
        assert await store.export_page("nobody", section, "", 10) == []


async def test_an_erasure_deletes_what_is_the_players_and_renames_what_others_need(
    store: ScoreStore,
) -> None:
    await _fill(store)
    day = DAY.rule.window_at(T0 + 100)
    assert day is not None
    before = [(e.position, e.rank, e.points) for e in await store.final_page("day", day.id, 1, 9)]
    counts = await store.erase_rows("p1", NAME)
    assert counts["results"] == 12 and counts["friends"] == 2 and counts["ban"] == 1
    assert counts["finalStandings"] == 1 and counts["profile"] == 1
    for section in EXPORT_SECTIONS:
        assert await store.export_page("p1", section, "", 10) == [], section
    # The frozen window: the pseudonym in p1's place, every rank and point as it was.
    page = await store.final_page("day", day.id, 1, 9)
    assert [(e.position, e.rank, e.points) for e in page] == before
    assert [e.player_id for e in page] == ["p2", NAME, "p3"]
    assert await store.renamed_windows(NAME) == [
        ("day", day.id, (await store.frozen("day"))[day.id].archive)
    ]
    # Others keep theirs, less p1: p2's friends, the live week's tallies.
    assert await store.friends("p2") == ["p3"]
    week = {s.board for s in await store.player_standings("p2")}
    assert week == {"day", "week"}
    assert {s.board for s in await store.player_standings("p1")} == set()
    # Again: nothing more.
    assert not any((await store.erase_rows("p1", NAME)).values())


async def test_an_erasure_record_keeps_the_hash_and_forgets_the_id(store: ScoreStore) -> None:
    digest = erased_digest("test-secret", "p1")
    e = Erasure("era_" + "0" * 24, digest, "p1", NAME, Step.INDEX, NOW, "admin-key")
    assert await store.erased(["p1", "p2"]) == set()
    assert await store.open_erasure(e) == e
    # Asked again (another receipt id): the first one.
    again = Erasure("era_" + "1" * 24, digest, "p1", "erased-x", Step.INDEX, NOW + 1, "k2")
    assert await store.open_erasure(again) == e
    assert await store.erased(["p1", "p2"]) == {"p1"}
    assert await store.banned(["p1", "p2"]) == {"p1"}  # the updaters skip them
    assert [x.id for x in await store.claim_erasures("e1", NOW + 1, LEASE, 10)] == [e.id]
    assert await store.advance_erasure(e.id, "e1", Step.STORE, {"indexEntries": 3}, NOW + 2, LEASE)
    held = await store.erasure(e.id)
    assert held is not None and held.step is Step.STORE and held.counts == {"indexEntries": 3}
    counts = {"indexEntries": 3, "results": 2}
    assert await store.advance_erasure(e.id, "e1", Step.DONE, counts, NOW + 3, LEASE)
    done = await store.erasure(e.id)
    assert done is not None and done.player_id is None and done.pseudonym == ""
    assert done.done_at == NOW + 3 and done.digest == digest and done.requested_by == "admin-key"
    assert await store.claim_erasures("e2", NOW + 1000, LEASE, 10) == []
    assert await store.erased(["p1"]) == {"p1"}
    assert await store.erasure("era_" + "f" * 24) is None


@pytest.mark.parametrize("kind_and_url", ["split2", "split3"], indirect=True)
async def test_a_player_on_two_databases_is_exported_once_and_erased_on_both(
    store: ScoreStore,
) -> None:
    """A bucket moved (or being moved) leaves the player's rows on a second database."""
    from podium.store.split import SplitStore

    assert isinstance(store, SplitStore)
    t = targets(T0 + 100)
    await store.record(result("m1", 10, player="p1"), t, NOW, None)
    router = store.router
    owner = router.url_of("p1")
    other = next(u for u in [router.home_url, *router.urls()] if u != owner)
    await router.db(other).record(result("m2", 5, player="p1"), t, NOW, None)
    await router.db(other).record(result("m1", 10, player="p1"), t, NOW, None)  # the copy
    assert await _all(store, "p1", "results", 1) == ["m1", "m2"]  # each once
    counts = await store.erase_rows("p1", NAME)
    assert counts["results"] == 3
    for url in (owner, other):
        assert await router.db(url).export_page("p1", "results", "", 10) == []
        assert await router.db(url).export_page("p1", "tallies", "", 10) == []


async def test_a_done_erasure_is_left_as_it_is(store: ScoreStore) -> None:
    """An eraser that notes a step after the record was done changes nothing."""
    e = _erasure(store, "2", "p9")
    await store.open_erasure(e)
    assert await store.claim_erasures("e1", NOW, LEASE, 10) == [e]
    assert await store.advance_erasure(e.id, "e1", Step.DONE, {"results": 1}, NOW + 1, LEASE)
    assert not await store.advance_erasure(e.id, "e1", Step.ARCHIVE, {"results": 2}, NOW + 2, LEASE)
    assert not await store.renew_erasure(e.id, "e1", NOW + 2, LEASE)
    done = await store.erasure(e.id)
    assert done is not None and done.step is Step.DONE and done.counts == {"results": 1}


LEASE = 60.0


def _erasure(store: ScoreStore, n: str, player: str, at: float = NOW) -> Erasure:
    return Erasure(
        "era_" + n * 24, erased_digest("test-secret", player), player, NAME, Step.INDEX, at, "k"
    )


async def test_erasers_claiming_at_once_never_get_one_record_both(store: ScoreStore) -> None:
    """Four erasers claim 3 each at once from 8 records: each record goes to exactly one;
    and none is claimed again by another while its lease runs."""
    opened = [_erasure(store, f"{i:x}", f"p{i}", NOW + i) for i in range(8)]
    for e in opened:
        await store.open_erasure(e)
    owners = ["e1", "e2", "e3", "e4"]
    got = await asyncio.gather(*(store.claim_erasures(o, NOW + 10, LEASE, 3) for o in owners))
    ids = [c.id for claimed in got for c in claimed]
    assert sorted(ids) == sorted(e.id for e in opened)  # each once: none twice, none left
    for o, claimed in zip(owners, got, strict=True):
        for c in claimed:  # the record names its holder: only it may note a step
            assert await store.renew_erasure(c.id, o, NOW + 11, LEASE)
            assert not await store.renew_erasure(c.id, "e5", NOW + 11, LEASE)
    assert await store.claim_erasures("e5", NOW + 10 + LEASE, LEASE, 10) == []


async def test_a_lease_run_out_is_taken_over_and_the_old_owner_changes_nothing(
    store: ScoreStore,
) -> None:
    """An eraser that died (or stalled) holds its record until the lease runs out; then
    another claims it at the step last noted, and the first one's notes change nothing."""
    e = _erasure(store, "3", "p8")
    await store.open_erasure(e)
    [mine] = await store.claim_erasures("e1", NOW, LEASE, 10)
    assert mine.step is Step.INDEX
    assert await store.advance_erasure(e.id, "e1", Step.STORE, {"indexEntries": 2}, NOW + 1, LEASE)
    # Held: not to another, not even by ``only``; to its owner again (a step that failed).
    assert await store.claim_erasures("e2", NOW + LEASE, LEASE, 10) == []
    assert await store.claim_erasures("e2", NOW + LEASE, LEASE, 10, only=e.id) == []
    assert [x.id for x in await store.claim_erasures("e1", NOW + 2, LEASE, 10)] == [e.id]
    # Renewed at NOW + 2 until NOW + 2 + LEASE; run out after that.
    assert await store.renew_erasure(e.id, "e1", NOW + 2, LEASE)
    assert await store.claim_erasures("e2", NOW + 1 + LEASE, LEASE, 10) == []
    [theirs] = await store.claim_erasures("e2", NOW + 2 + LEASE, LEASE, 10, only=e.id)
    assert theirs.step is Step.STORE and theirs.counts == {"indexEntries": 2}
    # The old owner's note and renewal: refused, nothing written.
    later = NOW + 3 + LEASE
    assert not await store.advance_erasure(e.id, "e1", Step.ARCHIVE, {"x": 9}, later, LEASE)
    assert not await store.renew_erasure(e.id, "e1", later, LEASE)
    held = await store.erasure(e.id)
    assert held is not None and held.step is Step.STORE and held.counts == {"indexEntries": 2}
    # The new owner's notes: written.
    assert await store.advance_erasure(e.id, "e2", Step.ARCHIVE, {"x": 1}, later, LEASE)
    held = await store.erasure(e.id)
    assert held is not None and held.step is Step.ARCHIVE and held.counts == {"x": 1}
    # A lease given back (renewed for 0 s: a shutdown) is anyone's at once.
    assert await store.renew_erasure(e.id, "e2", later, 0.0)
    assert [x.id for x in await store.claim_erasures("e3", later, LEASE, 10)] == [e.id]


async def test_events_are_matched_by_their_player_member_only(store: ScoreStore) -> None:
    """A short id equal to another value of an event (a board, a tier) is not the player."""
    await store.set_profile(Profile("day", "Day"), NOW)  # a player named like the board
    await _fill(store)
    events_before = await store.export_page("day", "webhookEvents", "", 10)
    assert events_before == []  # the window.frozen event names board "day", not the player
    counts = await store.erase_rows("day", NAME)
    assert counts["webhookEventsPseudonymised"] == 0
    frozen = await store.export_page("p2", "webhookEvents", "", 10)
    assert any(r["type"] == "window.frozen" and '"board":"day"' in r["data"] for _, r in frozen)


async def _reopened(kind_and_url: tuple[str, str], secret: str = "") -> ScoreStore:
    """The store as a process that starts (again) opens it: migrated, ``secret`` given."""
    s = contract.make(*kind_and_url)
    s.erasure_secret = secret
    await s.migrate()
    return s


async def test_with_no_secret_one_is_generated_once_and_kept(
    kind_and_url: tuple[str, str],
) -> None:
    """``[store] erasure_secret`` empty: the first process generates a random key and the
    store keeps it; every later one (a restart) reads the same, so a hash recorded before
    still refuses the player; and the empty key is never the one used."""
    first = await _reopened(kind_and_url)
    try:
        key = await first.erasure_key()
        assert len(key) == 64 and key != "" and await first.erasure_key() == key
        digest = erased_digest(key, "p1")
        assert digest != erased_digest("", "p1")
        e = Erasure("era_" + "0" * 24, digest, "p1", NAME, Step.INDEX, NOW, "admin-key")
        await first.open_erasure(e)
        assert await first.erased(["p1", "p2"]) == {"p1"}
        assert await first.erased_digests() == {digest}
    finally:
        await first.close()
    again = await _reopened(kind_and_url)
    try:
        assert await again.erasure_key() == key
        assert await again.erased(["p1", "p2"]) == {"p1"}
        assert await again.banned(["p1", "p2"]) == {"p1"}
    finally:
        await again.close()


async def test_a_configured_secret_wins_over_the_kept_one(kind_and_url: tuple[str, str]) -> None:
    kept = await _reopened(kind_and_url)
    try:
        generated = await kept.erasure_key()
    finally:
        await kept.close()
    configured = await _reopened(kind_and_url, "configured-secret")
    try:
        assert await configured.erasure_key() == "configured-secret" != generated
        digest = erased_digest("configured-secret", "p1")
        e = Erasure("era_" + "0" * 24, digest, "p1", NAME, Step.INDEX, NOW, "admin-key")
        await configured.open_erasure(e)
        assert await configured.erased(["p1"]) == {"p1"}
    finally:
        await configured.close()


@pytest.mark.parametrize("kind_and_url", ["split2", "split3"], indirect=True)
async def test_a_split_store_keeps_its_generated_key_on_the_home_alone(
    kind_and_url: tuple[str, str],
) -> None:
    """Every database refuses by the home's key; only the home keeps it."""
    s = await _reopened(kind_and_url)
    urls = kind_and_url[1].split(" ")
    try:
        key = await s.erasure_key()
        e = Erasure("era_" + "0" * 24, erased_digest(key, "p1"), "p1", NAME, Step.INDEX, NOW, "k")
        await s.open_erasure(e)
        for p in ("p1", "p2", "p3", "p4"):  # players of every database
            assert await s.erased([p]) == ({p} if p == "p1" else set())
    finally:
        await s.close()
    for url in urls:
        conn = await asyncpg.connect(url)
        try:
            held = await conn.fetch("SELECT secret FROM erasure_key")
        finally:
            await conn.close()
        assert [r["secret"] for r in held] == ([key] if url == urls[0] else [])
