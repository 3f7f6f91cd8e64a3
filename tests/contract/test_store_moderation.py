"""The admin's reads about players (``ports.store.Moderation``), a failed webhook delivery
tried again (``WebhookEvents.retry_delivery``) and a tournament's entrants listed
(``TournamentStore.entrants``), the same bodies on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from podium.domain import events
from podium.domain.models import Profile, ResultRecord
from podium.errors import Conflict, NotFound
from podium.ports import ScoreStore
from tests.contract import test_store as contract
from tests.contract.test_store import (  # noqa: F401
    DAY,
    NOW,
    T0,
    WEEK,
    split2_url,
    split3_url,
    targets,
)
from tests.contract.test_store_tournaments import CUP

URL = "http://127.0.0.1:9/hook"


@pytest.fixture(params=["sqlite", "postgres", "split2", "split3"])
def kind_and_url(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def store(kind_and_url: tuple[str, str]) -> AsyncIterator[ScoreStore]:
    s = contract.make(*kind_and_url)
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def test_players_are_found_by_id_start_or_part_of_name(store: ScoreStore) -> None:
    for pid, name in [
        ("p_100", "Vex"),
        ("p_101", "Nova Vexil"),
        ("p_2", "quiet"),
        ("zed", None),
        ("x_9", "50%_off"),
        ("x_8", "500 off"),
    ]:
        await store.set_profile(Profile(pid, name), NOW)
    found = await store.find_players("p_10", 10)
    assert [p.player_id for p in found] == ["p_100", "p_101"]
    # A name anywhere, case ignored; ordered by player id (byte order).
    assert [p.player_id for p in await store.find_players("vex", 10)] == ["p_100", "p_101"]
    assert [(p.player_id, p.name) for p in await store.find_players("ZED", 10)] == [("zed", None)]
    # LIKE's wildcards are themselves: "%_" finds only the name with those characters.
    assert [p.player_id for p in await store.find_players("0%_", 10)] == ["x_9"]
    assert await store.find_players("nobody", 10) == []
    assert [p.player_id for p in await store.find_players("p", 2)] == ["p_100", "p_101"]


async def test_a_players_results_come_newest_first_with_flag_and_metadata(
    store: ScoreStore,
) -> None:
    meta = '{"car":"<img src=x>","lap":61.2}'
    rows = [
        ResultRecord("p1", "m1", "k1", "ranked", T0 + 100, 300, 10),
        ResultRecord("p1", "m2", "k1", "ranked", T0 + 200, 320, 90, "jump", meta),
        ResultRecord("p2", "m2", "k1", "ranked", T0 + 200, 320, 5),
    ]
    for i, r in enumerate(rows):
        await store.record(r, targets(r.ended_at), NOW + i, None)
    recent = await store.recent_results("p1", 10)
    assert [(r.match_id, r.points, r.flag, r.metadata) for r in recent] == [
        ("m2", 90, "jump", meta),
        ("m1", 10, None, None),
    ]
    assert (recent[0].mode, recent[0].ended_at, recent[0].duration_s) == ("ranked", T0 + 200, 320)
    assert recent[0].recorded_at == NOW + 1
    assert [r.match_id for r in await store.recent_results("p1", 1)] == ["m2"]
    assert await store.recent_results("nobody", 10) == []


async def test_a_ban_is_read_with_its_reason(store: ScoreStore) -> None:
    assert await store.ban_of("p1") is None
    await store.ban("p1", "aimbot", NOW)
    ban = await store.ban_of("p1")
    assert ban is not None and (ban.reason, ban.banned_at) == ("aimbot", NOW)
    await store.unban("p1")
    assert await store.ban_of("p1") is None


async def test_only_a_failed_delivery_is_tried_again(store: ScoreStore) -> None:
    await store.ban("p1", "spam", T0)
    await store.ban("p2", "spam", T0 + 1)
    assert await store.fan_out({events.PLAYER_BANNED: [URL]}, 0.0, T0 + 2, 100) == 2
    claimed = await store.claim_deliveries(T0 + 10, T0 + 20, 10)
    assert len(claimed) == 2
    failed, pending = claimed
    await store.settle(failed, T0 + 11, status=500, error="boom", retry_at=None, delivered=False)
    listed = {d.event_id: d for d in await store.deliveries(None, None, 10)}
    assert listed[failed.event_id].state == events.FAILED
    # Neither a pending one, nor one of another endpoint, nor an unknown event.
    assert not await store.retry_delivery(pending.event_id, URL, T0 + 30)
    assert not await store.retry_delivery(failed.event_id, "http://other/", T0 + 30)
    assert not await store.retry_delivery("evt_nothing", URL, T0 + 30)
    assert await store.retry_delivery(failed.event_id, URL, T0 + 30)
    again = {d.event_id: d for d in await store.deliveries(None, None, 10)}[failed.event_id]
    assert (again.state, again.next_at, again.attempts) == (events.PENDING, T0 + 30, 1)
    assert again.last_error == "boom"  # the last answer kept until the next attempt
    # Due now: the delivery worker claims it again, and only once it is due (the other
    # one, its lease run out, is claimable all along).
    early = await store.claim_deliveries(T0 + 29, T0 + 40, 10)
    assert [d.event_id for d in early] == [pending.event_id]
    [due] = await store.claim_deliveries(T0 + 30, T0 + 40, 10)
    assert (due.event_id, due.attempts) == (failed.event_id, 2)  # its second attempt
    assert not await store.retry_delivery(failed.event_id, URL, T0 + 31)  # pending now


async def test_a_tournaments_entrants_are_listed_by_id_a_page_at_a_time(
    store: ScoreStore,
) -> None:
    cup = replace(CUP, max_entrants=None)
    await store.create_tournament(cup)
    for i, p in enumerate(["b", "a", "c", "B"]):
        await store.join_tournament(cup.id, p, T0 + 10 + i)
    every = await store.entrants(cup.id, "", 10)
    assert every == [("B", T0 + 13), ("a", T0 + 11), ("b", T0 + 10), ("c", T0 + 12)]
    assert await store.entrants(cup.id, "a", 2) == [("b", T0 + 10), ("c", T0 + 12)]
    assert await store.entrants(cup.id, "c", 10) == []
    assert await store.remove_entrant(cup.id, "b")
    assert [p for p, _ in await store.entrants(cup.id, "", 10)] == ["B", "a", "c"]
    assert await store.entrants("nothing", "", 10) == []


async def test_an_accepted_flag_leaves_the_review_list_and_its_time_stays(
    store: ScoreStore,
) -> None:
    rows = [
        ResultRecord("p1", "m1", "k1", "ranked", T0 + 100, 300, 90, "jump"),
        ResultRecord("p1", "m2", "k1", "ranked", T0 + 200, 300, 10),
        ResultRecord("p2", "m1", "k1", "ranked", T0 + 100, 300, 80, "streak"),
    ]
    for i, r in enumerate(rows):
        await store.record(r, targets(r.ended_at), NOW + i, None)
    assert {(f.player_id, f.match_id) for f in await store.flagged(None, 10)} == {
        ("p1", "m1"),
        ("p2", "m1"),
    }
    assert await store.accept_flag("p1", "m1", NOW + 10) == NOW + 10
    assert await store.accept_flag("p1", "m1", NOW + 20) == NOW + 10  # the first stays
    assert [(f.player_id, f.match_id) for f in await store.flagged(None, 10)] == [("p2", "m1")]
    # Not flagged, or not there: nothing to accept.
    assert await store.accept_flag("p1", "m2", NOW + 10) is None
    assert await store.accept_flag("p1", "m9", NOW + 10) is None
    [m2, m1] = await store.recent_results("p1", 10)
    assert (m1.flag, m1.accepted_at) == ("jump", NOW + 10)  # the reason kept, for the record
    assert m2.accepted_at is None
    # It still counts: the totals are as recorded.
    assert await store.totals("p1", [t for t, _ in targets(T0 + 100)]) == {"day": 100, "week": 100}


async def test_a_rejected_flag_is_recounted_out_of_every_open_window_once(
    store: ScoreStore,
) -> None:
    day2 = T0 + 86_400 + 100  # the next day, the same week
    rows = [
        ResultRecord("p1", "m1", "k1", "ranked", T0 + 100, 300, 90, "jump", '{"lap":1}'),
        ResultRecord("p1", "m2", "k1", "ranked", T0 + 200, 300, 10, None, '{"lap":2}'),
        ResultRecord("p1", "m3", "k1", "ranked", day2, 300, 5),
        ResultRecord("p2", "m1", "k1", "ranked", T0 + 100, 300, 80, "streak"),
    ]
    for i, r in enumerate(rows):
        await store.record(r, targets(r.ended_at), NOW + i, None)
    before = {(s.board, s.window): s.tally for s in await store.player_standings("p1")}
    await store.claim_changes(100, 1000.0, NOW)  # the records' own rows, out of the way

    # A preview: the same recounts, nothing written.
    seen = await store.reject_flag("p1", "m1", NOW + 5, [DAY, WEEK], preview=True)
    assert (seen.applied, seen.points) == (False, 90)
    assert {(s.board, s.window): s.tally for s in await store.player_standings("p1")} == before
    assert await store.claim_changes(100, 1000.0, NOW + 1) == []
    assert [f.match_id for f in await store.flagged(None, 10) if f.player_id == "p1"] == ["m1"]

    done = await store.reject_flag("p1", "m1", NOW + 10, [DAY, WEEK])
    assert (done.rejected_at, done.points, done.applied) == (NOW + 10, 90, True)
    assert done.recounts == seen.recounts
    day, week = (f"{t.window}" for t, _ in targets(T0 + 100))
    assert {(r.board, r.window, r.after.total if r.after else None) for r in done.recounts} == {
        ("day", day, 10),
        ("week", week, 15),
    }
    after = {(s.board, s.window): s.tally for s in await store.player_standings("p1")}
    assert after[("day", day)].total == 10 and after[("week", week)].total == 15
    assert after[("day", day)].metadata == '{"lap":2}'  # the one left that changed it
    for k in [("day", day), ("week", week)]:
        assert after[k].version == before[k].version + 1  # above every change sent before
    assert after[("day", targets(day2)[0][0].window)] == before[("day", targets(day2)[0][0].window)]
    sent = await store.claim_changes(100, 1000.0, NOW + 20)
    assert {(c.board, c.tally.total, c.tally.version, c.replaces, c.removed) for c in sent} == {
        ("day", 10, after[("day", day)].version, True, False),
        ("week", 15, after[("week", week)].version, True, False),
    }
    # Kept for the record, out of the review list; the other player's flag stays there.
    # No history of the player's for the jump rule any more: their recent points leave it out.
    got = await contract.read(store, "m9", ["p1"], "ranked", 5, None)
    assert got.recent_points["p1"] == [5, 10]
    [_, m2, m1] = await store.recent_results("p1", 10)
    assert (m1.flag, m1.rejected_at, m2.rejected_at) == ("jump", NOW + 10, None)
    assert [(f.player_id, f.match_id) for f in await store.flagged(None, 10)] == [("p2", "m1")]

    # Again: the first answer, nothing recounted, nothing sent.
    again = await store.reject_flag("p1", "m1", NOW + 30, [DAY, WEEK])
    assert (again.rejected_at, again.points, again.recounts) == (NOW + 10, 90, [])
    assert {(s.board, s.window): s.tally for s in await store.player_standings("p1")} == after
    assert await store.claim_changes(100, 1000.0, NOW + 40) == []  # every other one leased


async def test_a_reject_of_what_cannot_be_rejected_changes_nothing(store: ScoreStore) -> None:
    rows = [
        ResultRecord("p1", "m1", "k1", "ranked", T0 + 100, 300, 90, "jump"),
        ResultRecord("p1", "m2", "k1", "ranked", T0 + 200, 300, 10),
    ]
    for i, r in enumerate(rows):
        await store.record(r, targets(r.ended_at), NOW + i, None)
    standings = await store.player_standings("p1")
    with pytest.raises(NotFound):
        await store.reject_flag("p1", "m9", NOW, [DAY, WEEK])
    with pytest.raises(Conflict, match="not flagged"):
        await store.reject_flag("p1", "m2", NOW, [DAY, WEEK])
    assert await store.accept_flag("p1", "m1", NOW + 5) == NOW + 5
    with pytest.raises(Conflict, match="accepted"):
        await store.reject_flag("p1", "m1", NOW, [DAY, WEEK])
    assert await store.player_standings("p1") == standings
    assert all(r.rejected_at is None for r in await store.recent_results("p1", 10))


async def test_a_rejected_result_alone_in_its_window_leaves_it_and_cannot_be_accepted(
    store: ScoreStore,
) -> None:
    r = ResultRecord("p3", "m1", "k1", "ranked", T0 + 100, 300, 50, "jump")
    await store.record(r, targets(r.ended_at), NOW, None)
    [day] = [s.tally for s in await store.player_standings("p3") if s.board == "day"]
    await store.claim_changes(100, 1000.0, NOW)
    done = await store.reject_flag("p3", "m1", NOW + 1, [DAY])  # the day board alone
    assert [(x.board, x.after) for x in done.recounts] == [("day", None)]
    assert [s.board for s in await store.player_standings("p3")] == ["week"]
    [gone] = await store.claim_changes(100, 1000.0, NOW + 2)
    assert (gone.board, gone.removed, gone.replaces, gone.tally.version) == (
        "day",
        True,
        True,
        day.version + 1,
    )
    with pytest.raises(Conflict, match="rejected"):
        await store.accept_flag("p3", "m1", NOW + 3)
