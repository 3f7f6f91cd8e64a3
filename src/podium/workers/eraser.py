"""The eraser role: players' erasures carried out to their end (``service/erasure.py``).

Each erasure is a durable record in the store, at the step it is in; every step is
idempotent, so a process killed at any moment leaves it to the next look (its own after a
restart, or any other process that runs the role), which does that step again from its
start. An eraser claims a record under a lease (``[workers] erasure_lease_s``) and renews it
while a step runs, so however many processes run the role, one at a time carries out a
record and its counts are those of one run of each step; a killed eraser's record is taken
over once its lease has run out. An eraser that lost its lease (stalled a whole lease) stops
at its next renewal or note, and the new holder goes on from the last step noted.
"""

from __future__ import annotations

from podium.workers.runner import Needs, Runner

PERIOD_S = 1.0  # how often the store is asked for erasures to claim


def runners(n: Needs) -> list[Runner]:
    if n.erasures is None:
        return []
    return [Runner("eraser", n.erasures.erase_due, idle_sleep_s=PERIOD_S, full=1 << 30)]
