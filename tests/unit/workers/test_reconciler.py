"""The reconciler's sweep for erased players (``workers/reconciler.py``): at the start of
its first round, then of a round at least ``SWEEP_S`` after the last one began, on a set
clock; a sweep that failed is tried again at the next round. Its walks and repairs are
tested against real stores and indexes (``tests/integration/test_reconciler.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from podium.config.settings import parse
from podium.domain.erasure import erased_digest
from podium.errors import Unavailable
from podium.workers import reconciler
from podium.workers.reconciler import Reconciler


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def now(self) -> float:
        return self.t


class Store:
    """No live window to walk, one erased player."""

    async def unsettled_tournaments(self) -> list[Any]:
        return []

    async def frozen(self, board: str) -> set[str]:
        return set()

    async def windows(self, board: str) -> list[str]:
        return []

    async def erasure_key(self) -> str:
        return "k"

    async def erased_digests(self) -> set[str]:
        return {erased_digest("k", "gone")}


class Index:
    def __init__(self) -> None:
        self.held = ["a", "gone"]
        self.sweeps = 0
        self.down = False

    async def sweep_erased(self, erased: Any) -> int:
        self.sweeps += 1
        if self.down:
            raise Unavailable("the index is down")
        gone: set[str] = erased(self.held)
        self.held = [p for p in self.held if p not in gone]
        return len(gone)


def _reconciler(index: Index, clock: Clock, snapshots: Any = None) -> Reconciler:
    settings = parse({"boards": [{"name": "week", "window": "week"}]})
    return Reconciler(settings, Store(), index, clock, snapshots=snapshots)  # type: ignore[arg-type]


async def test_the_first_round_sweeps_then_one_round_an_hour() -> None:
    clock, index, snaps = Clock(), Index(), Index()
    rec = _reconciler(index, clock, snaps)
    await rec.step()
    assert (index.sweeps, index.held) == (1, ["a"])
    assert snaps.sweeps == 1  # the aggregator's snapshots with it
    clock.t += reconciler.SWEEP_S - 1
    await rec.step()
    assert index.sweeps == 1
    clock.t += 1
    await rec.step()
    assert index.sweeps == 2


async def test_a_sweep_that_failed_is_tried_again_at_the_next_round() -> None:
    clock, index = Clock(), Index()
    rec = _reconciler(index, clock)
    index.down = True
    with pytest.raises(Unavailable):
        await rec.step()
    index.down = False
    clock.t += 5
    await rec.step()
    assert (index.sweeps, index.held) == (2, ["a"])
