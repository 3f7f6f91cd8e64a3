import gc

from podium import metrics
from podium.serve import gcpolicy


def _pauses(generation: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "podium_gc_pause_seconds_count", {"generation": generation}
    )
    return value or 0.0


def test_settle_freezes_what_lives_raises_thresholds_and_times_pauses() -> None:
    before = gc.get_threshold()
    try:
        gcpolicy.settle()
        assert gc.get_threshold() == gcpolicy.THRESHOLDS
        assert gc.get_freeze_count() > 0
        full = _pauses("2")
        gc.collect()
        assert _pauses("2") == full + 1
    finally:
        gcpolicy.release(before)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    full = _pauses("2")
    gc.collect()  # no longer observed
    assert _pauses("2") == full
