"""Results before reads: which classes a saturated process sheds (domain/admission.py), how
a read is sorted into its class, and how the gate smooths what it measures (api/shedding.py)."""

from __future__ import annotations

import pytest

from podium.api.ratelimit import PendingMatches
from podium.api.shedding import LoadGate, classify
from podium.domain.admission import (
    FAR,
    FRIENDS,
    MIN_BUSY,
    PAGE,
    RANK,
    TOP,
    Level,
    Limits,
    sheds,
    target,
)

LIMITS = Limits.of(shed_lag_ms=5.0, max_pending_matches=64)  # the defaults


def shed_at(level: int) -> set[str]:
    return {c for c in (FAR, FRIENDS, PAGE, RANK) if sheds(level, c)}


def test_the_ladders_follow_the_settings() -> None:
    assert LIMITS.lag_s == pytest.approx((0.005, 0.010, 0.015, 0.020))
    assert LIMITS.pending == (16, 32, 48, 64)


@pytest.mark.parametrize(
    ("lag_ms", "level", "shed"),
    [
        (0.0, 0, set()),
        (4.9, 0, set()),
        (5.0, 1, {FAR}),
        (10.0, 2, {FAR, FRIENDS}),
        (15.0, 3, {FAR, FRIENDS, PAGE}),
        (20.0, 4, {FAR, FRIENDS, PAGE, RANK}),
        (500.0, TOP, {FAR, FRIENDS, PAGE, RANK}),
    ],
)
def test_the_lag_sheds_far_reads_first_and_own_ranks_last(
    lag_ms: float, level: int, shed: set[str]
) -> None:
    got = target(lag_ms / 1000, pending=0, busy=64, limits=LIMITS)
    assert got == level
    assert shed_at(got) == shed


@pytest.mark.parametrize(("pending", "level"), [(15, 0), (16, 1), (32, 2), (48, 3), (64, 4)])
def test_matches_in_flight_shed_every_read_by_the_time_results_are_refused(
    pending: int, level: int
) -> None:
    assert target(0.0, pending=pending, busy=64, limits=LIMITS) == level


def test_the_higher_of_the_two_figures_counts() -> None:
    assert target(0.012, pending=50, busy=64, limits=LIMITS) == 3
    assert target(0.021, pending=20, busy=64, limits=LIMITS) == 4


def test_a_match_in_flight_past_its_threshold_sheds_every_read() -> None:
    limits = Limits.of(shed_lag_ms=5.0, max_pending_matches=64, shed_accept_ms=50.0)
    assert limits.accept_s == pytest.approx(0.050)
    assert target(0.0, pending=1, busy=64, limits=limits, oldest_s=0.049) == 0
    assert target(0.0, pending=1, busy=64, limits=limits, oldest_s=0.050) == TOP
    assert target(0.011, pending=1, busy=64, limits=limits, oldest_s=0.020) == 2  # the lag's
    # Nearly idle, a late match is a slow store, not reads crowding it out: nothing shed.
    assert target(0.0, pending=1, busy=MIN_BUSY - 1, limits=limits, oldest_s=1.0) == 0
    # Without the setting (the domain's default), the age of a match never sheds.
    assert target(0.0, pending=1, busy=64, limits=LIMITS, oldest_s=1e9) == 0


async def test_the_oldest_match_in_flight_is_timed_from_its_admission() -> None:
    clock = Clock()
    pending = PendingMatches(8, clock=clock)
    assert pending.oldest_s() == 0.0
    async with pending.admit():
        clock.t = 1.0
        async with pending.admit():
            clock.t = 1.5
            assert pending.oldest_s() == 1.5  # the first admitted
        assert pending.oldest_s() == 1.5
        async with pending.admit():
            clock.t = 2.0
            assert pending.oldest_s() == 2.0
    assert pending.oldest_s() == 0.0 and pending.now == 0
    async with pending.admit():  # a later one, alone
        clock.t = 2.25
        assert pending.oldest_s() == 0.25


def test_a_process_with_little_in_flight_sheds_nothing_however_late_its_loop() -> None:
    # A loop that lags while nearly idle lags for someone else (another process, the GC).
    assert target(1.0, pending=64, busy=MIN_BUSY - 1, limits=LIMITS) == 0
    assert target(1.0, pending=0, busy=MIN_BUSY, limits=LIMITS) == TOP


