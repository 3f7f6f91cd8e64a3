"""Webhook events' pure rules: retry times (growing, jittered, bounded by the horizon),
the body a delivery signs, a window.frozen event's data."""

from __future__ import annotations

import json
import random

from podium.domain import events
from podium.domain.models import FinalEntry


def test_retries_double_with_jitter_and_stop_at_the_horizon() -> None:
    retry = events.Retry(first_s=5.0, for_s=86_400.0)
    rng = random.Random(7)
    for attempts in range(1, 12):
        wait = events.next_attempt(retry, attempts, 0.0, 100.0, rng)
        assert wait is not None
        full = min(events.MAX_DELAY_S, 5.0 * 2 ** (attempts - 1))
        assert 100.0 + full / 2 <= wait <= 100.0 + full  # jitter: 50 to 100 % of the wait
    # past the horizon (a day after the first attempt): given up
    assert events.next_attempt(retry, 20, 0.0, 86_000.0, rng) is None


def test_a_body_is_the_same_bytes_on_every_attempt() -> None:
    data = events.encode({"playerId": "p1", "reason": "aimbot", "at": "2026-10-30T14:02:11Z"})
    one = events.body(events.PLAYER_BANNED, 1_793_000_000.7, data)
    assert one == events.body(events.PLAYER_BANNED, 1_793_000_000.7, data)
    assert json.loads(one) == {
        "type": "player.banned",
        "timestamp": "2026-10-26T07:33:20Z",
        "data": {"playerId": "p1", "reason": "aimbot", "at": "2026-10-30T14:02:11Z"},
    }


def test_window_frozen_carries_the_top_then_its_archive() -> None:
    final = [FinalEntry(i, i, f"p{i}", 1000 - i, 0) for i in range(1, 151)]
    data = events.window_frozen_data("week", "2026-W44", 1_793_000_000.0, 150, final)
    assert len(data["top"]) == events.TOP_N and data["sha256"] is None
    assert data["top"][0] == {"position": 1, "rank": 1, "playerId": "p1", "points": 999}
    done = json.loads(events.with_archive(events.encode(data), "ab" * 32))
    assert done["sha256"] == "ab" * 32 and done["standings"].endswith("/2026-W44/standings")
    assert events.window_frozen_id("week", "2026-W44") == "window.frozen:week:2026-W44"


def test_a_tournament_runs_freeze_is_a_tournament_ended_event() -> None:
    final = [FinalEntry(1, 1, "a", 30, 0), FinalEntry(2, 1, "b", 30, 5)]
    assert events.freeze_event("~cup", "20261204T1800") == (
        "tournament.ended",
        "tournament.ended:cup:20261204T1800",
    )
    week = events.freeze_event("week", "2026-W44")
    assert week == ("window.frozen", "window.frozen:week:2026-W44")
    info = events.TournamentInfo("The Cup", None, '{"prize":"gold"}')
    data = events.freeze_data("~cup", "20261204T1800", 1_793_000_000.0, 2, final, info)
    assert (data["tournament"], data["run"], data["title"]) == ("cup", "20261204T1800", "The Cup")
    assert data["metadata"] == {"prize": "gold"} and data["category"] is None
    assert "board" not in data and data["players"] == 2
    assert data["standings"] == "/v1/tournaments/cup/runs/20261204T1800/standings"
    assert [(e["rank"], e["playerId"]) for e in data["top"]] == [(1, "a"), (1, "b")]
    # a row gone (it never is: tournaments are not deleted): the id alone
    bare = events.freeze_data("~cup", "20261204T1800", 1_793_000_000.0, 2, final)
    assert "title" not in bare and bare["tournament"] == "cup"
