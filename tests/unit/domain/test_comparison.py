"""What a rebuild reports before its switch (``domain/comparison.py``), and the uniform
sample of members it compares ranks of (``rebuilding.Reservoir``)."""

from __future__ import annotations

import random
from collections import Counter

from podium.domain.comparison import compare
from podium.service.upkeep.gapless import Reservoir


def test_the_same_generations_differ_by_nothing() -> None:
    top = [("a", 9), ("b", 7)]
    d = compare(2, 2, top, top, ["a", "b"], [(0, 9), (1, 7)], [(0, 9), (1, 7)])
    assert d.same
    assert d.lines()[0] == "members: live 2, new 2 (+0)"


def test_what_the_live_generation_lost_is_counted() -> None:
    live_top = [("a", 9), ("c", 3)]
    new_top = [("a", 9), ("b", 7), ("c", 3)]  # b was lost from the live one
    d = compare(
        2, 3, live_top, new_top, ["a", "b", "c"], [(0, 9), None, (1, 3)], [(0, 9), (1, 7), (2, 3)]
    )
    assert not d.same
    assert (d.live_members, d.new_members, d.top, d.top_moved) == (2, 3, 3, 2)
    assert d.only_new_top == ("b",) and d.only_live_top == ()
    assert (d.ranks_moved, d.largest_shift, d.missing_live, d.missing_new) == (1, 1, 1, 0)
    assert "members: live 2, new 3 (+1)" in d.lines()
    assert "  only in the new top: b" in d.lines()


def test_the_reservoir_keeps_a_uniform_sample_of_its_size() -> None:
    seen: Counter[int] = Counter()
    for seed in range(400):
        r = Reservoir(10, random.Random(seed))
        for first in range(0, 1000, 37):  # pages of uneven length, as a store's last one
            r.offer([(str(i), 0) for i in range(first, min(first + 37, 1000))])
        assert len(r.held) == len(set(r.held)) == 10
        seen.update(int(m) // 100 for m in r.held)
    # 4,000 picks over ten deciles of the stream: each near 400, none starved or favoured
    assert all(300 < seen[d] < 500 for d in range(10)), seen


def test_a_stream_shorter_than_the_sample_is_kept_whole() -> None:
    r = Reservoir(10)
    r.offer([("a", 1), ("b", 2)])
    r.offer([("c", 3)])
    assert r.held == ["a", "b", "c"]
