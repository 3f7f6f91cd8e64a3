"""``podium rebuild --board B [--window W] | --all``: board windows of a shared index rebuilt
from the store without a gap (``service/upkeep/gapless.py``), with a ``rich`` progress bar (members
per second, time left) and the difference between the new generation and the live one printed
before the switch.

The log is applied again by this process (``Backends.replay``, as ``podium worker
--replay-since`` does), so the updaters need not be stopped; they go on writing, into both
generations, throughout.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from podium.bootstrap import Backends
from podium.cli import common
from podium.cli.common import ConfigOpt
from podium.domain import cohorts
from podium.domain.tournaments import tournament_of
from podium.service.upkeep.gapless import Outcome, Target
from podium.service.upkeep.progress import Published


class Rate(ProgressColumn):
    """Members written per second, as rich measures a task's speed."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(
            "?" if speed is None else f"{speed:,.0f} members/s", style="progress.data.speed"
        )


class Bar:
    """The ``Progress`` port of a rebuild, drawn by rich (on stderr; plain lines when it is
    not a terminal, or with ``--no-progress``)."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            Rate(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
            disable=not live,
        )
        self._task: TaskID | None = None

    def begin(self, what: str, total: int | None) -> None:
        if self._task is not None:  # the last window is done: its bar full at what it wrote
            done = self.progress.tasks[self._task].completed
            self.progress.update(self._task, total=done, completed=done)
        self._task = self.progress.add_task(what, total=total)

    def advance(self, members: int) -> None:
        if self._task is not None:
            self.progress.advance(self._task, members)

    def say(self, text: str) -> None:
        self.progress.console.print(text)

    def phase(self, name: str) -> None:
        return None  # the bar and the lines said show it


def rebuild(
    board: Annotated[str | None, typer.Option(help="Board name.")] = None,
    window: Annotated[
        str | None,
        typer.Option(help="Window id (a tournament's run, a cohort's id); default: the current."),
    ] = None,
    every: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Every live window of every board, tournaments' runs and cohorts included.",
        ),
    ] = False,
    grace: Annotated[
        float, typer.Option(min=0, help="Seconds the old keys are kept after the switch.")
    ] = 10.0,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    shards: Annotated[
        int | None,
        typer.Option(
            min=2,
            help="With --all: build every live window under this many index shards and "
            "switch the whole fleet to it (then set index.shards to it in the settings).",
        ),
    ] = None,
    config_file: ConfigOpt = None,
) -> None:
    """Rebuild board windows of a shared index from the store, without a gap.

    A new generation of each window is filled from the store while the live one answers
    every read and both take every write; the log is applied again from before the rebuild
    began; the two are compared (members, top 1,000, a sample of ranks) and the difference
    printed; then every window switches at once and the old keys go after --grace.

    With --shards M (and --all), the same under a new shard count: every process writes
    both layouts meanwhile, and the layout record switches every window at once."""
    if every == (board is not None):
        typer.echo("podium: rebuild: name --board (with --window), or --all", err=True)
        raise typer.Exit(2)
    if every and window is not None:
        typer.echo("podium: rebuild: --window goes with --board, not --all", err=True)
        raise typer.Exit(2)
    if shards is not None and not every:
        typer.echo("podium: rebuild: --shards goes with --all (every window moves)", err=True)
        raise typer.Exit(2)
    settings = common.load_settings(config_file)
    if shards is not None and common.topology_of(settings).in_process_index:
        typer.echo(
            "podium: rebuild --shards: the in-process index is this process's own and rebuilt "
            "at every start: set index.shards in the settings and restart",
            err=True,
        )
        raise typer.Exit(2)
    if common.topology_of(settings).in_process_index:
        typer.echo("podium: the in-process index is rebuilt by `podium serve` at start", err=True)
        raise typer.Exit(2)
    console = Console(stderr=True)
    bar = Bar(console, live=not no_progress and console.is_terminal)

    async def run(b: Backends) -> list[Outcome]:
        targets = await _targets(b, board, window)
        # Told to every API process too (GET /v1/admin/upkeep, the console's boards page).
        was = b.layout.count if b.layout is not None else 1
        moves = None if shards is None else (was, shards)
        told = Published(b.podium.upkeep, b.clock, targets, inner=bar, shards=moves)
        with bar.progress:
            async with told as progress:
                if shards is not None:
                    return await b.reshard().run(targets, shards, grace_s=grace, progress=progress)
                return await b.gapless().run(targets, grace_s=grace, progress=progress)

    outcomes = common.run(settings, run)
    for o in outcomes:
        typer.echo(f"rebuilt {o.key.board} {o.key.window} with {o.members} players")
    if shards is not None:
        typer.echo(f"the index has {shards} shards: set index.shards = {shards} in the settings")
    sys.stdout.flush()


async def _targets(b: Backends, board: str | None, window: str | None) -> list[Target]:
    """The windows to rebuild: one named (a board's, a tournament's run on ``~<id>``, a
    league's cohort by its id), or with ``--all`` every live one: the boards' windows,
    the tournaments' runs and the leagues' cohorts, rebuilt and switched together."""
    p = b.podium
    if board is None:
        found = await p.rebuilds.live_windows()
        found += await p.tournaments.live_runs()
        found += await p.leagues.live_cohorts()
        return [Target(spec, w) for spec, w in found]
    if tournament_of(board) is not None:
        spec, w = await p.tournaments.board_run(board, window)
    elif window is not None and cohorts.of_league(window):
        spec, w = await p.leagues.cohort_window(board, window)
    else:
        spec = p.boards.board(board)
        w = p.boards.window(spec, window)
    return [Target(spec, w)]
