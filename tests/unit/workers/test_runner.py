"""The worker loop: a full batch loops at once, a partial one waits, so work is batched."""

from __future__ import annotations

import asyncio
import itertools
import time

from podium.workers.runner import Runner


async def _step_times(done: list[int], full: int = 1) -> list[float]:
    """When each step ran, for steps that report ``done`` in turn (then the runner stops)."""
    at: list[float] = []

    async def step() -> int:
        at.append(time.monotonic())
        if len(at) == len(done):
            runner.stop()
        return done[len(at) - 1]

    runner = Runner("test", step, idle_sleep_s=0.2, full=full)
    await asyncio.wait_for(runner.run(), 5)
    return [b - a for a, b in itertools.pairwise(at)]


async def test_a_short_step_waits_and_a_full_one_does_not() -> None:
    gaps = await _step_times([5, 5, 2, 5], full=5)
    assert gaps[0] < 0.1 and gaps[1] < 0.1  # after full batches: at once
    assert gaps[2] >= 0.19  # after a partial batch: one idle pause


async def test_by_default_only_an_idle_step_waits() -> None:
    gaps = await _step_times([1, 0, 1])
    assert gaps[0] < 0.1
    assert gaps[1] >= 0.19
