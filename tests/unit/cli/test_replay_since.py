"""``podium worker --replay-since``: how long ago, as an operator writes it."""

from __future__ import annotations

import pytest
import typer

from podium.cli.processes import _duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60s", 60.0), ("15m", 900.0), ("2h", 7200.0), ("1d", 86_400.0), ("90", 90.0), ("1.5m", 90.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert _duration(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "-5s", "ten minutes", "5w"])
def test_nonsense_is_refused(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        _duration(text)
