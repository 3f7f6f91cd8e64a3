"""A page's cursor (domain/cursor.py): what it carries survives the round trip, and anything
else given back as one is refused with what is wrong with it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podium.domain.cursor import MAX_LENGTH, Cursor, CursorError

MEMBERS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}", fullmatch=True)


@given(
    board=st.from_regex(
        r"[a-z0-9][a-z0-9_-]{0,31}|~[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}", fullmatch=True
    ),
    window=st.sampled_from(["2026-W44", "2026-10-28", "S3", "all", "2026-W44@FR", "20261204T1800"]),
    before=st.booleans(),
    member=MEMBERS,
    score=st.integers(-(1 << 53) + 1, (1 << 53) - 1),
    rank=st.integers(0, (1 << 31) - 1),
    final=st.booleans(),
)
def test_a_cursor_survives_its_round_trip(**fields: Any) -> None:
    c = Cursor(**fields)
    text = c.encode()
    assert len(text) <= MAX_LENGTH and "=" not in text
    assert Cursor.decode(text) == c


def _raw(body: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()


GOOD = {"v": 1, "b": "week", "w": "2026-W44", "d": "n", "m": "p1", "s": 5, "r": 0, "f": 0}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "not URL-safe base64"),
        ("a+b/", "not URL-safe base64"),
        ("x" * (MAX_LENGTH + 1), "not URL-safe base64"),
        ("bm90IGpzb24", "unreadable"),  # "not json"
        ("A", "unreadable"),  # not even base64
        (_raw([1, 2]), "unknown version"),
        (_raw({**GOOD, "v": 2}), "unknown version"),
        (_raw({**GOOD, "b": "Week"}), "'b'"),
        (_raw({**GOOD, "b": "~"}), "'b'"),  # a tournament's board names its id
        (_raw({**GOOD, "b": "~a b"}), "'b'"),
        (_raw({**GOOD, "w": "2026-W44\n"}), "'w'"),
        (_raw({**GOOD, "m": "p 1"}), "'m'"),
        (_raw({**GOOD, "m": None}), "'m'"),
        (_raw({**GOOD, "s": "5"}), "'s'"),
        (_raw({**GOOD, "s": True}), "'s'"),
        (_raw({**GOOD, "s": 1 << 53}), "outside every board"),
        (_raw({**GOOD, "r": -1}), "out of range"),
        (_raw({**GOOD, "f": 2}), "out of range"),
        (_raw({**GOOD, "d": "x"}), "direction"),
    ],
)
def test_anything_else_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(CursorError, match=says):
        Cursor.decode(text)
    assert Cursor.decode(_raw(GOOD)).member == "p1"  # the good one beside them is read
