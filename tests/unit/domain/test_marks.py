"""Board marks (``domain/marks.py``): a player per partition, the watermark, the label."""

from __future__ import annotations

import pytest

from podium.config.values import NAME_RE
from podium.domain.marks import (
    MARK_BOARD,
    behind_label,
    is_mark,
    mark_players,
    newest,
    partition_of_mark,
    watermark,
)
from podium.domain.tournaments import tournament_of
from podium.domain.validation import ID_RE
from podium.log.events import partition_of


@pytest.mark.parametrize("partitions", [1, 2, 3, 16, 64])
def test_each_mark_lands_in_the_partition_it_marks(partitions: int) -> None:
    players = mark_players(partitions)
    assert len(players) == partitions
    for p, player in enumerate(players):
        assert partition_of(player, partitions) == p  # where the relays send it
        assert partition_of_mark(player) == p  # what the updater reads back
        assert not ID_RE.fullmatch(player)  # no player can have it


def test_the_mark_board_is_no_board() -> None:
    assert is_mark(MARK_BOARD)
    assert not NAME_RE.fullmatch(MARK_BOARD)  # no configured board
    assert tournament_of(MARK_BOARD) is None  # nor a tournament's
    assert MARK_BOARD != ""  # nor a profile change's
    assert not is_mark("season")


def test_a_pair_keeps_its_later_mark() -> None:
    held = {("a", 0): 10.0, ("a", 1): 5.0}
    assert newest(held, [(("a", 0), 9.0), (("a", 1), 6.0), (("b", 0), 1.0)]) == {
        ("a", 0): 10.0,
        ("a", 1): 6.0,
        ("b", 0): 1.0,
    }


def test_the_watermark_is_the_least_mark_and_none_while_a_pair_has_none() -> None:
    marks = {("a", 0): 10.0, ("a", 1): 12.0, ("b", 0): 11.0, ("b", 1): 9.5}
    assert watermark(marks, ["a", "b"], 2) == 9.5
    assert watermark(marks, ["a"], 2) == 10.0
    assert watermark(marks, ["a", "c"], 2) is None  # database c never marked
    assert watermark(marks, ["a"], 3) is None  # partition 2 never marked
    assert watermark({}, ["a"], 1) is None


def test_the_label_only_past_the_bound() -> None:
    assert behind_label(100.0, 99.5, 1.0) is None
    assert behind_label(100.0, 99.0, 1.0) is None
    assert behind_label(100.0, 98.9, 1.0) == 98.9
    assert behind_label(100.0, None, 1.0) is None
