"""The rules a value from outside is held to, written once (domain/validation.py) and
published by the API's schemas as they are."""

from __future__ import annotations

import pytest

from podium.api import schemas
from podium.domain import validation as v
from podium.domain.codec import ScoreCodec


@pytest.mark.parametrize("good", ["p", "p_1", "A.b:c-d", "x" * 64])
def test_an_id_of_letters_digits_and_punctuation_is_taken(good: str) -> None:
    assert v.id_problem("playerId", good) is None


@pytest.mark.parametrize("bad", ["", "_p", "p 1", "p_1\n", "é", "x" * 65])
def test_any_other_id_is_refused_with_the_pattern(bad: str) -> None:
    assert v.id_problem("playerId", bad) == f"playerId {bad!r} must match {v.ID}"


def test_a_country_is_two_capital_letters() -> None:
    assert v.country_problem("FR") is None
    for bad in ("fr", "FRA", "F", "FR\n"):
        assert v.country_problem(bad) == f"country {bad!r} must be an ISO 3166-1 alpha-2 code"


def test_a_shown_name_may_hold_emoji_but_no_controls() -> None:
    assert v.text_problem("Ada 👩\u200d💻") is None  # a zero-width joiner inside an emoji
    assert v.text_problem("   ") == "must not be empty or only spaces"
    assert v.text_problem("evil\u202eman") == "must not contain U+202E (RIGHT-TO-LEFT OVERRIDE)"


def test_capacities_say_their_bound() -> None:
    assert v.friends_problem(v.MAX_FRIENDS) is None
    assert v.friends_problem(v.MAX_FRIENDS + 1) == "at most 1000 friends, got 1001"
    assert v.results_problem(0, 100) == "results must list at least one player"
    assert v.results_problem(3, 2) == "a match has at most 2 players, got 3"
    assert v.capacity(ScoreCodec(20), "points") == (
        "|points| <= 8589934591: 33 bits, the other 20 hold the time"
    )


def test_the_schemas_publish_the_same_rules_anchored() -> None:
    assert f"^{v.ID}$" == schemas.ID
    assert f"^{v.COUNTRY}$" == schemas.COUNTRY
    assert schemas.WINDOW.endswith(f"(@{v.COUNTRY})?$")
    fields = schemas.ProfileIn.model_fields
    assert fields["country"].metadata[0].pattern == schemas.COUNTRY
