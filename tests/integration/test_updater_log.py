"""How the board updater settles batches with the change log: ack once applied, keep a batch
through an index outage under a lease it renews (in progress), give back (nak) what it will
not apply itself, and ack and drop what no updater could ever apply.

Embedded configuration (SQLite, the in-process index, the outbox as the log) on a clock the
test moves, with the index made to fail on demand.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from podium import bootstrap
from podium.config.settings import Settings, parse
from podium.domain.models import ApiKey, Message, PlayerResult
from podium.errors import IndexUnavailable
from podium.log.outbox import OutboxLog
from podium.ports import BoardKey, ChangeLog
from podium.workers.updater import HOLD_LEASES, Updater

LEASE_S = 10.0
BOARDS = [{"name": "day", "window": "day"}, {"name": "week", "window": "week"}]


class ManualClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


class FlakyIndex:
    """The real index, whose writes fail on demand: ``fail`` is the exception to raise."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fail: Exception | None = None

    async def write(self, *args: Any, **kwargs: Any) -> int:
        if self.fail is not None:
            raise self.fail
        return int(await self.inner.write(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Spy:
    """A change log that records which calls the updater makes, and passes them on."""

    def __init__(self, inner: ChangeLog) -> None:
        self.inner = inner
        self.calls: list[tuple[str, int]] = []

    @property
    def partitions(self) -> int:
        return self.inner.partitions

    async def relay(self, limit: int) -> int:
        return await self.inner.relay(limit)

    async def ping(self) -> None:
        await self.inner.ping()

    async def fetch(self, limit: int, partition: int | None = None) -> list[Message]:
        out = await self.inner.fetch(limit, partition)
        self.calls.append(("fetch", len(out)))
        return out

    async def ack(self, messages: Sequence[Message]) -> None:
        self.calls.append(("ack", len(messages)))
        await self.inner.ack(messages)

    async def in_progress(self, messages: Sequence[Message]) -> None:
        self.calls.append(("in_progress", len(messages)))
        await self.inner.in_progress(messages)

    async def nak(self, messages: Sequence[Message]) -> None:
        self.calls.append(("nak", len(messages)))
        await self.inner.nak(messages)

    async def settled(self, messages: Sequence[Message]) -> list[bool]:
        return await self.inner.settled(messages)

    async def close(self) -> None:
        await self.inner.close()


def _settings(tmp_path: Path, boards: list[dict[str, Any]] = BOARDS) -> Settings:
    return parse(
        {
            "store": {"url": f"sqlite:///{tmp_path}/podium.db"},
            "workers": {"lease_s": LEASE_S},
            "boards": boards,
        }
    )


@pytest.fixture
async def backends(tmp_path: Path) -> AsyncIterator[bootstrap.Backends]:
    b = bootstrap.build(_settings(tmp_path), ManualClock(time.time()))
    await b.start()
    try:
        # Two players on two boards: four changes in the outbox.
        ended = int(b.clock.now()) - 60
        key = ApiKey("gs", "gs", "h", ("default",))
        results = [PlayerResult("a", 10), PlayerResult("b", 5)]
        await b.podium.matches.record(key, "m1", "default", ended, 60, results)
        yield b
    finally:
        await b.close()


def _clock(b: bootstrap.Backends) -> ManualClock:
    assert isinstance(b.clock, ManualClock)
    return b.clock


async def _backlog(b: bootstrap.Backends) -> int:
    return (await b.store.outbox_backlog(b.clock.now()))[0]


async def _on_board(b: bootstrap.Backends, board: str) -> list[str]:
    window = b.podium.boards.board(board).rule.window_at(int(b.clock.now()))
    assert window is not None
    key = BoardKey(board, window.id)
    return [p for p in ("a", "b") if await b.index.rank(key, p, descending=True) is not None]


async def test_a_batch_held_through_an_outage_stays_with_its_updater(
    backends: bootstrap.Backends,
) -> None:
    b, clock = backends, _clock(backends)
    index = FlakyIndex(b.index)
    up = Updater(b.settings, b.store, index, b.copy, b.log, b.clock)
    other = OutboxLog(b.store, b.clock, lease_s=LEASE_S)  # another updater's
    index.fail = IndexUnavailable("cut")
    for _ in range(5):  # two and a half leases of retries
        with pytest.raises(IndexUnavailable):
            await up.step()
        clock.t += LEASE_S / 2
        assert await other.fetch(100) == []  # still held: its lease was renewed
    index.fail = None
    assert await up.step() == 4
    assert await _backlog(b) == 0
    assert await _on_board(b, "week") == ["a", "b"]
    clock.t += 3 * LEASE_S
    assert await other.fetch(100) == []  # applied once, acked, never delivered again


async def test_a_batch_failing_for_too_long_is_given_back(
    backends: bootstrap.Backends,
) -> None:
    b, clock = backends, _clock(backends)
    index = FlakyIndex(b.index)
    spy = Spy(b.log)
    up = Updater(b.settings, b.store, index, b.copy, spy, b.clock)
    index.fail = IndexUnavailable("cut")
    retries = 2 * HOLD_LEASES
    for _ in range(retries):  # each retry half a lease after the last
        with pytest.raises(IndexUnavailable):
            await up.step()
        clock.t += LEASE_S / 2
    # Kept and renewed for HOLD_LEASES leases, then given back and fetched afresh
    # (by whoever asks first: here the same updater, the only one).
    assert spy.calls == [("fetch", 4)] + [("in_progress", 4)] * (retries - 1)
    with pytest.raises(IndexUnavailable):
        await up.step()
    assert spy.calls[-2:] == [("nak", 4), ("fetch", 4)]
    index.fail = None
    assert await up.step() == 4
    assert spy.calls[-2:] == [("in_progress", 4), ("ack", 4)]
    assert await _backlog(b) == 0


async def test_a_failure_that_is_not_an_outage_gives_the_batch_back_at_once(
    backends: bootstrap.Backends,
) -> None:
    b = backends
    index = FlakyIndex(b.index)
    up = Updater(b.settings, b.store, index, b.copy, b.log, b.clock)
    index.fail = RuntimeError("a bug")
    with pytest.raises(RuntimeError):
        await up.step()
    # No time passes: another updater can take the batch now, instead of after the lease.
    other = OutboxLog(b.store, b.clock, lease_s=LEASE_S)
    assert len(await other.fetch(100)) == 4


async def test_changes_for_a_board_no_longer_configured_are_acked_and_dropped(
    backends: bootstrap.Backends, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    b = backends
    s = _settings(tmp_path, boards=[BOARDS[1]])  # "day" is gone from the configuration
    up = Updater(s, b.store, b.index, b.copy, b.log, b.clock)
    with caplog.at_level(logging.WARNING, logger="podium.updater"):
        assert await up.step() == 4
    assert "dropping 2 changes for board day, which is no longer configured" in caplog.text
    assert await _backlog(b) == 0  # acked: never delivered again
    assert await _on_board(b, "week") == ["a", "b"]


async def test_a_batch_fetched_ahead_is_applied_after_the_one_held_before_it(
    backends: bootstrap.Backends, tmp_path: Path
) -> None:
    """After a full batch the updater fetches the next one while it applies this one; a
    batch held through an outage is still applied first, then the one fetched ahead."""
    b = backends
    s = parse(
        {
            "store": {"url": f"sqlite:///{tmp_path}/podium.db"},
            "workers": {"lease_s": LEASE_S, "batch": 2},  # the four changes in two batches
            "boards": BOARDS,
        }
    )
    index = FlakyIndex(b.index)
    spy = Spy(b.log)
    up = Updater(s, b.store, index, b.copy, spy, b.clock)
    index.fail = IndexUnavailable("cut")
    with pytest.raises(IndexUnavailable):
        await up.step()
    index.fail = None
    assert await up.step() == 2  # the held batch, under a lease renewed first
    assert spy.calls[0] == ("fetch", 2) and ("in_progress", 2) in spy.calls
    assert await _backlog(b) == 2
    other = OutboxLog(b.store, b.clock, lease_s=LEASE_S)  # another updater's
    assert await other.fetch(100) == []  # the rest is this updater's: fetched ahead
    assert await up.step() == 2
    assert await _backlog(b) == 0
    assert await _on_board(b, "day") == ["a", "b"] and await _on_board(b, "week") == ["a", "b"]
    assert not [c for c in spy.calls if c[0] == "nak"]
    await up.close()
