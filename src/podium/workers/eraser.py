"""The eraser role: players' erasures carried out to their end (``service/erasure.py``).

Each erasure is a durable record in the store, at the step it is in; every step is
idempotent, so a process killed at any moment leaves it to the next look (its own after a
restart, or any other process that runs the role), which does that step again from its
start. Two erasers on one record do the same steps twice, which changes nothing.
"""

from __future__ import annotations

from podium.workers.runner import Needs, Runner

PERIOD_S = 1.0  # how often the store is asked for erasures not done


def runners(n: Needs) -> list[Runner]:
    if n.erasures is None:
        return []
    return [Runner("eraser", n.erasures.erase_due, idle_sleep_s=PERIOD_S, full=1 << 30)]
