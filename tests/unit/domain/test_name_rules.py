"""The rules of a name people read (a player's, a key's) and of an avatar, and the regular
expressions the OpenAPI document publishes for them: the same rule, string for string."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.domain import validation as v

REFUSED = {
    "\u200d": "U+200D",  # a joiner alone
    "a\u200d": "U+200D",  # a joiner with nothing after it
    "a\u200d\u200db": "U+200D",
    "\u3164": "visible",  # the Hangul filler
    "\u3164\u3164 \u3164": "visible",
    "\u2800": "visible",  # the braille blank
    "\u115f\u1160": "visible",
    "\U000e0041\U000e0042": "tag characters",  # tags spell nothing outside a flag
    "x\U000e0041\U000e007f": "tag characters",
    "\U0001f3f4\U000e0067": "tag characters",  # a flag's tags must end with the cancel tag
    "a" + "\u0301" * 5: "at most 4 combining marks",
    "Z" + "\u0336\u0337\u0338\u0339\u033a\u033b": "at most 4 combining marks",
    "\u0301a": "no character to sit on",
    "a\u200d\u0301": "no character to sit on",
    "ab\ncd": "U+000A",
    "\x1b[31mred": "U+001B",
    "evil\u202eman": "U+202E",
    "\u200b": "U+200B",
    "": "empty",
}
ACCEPTED = [
    "Zoë",
    "Vex",
    "a\u0301\u0302\u0303\u0304",
    "Ada 👩\u200d💻",
    "👁\ufe0f\u200d🗨\ufe0f",
    "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "1\ufe0f\u20e3",
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # a ZWNJ inside a Persian word
    "नमस्ते",
    "\u3164a",  # a blank beside a visible character
]


@pytest.mark.parametrize(("name", "rule"), REFUSED.items())
def test_names_that_show_nothing_or_too_much_are_refused(name: str, rule: str) -> None:
    why = v.text_problem(name)
    assert why is not None and rule in why, why
    assert not re.fullmatch(v.name_pattern(), name)


@pytest.mark.parametrize("name", ACCEPTED)
def test_names_people_write_are_accepted(name: str) -> None:
    assert v.text_problem(name) is None
    assert re.fullmatch(v.name_pattern(), name)


def test_a_name_is_held_to_its_length_and_named_by_its_field() -> None:
    assert v.name_problem("name", "x" * 33) == "name: at most 32 characters, got 33"
    assert v.name_problem("name", "x" * 64, v.KEY_NAME_MAX) is None
    assert v.name_problem("name", "\u3164") == (
        "name: must show a visible character, not only blanks such as U+3164 or U+2800"
    )


# Every piece a rule turns on, and any character at all beside them. Lone surrogates are left
# out: no UTF-8 text carries one, and the published pattern leaves them to the service.
PIECES = st.sampled_from(
    [
        *["a", " ", "\u0301", "\u20e3", "\u200d", "\u200c", "\u3164", "\u2800", "\U0001f3f4"],
        *["\U000e0041", "\U000e007f", "\u202e", "\n", "\ufe0f", "\u0903", "\ue000", "\u0378"],
    ]
)
CHARS = st.characters(exclude_categories=["Cs"])
TEXT = st.lists(st.one_of(PIECES, CHARS), max_size=12).map("".join)


@settings(max_examples=3000, deadline=None)
@given(TEXT)
def test_the_published_name_pattern_is_the_rule(name: str) -> None:
    assert (v.text_problem(name) is None) == bool(re.fullmatch(v.name_pattern(), name))


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.text(CHARS, max_size=10).map(lambda t: "https://" + t), st.text(CHARS)))
def test_the_published_avatar_pattern_is_the_rule(avatar: str) -> None:
    https = re.fullmatch(v.AVATAR, avatar) is not None
    ok = v.avatar_problem(avatar) is None and https
    assert ok == bool(re.fullmatch(v.avatar_pattern(), avatar))
