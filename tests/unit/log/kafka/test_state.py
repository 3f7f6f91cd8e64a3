"""A Kafka partition's delivery state (``log/kafka/state.py``): what the committed offset
and its metadata say, and how each settling changes them."""

from __future__ import annotations

import json

from podium.log.kafka.state import METADATA_MAX, State


def test_a_state_round_trips_through_offset_and_metadata() -> None:
    st = State()
    st.take(range(0, 6), "a", 5_000)
    st.take([6, 7], "b", 9_000)
    st.ack([2, 3, 7])
    back = State.read(st.committed, st.metadata())
    assert (back.committed, back.frontier, back.acked) == (0, 8, {2, 3, 7})
    assert {o: (v.holder, v.until_ms) for o, v in back.leases.items()} == {
        0: ("a", 5_000),
        1: ("a", 5_000),
        4: ("a", 5_000),
        5: ("a", 5_000),
        6: ("b", 9_000),
    }
    assert json.loads(st.metadata())["a"] == [[2, 4], [7, 8]]  # ranges, not offsets


def test_the_committed_offset_moves_only_over_acked_offsets() -> None:
    st = State()
    st.take(range(5), "a", 1_000)
    st.ack([1, 2, 4])
    assert st.committed == 0  # offset 0 is not applied yet
    st.ack([0])
    assert (st.committed, st.acked) == (3, {4})
    st.ack([3])
    assert (st.committed, st.acked, st.leases) == (5, set(), {})
    st.ack([0, 1])  # acked before: nothing moves back
    assert st.committed == 5


def test_what_ran_out_or_was_given_back_is_free_again_in_order() -> None:
    st = State()
    st.take(range(4), "a", 1_000)
    st.take([4], "b", 3_000)
    st.ack([1])
    assert st.free(now_ms=999) == []
    assert st.free(now_ms=1_000) == [0, 2, 3]  # a's lease ran out; b's holds; 1 is acked
    st.renew([0], "a", now_ms=1_000, until_ms=2_000)
    assert st.free(now_ms=1_500) == [2, 3]
    assert st.give_back([4], "a", now_ms=1_500) == 0  # b's, still held: left alone
    assert st.free(now_ms=1_500) == [2, 3]
    assert st.give_back(None, "b", now_ms=1_500) == 1
    assert st.free(now_ms=1_500) == [2, 3, 4]


def test_in_progress_does_not_take_what_another_holds() -> None:
    st = State()
    st.take([0], "b", 5_000)
    st.renew([0], "a", now_ms=1_000, until_ms=9_000)
    assert st.leases[0].holder == "b"
    st.renew([0], "a", now_ms=5_000, until_ms=9_000)  # b's ran out: a's now
    assert st.leases[0].holder == "a"


def test_metadata_that_would_not_fit_leaves_out_the_highest_acks() -> None:
    st = State()
    st.take(range(0, 4_000), "a", 1_000)
    st.ack(range(1, 4_000, 2))  # 2,000 ranges of one offset each: too long for the broker
    st.give_back(None, "a", 0)
    text = st.metadata()
    assert len(text.encode()) <= METADATA_MAX
    back = State.read(st.committed, text)
    assert back.committed == 0 and 1 in back.acked
    assert back.acked < st.acked  # the rest delivered again, never skipped
    assert not [o for o in back.free(2_000) if o in back.acked]


def test_metadata_of_something_else_is_an_offset_only() -> None:
    st = State.read(42, "written by another tool")
    assert (st.committed, st.frontier, st.acked, st.leases) == (42, 42, set(), {})
    assert State.read(-1001, None).committed == 0  # no offset committed yet