def test_a_level_rises_at_once_and_falls_only_after_the_hold() -> None:
    level = Level()
    assert level.update(3, at=10.0, hold_s=1.0) == 3
    assert level.update(1, at=10.5, hold_s=1.0) == 3  # held
    assert level.update(4, at=10.6, hold_s=1.0) == 4  # up at once
    assert level.update(3, at=11.0, hold_s=1.0) == 4
    assert level.update(2, at=11.6, hold_s=1.0) == 2  # a second since 4 was called for
    assert level.update(0, at=11.7, hold_s=1.0) == 2
    assert level.update(0, at=12.6, hold_s=1.0) == 0


@pytest.mark.parametrize(
    ("method", "path", "query", "route_class"),
    [
        ("GET", "/v1/boards/week/players/p1", b"neighbors=2", RANK),
        ("HEAD", "/v1/boards/week/players/p1", b"", RANK),
        ("GET", "/v1/boards/week", b"", PAGE),
        ("GET", "/v1/boards/week", b"limit=100&offset=0", PAGE),
        ("GET", "/v1/boards/week", b"group=FR", PAGE),
        ("GET", "/v1/boards/week", b"offset=100", FAR),
        ("GET", "/v1/boards/week", b"cursor=abc", FAR),
        ("GET", "/v1/boards/week", b"window=2026-W44", FAR),
        ("GET", "/v1/boards/week/players/p1/friends", b"", FRIENDS),
        ("GET", "/v1/boards/week/players", b"ids=a,b", FAR),
        ("GET", "/v1/boards/week/distribution", b"", FAR),
        ("GET", "/v1/boards/week/windows", b"", FAR),
        ("GET", "/v1/boards/week/windows/2026-W44/standings", b"", FAR),
        ("GET", "/v1/boards/week/groups", b"", FAR),
        ("GET", "/v1/boards/week/stream", b"", FAR),
        ("GET", "/v1/boards", b"", FAR),
        ("GET", "/v1/players/p1/history", b"board=week", FAR),
        # never shed: results, the admin's calls, health, metrics, the pages
        ("POST", "/v1/matches/m1/results", b"", None),
        ("PUT", "/v1/players/p1/profile", b"", None),
        ("POST", "/v1/admin/players/p1/ban", b"", None),
        ("GET", "/v1/admin/review", b"board=week", None),
        ("GET", "/v1/admin/keys", b"", None),
        ("GET", "/healthz", b"", None),
        ("GET", "/readyz", b"", None),
        ("GET", "/metrics", b"", None),
        ("GET", "/", b"", None),
        ("GET", "/ops", b"", None),
    ],
)
def test_each_request_has_its_class(
    method: str, path: str, query: bytes, route_class: str | None
) -> None:
    assert classify(method, path, query) == route_class


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_gate_smooths_the_lag_by_time_and_sets_the_level() -> None:
    clock = Clock()
    busy = {"pending": 0}
    gate = LoadGate(LIMITS, lambda: busy["pending"], clock=clock)
    gate.busy = 64
    # A blip: one tick 30 ms late among ticks on time fades below the first threshold.
    gate.observe(0.030, 0.040)
    assert 0.005 < gate.lag_s < 0.030
    for _ in range(20):
        gate.observe(0.0, 0.010)
    assert gate.lag_s < 0.005
    # A saturated loop, every tick 25 ms late: within a few ticks, every read is shed.
    for _ in range(10):
        clock.t += 0.035
        gate.observe(0.025, 0.035)
    assert gate.level == TOP
    # Calm again: the level holds for a second, then falls.
    for _ in range(50):
        clock.t += 0.010
        gate.observe(0.0, 0.010)
    assert gate.level == TOP
    for _ in range(60):
        clock.t += 0.010
        gate.observe(0.0, 0.010)
    assert gate.level == 0


def test_the_gate_off_sheds_nothing_and_pinned_figures_override_the_measured() -> None:
    off = LoadGate(LIMITS, lambda: 64, enabled=False)
    off.busy = 64
    assert off.observe(1.0, 1.0) == 0
    gate = LoadGate(LIMITS, lambda: 0)
    assert gate.hold(lag_s=0.010) == 2
    gate.observe(0.0, 10.0)  # the ticker's measure is ignored while held
    assert gate.level == 2
    gate.release()
    assert gate.level == 0
