"""Entry metadata's one canonical form (domain/metadata.py), the fold that carries it onto
the tallies a result changes (recording.step), and the change event that carries it on the
stream, readable without it as before."""

from __future__ import annotations

import json

import pytest

from podium.domain.boards import Aggregate, BoardSpec, Tally
from podium.domain.metadata import METADATA_MAX, MetadataError, canonical, metadata_problem
from podium.domain.models import Change, ResultRecord, Target
from podium.domain.recording import step
from podium.domain.windows import WindowKind, WindowRule
from podium.log.events import decode, encode

WEEK = WindowRule(WindowKind.WEEK)


def test_canonical_is_compact_sorted_utf8() -> None:
    assert canonical({"b": 1, "a": {"y": [1, 2.5, None], "x": "é"}}) == (
        '{"a":{"x":"é","y":[1,2.5,null]},"b":1}'
    )
    assert canonical({"a": 1, "b": 2}) == canonical({"b": 2, "a": 1})
    assert canonical({}) == "{}"


def test_its_size_is_counted_in_bytes() -> None:
    exact = {"k": "x" * (METADATA_MAX - 8)}  # {"k":"..."}: 8 + n
    assert len(canonical(exact).encode()) == METADATA_MAX
    with pytest.raises(MetadataError, match="513 bytes"):
        canonical({"k": "x" * (METADATA_MAX - 7)})
    with pytest.raises(MetadataError, match="bytes"):  # 300 characters, 600 bytes
        canonical({"k": "é" * 300})


@pytest.mark.parametrize("bad", [[1], "car", 3, None, True, {"x": object()}, {"x": float("nan")}])
def test_anything_but_a_plain_object_is_refused(bad: object) -> None:
    with pytest.raises(MetadataError):
        canonical(bad)
    why = metadata_problem("results.0.metadata", bad)
    assert why is not None and why.startswith("results.0.metadata ")


def _result(points: int, ended: int, meta: str | None, match: str = "m") -> ResultRecord:
    return ResultRecord("p1", match, "k", "ranked", ended, 60, points, metadata=meta)


def test_the_tally_a_result_changes_takes_its_metadata() -> None:
    best = BoardSpec("best", WEEK, aggregate=Aggregate.BEST)
    total = BoardSpec("week", WEEK)
    t = Target("x", "2026-W44", 1_792_800_000)
    t0 = t.start + 100
    first = step(best, t, None, _result(50, t0, '{"car":"a"}'))
    assert first is not None and first.metadata == '{"car":"a"}'
    assert step(best, t, first, _result(40, t0 + 1, '{"car":"b"}')) is None  # set nothing
    better = step(best, t, first, _result(60, t0 + 2, None))
    assert better is not None and better.metadata is None  # the score's result had none
    summed = step(total, t, Tally(10, t0, 1, metadata='{"car":"a"}'), _result(5, t0, '{"c":1}'))
    assert summed is not None and summed.metadata == '{"c":1}'
    assert summed == Tally(15, t0, 2, metadata='{"c":1}')


def test_the_event_carries_metadata_and_reads_events_without_it() -> None:
    tally = Tally(2305, 1_793_214_391, 18, metadata='{"car":"mx5","replay":"r-8812"}')
    change = Change("week", "2026-W44", "p_5521", tally, 1_793_214_391.2)
    payload = encode(change, "3f9a1c07d2e4", 48215)
    assert json.loads(payload)["metadata"] == {"car": "mx5", "replay": "r-8812"}
    assert decode(payload, None) == change
    # without metadata: byte for byte the event as it was before metadata existed
    bare = Change("week", "2026-W44", "p_5521", Tally(2305, 1_793_214_391, 18), 1.5)
    event = json.loads(encode(bare, "s", 1))
    assert "metadata" not in event
    assert decode(json.dumps(event).encode(), None) == bare
