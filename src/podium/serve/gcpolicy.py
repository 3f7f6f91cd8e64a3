"""How a serving process uses Python's cyclic garbage collector, and what it costs.

Reference counting frees almost everything a request makes the moment the request ends; the
cyclic collector only has to find the few cycles. With CPython's default thresholds (a
young collection every 700 net new objects) it instead ran about 20 young collections a
second under 500 results/s plus 500 reads/s, each walking every object of the requests in
flight, and promoted those objects into the older generations, whose collections then
paused the event loop for tens of milliseconds (measured: 570 young, 51 middle and 4 full
collections, 965 ms in all, in one benchmark server's life; 3 young ones, 30 ms, with the
thresholds below). ``podium_gc_pause_seconds`` keeps this visible in production.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from podium import metrics

# Net new container objects between young collections, then young collections per middle
# one and middle per full one. Garbage cycles wait a little longer to be freed; at a few
# kilobytes each that is a few megabytes at most.
THRESHOLDS = (20_000, 20, 20)

_started: list[float] = []


def _observe(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        pause = time.perf_counter() - _started.pop()
        metrics.GC_PAUSE_SECONDS.labels(str(info["generation"])).observe(pause)


def settle() -> None:
    """After start-up: everything alive now (the imported code, and in the embedded mode the
    rebuilt index of every board) lives for the whole process, so it is frozen out of the
    collector's sight, and a full collection no longer walks it; then the thresholds above,
    and the pause metric."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    if _observe not in gc.callbacks:
        gc.callbacks.append(_observe)


def release(previous: tuple[int, int, int]) -> None:
    """Undo ``settle`` (for a process that goes on to start another app, as tests do)."""
    if _observe in gc.callbacks:
        gc.callbacks.remove(_observe)
    gc.set_threshold(*previous)
    gc.unfreeze()
