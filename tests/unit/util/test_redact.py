"""redact_url: what an operator may see of a URL, never what unlocks it."""

from __future__ import annotations

import pytest

from podium.util.redact import redact_text, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:secret@db:5432/podium", "postgresql://u:***@db:5432/podium"),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("https://user:pa:ss@h/p", "https://user:***@h/p"),
        ("https://hooks.example/x?token=abc&x=1", "https://hooks.example/x?token=***&x=1"),
        ("https://h/p?Access-Token=z&SIG=q", "https://h/p?Access-Token=***&SIG=***"),
        # Nothing secret: exactly as given.
        ("https://only-user@h/p", "https://only-user@h/p"),
        ("nats://h1:4222,h2:4222", "nats://h1:4222,h2:4222"),
        ("sqlite:///podium.db", "sqlite:///podium.db"),
        ("https://h/p?page=2", "https://h/p?page=2"),
    ],
)
def test_secrets_are_hidden_and_the_rest_kept(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_url_that_cannot_be_parsed_is_hidden_whole() -> None:
    assert redact_url("https://[::1:bad/x?token=t") == "***"


def test_a_urls_secrets_are_hidden_in_a_text_that_repeats_them() -> None:
    url = "https://u:p%40ss@h/x?token=a%2Bb&Key=zz&x=1"
    said = f"401 for {url}: password p@ss (p%40ss), token a+b (a%2Bb), key zz, x 1"
    assert redact_text(said, url) == (
        "401 for https://u:***@h/x?token=***&Key=***&x=1: "
        "password *** (***), token *** (***), key ***, x 1"
    )
    assert redact_text("refused", url) == "refused"
    assert redact_text("no secret in https://h/x?page=2", "https://h/x?page=2") == (
        "no secret in https://h/x?page=2"
    )
