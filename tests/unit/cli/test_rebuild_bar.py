"""The rebuild's progress bar (``cli/rebuild.py``, ``Bar``): each window's members written, the rate
in members a second, and the time left, drawn by rich."""

from __future__ import annotations

import io

from rich.console import Console

from podium.cli.rebuild import Bar


def test_the_bar_shows_members_written_their_rate_and_the_time_left() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    bar = Bar(console, live=True)
    now = [0.0]
    bar.progress.get_time = lambda: now[0]  # rich's clock: a second between two advances
    with bar.progress:
        bar.begin("week 2026-W44", 1_000_000)
        for _ in range(4):
            now[0] += 1.0
            bar.advance(50_000)
        bar.progress.refresh()
        task = bar.progress.tasks[0]
        assert task.completed == 200_000 and task.total == 1_000_000
        drawn = out.getvalue()
        assert "week 2026-W44" in drawn and "200000/1000000" in drawn
        assert "50,000 members/s" in drawn and "left 0:00:16" in drawn  # 800,000 to go
        bar.begin("day 2026-10-28", None)  # the week done: its bar full at what it wrote
        assert bar.progress.tasks[0].total == bar.progress.tasks[0].completed == 200_000
        bar.say("compared: live 1000000, new 1000000")
    assert "compared: live 1000000, new 1000000" in out.getvalue()


def test_without_a_terminal_the_bar_draws_nothing_but_its_lines() -> None:
    out = io.StringIO()
    bar = Bar(Console(file=out, force_terminal=False), live=False)
    with bar.progress:
        bar.begin("week 2026-W44", 10)
        bar.advance(10)
        bar.say("switched")
    assert out.getvalue().strip() == "switched"
