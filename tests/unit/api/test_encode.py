"""The hand-written JSON of the hot read routes is the JSON their response models give."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from podium.api import schemas as s
from podium.api.encode import EncodedPages, page_json, rank_json
from podium.api.routes import _entry as model_entry  # what the other routes answer with
from podium.domain.windows import to_rfc3339
from podium.service.views import Entry, Page, PlayerRank

texts = st.text(min_size=1, max_size=12)
entries = st.builds(
    Entry,
    rank=st.integers(1, 10**7),
    player_id=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,10}", fullmatch=True),
    points=st.integers(-(2**40), 2**40),
    name=st.none() | texts,
    avatar=st.none() | st.just("https://x.example/a.png"),
    global_rank=st.none() | st.integers(1, 10**7),
)


@given(st.lists(entries, max_size=20), st.floats(0, 2e9))
def test_page_matches_the_model(rows: list[Entry], as_of: float) -> None:
    page = Page("week", "2026-W48", as_of, rows)
    model = s.PageOut(
        board="week",
        window="2026-W48",
        asOf=to_rfc3339(as_of),
        entries=[model_entry(e) for e in rows],
    )
    assert json.loads(page_json(page)) == json.loads(model.model_dump_json(exclude_none=True))


@given(
    st.lists(entries, max_size=10),
    st.integers(1, 10**7),
    st.booleans(),
    st.none() | st.floats(0, 100),
)
def test_rank_matches_the_model(
    rows: list[Entry], rank: int, exact: bool, top: float | None
) -> None:
    r = PlayerRank("week", "2026-W48", rank, exact, 42, rows, top)
    model = s.RankOut(
        board="week",
        window="2026-W48",
        rank=rank,
        exact=exact,
        points=42,
        topPercent=top,
        neighbors=[model_entry(e) for e in rows],
    )
    assert json.loads(rank_json(r)) == json.loads(model.model_dump_json(exclude_none=True))


def test_a_page_is_encoded_once_and_a_new_page_replaces_it() -> None:
    held = EncodedPages()
    slot = ("week", "w", 0, 100)
    first = Page("week", "w", 1.0, [Entry(1, "a", 5)])
    body = held.body(first, slot)
    assert held.body(first, slot) is body  # the same object: not encoded again
    second = Page("week", "w", 2.0, [Entry(1, "b", 7)])
    assert json.loads(held.body(second, slot))["entries"][0]["playerId"] == "b"
    assert len(held._held) == 1  # the first page's body went with it
