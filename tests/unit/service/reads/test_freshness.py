"""The reads' view of how far the board is behind the store (board marks): the label an
exact answer carries, and a marks read that fails never failing the answer."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from podium.config.settings import parse
from podium.errors import IndexUnavailable
from podium.service.reads.freshness import READ_EVERY_S, Freshness


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def now(self) -> float:
        return self.t


class Marks:
    """The index's marks, or the error reading them raises."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int], float] = {}
        self.fails: Exception | None = None

    async def read_marks(self) -> dict[tuple[str, int], float]:
        if self.fails is not None:
            raise self.fails
        return dict(self.held)

    async def note_marks(self, marks: Mapping[tuple[str, int], float]) -> None:
        self.held.update(marks)


async def _databases() -> Mapping[str, object]:
    return {"db1": object()}


@pytest.mark.parametrize("error", [IndexUnavailable("down"), RuntimeError("a bug")])
async def test_a_failed_marks_read_ages_the_label_and_never_fails_the_answer(
    error: Exception,
) -> None:
    clock, marks = Clock(), Marks()
    fresh = Freshness(parse({}), marks, _databases, 2, clock)  # type: ignore[arg-type]
    assert await fresh.label() is None  # no mark yet: no label invented
    marks.held = {("db1", 0): 999.5, ("db1", 1): 999.8}
    clock.t += READ_EVERY_S
    assert await fresh.label() is None  # 0.6 s behind: within the bound
    marks.fails = error
    clock.t += 5.0
    # Not read again: the last watermark stands, and the answer says how old it is.
    assert await fresh.label() == 999.5
