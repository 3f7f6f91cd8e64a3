"""``podium plan``: the capacity planner's command. Reads the load and the per-node
capacities (defaults, a ``--measured`` file, ``--capacity NAME=VALUE``), and prints what
``domain/capacity.py`` works out: a table for people, ``--json`` for machines."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from podium.domain.capacity import (
    DEFAULTS,
    SOURCES,
    Capacities,
    CapacityError,
    Load,
    Plan,
    Tier,
    capacities,
    measured,
    plan,
)

D = Load()


def _fail(message: str) -> typer.Exit:
    typer.echo(f"podium plan: {message}", err=True)
    return typer.Exit(2)


def _capacities(file: Path | None, overrides: list[str]) -> tuple[Capacities, dict[str, str]]:
    """The capacities, and where each came from (a default, the file, --capacity)."""
    caps = DEFAULTS
    origin = {f.name: "default" for f in fields(Capacities)}
    if file is not None:
        try:
            document = json.loads(file.read_text())
        except (OSError, ValueError) as e:
            raise _fail(f"--measured {file}: {e}") from None
        try:
            caps = measured(document)
        except CapacityError as e:
            raise _fail(f"--measured {file}: {e}") from None
        origin.update(dict.fromkeys(document["capacities"], file.name))
    given: dict[str, float] = {}
    for item in overrides:
        name, sep, value = item.partition("=")
        try:
            given[name.strip().replace("-", "_")] = float(value)
        except ValueError:
            raise _fail(f"--capacity {item!r}: expected NAME=NUMBER") from None
        if not sep:
            raise _fail(f"--capacity {item!r}: expected NAME=NUMBER")
    try:
        caps = capacities(given, caps)
    except CapacityError as e:
        raise _fail(f"--capacity: {e}") from None
    origin.update(dict.fromkeys(given, "--capacity"))
    return caps, origin


def plan_command(
    daily_players: Annotated[
        int, typer.Option(help="Players who play on a day.")
    ] = D.daily_players,
    matches_per_player: Annotated[
        float, typer.Option(help="Matches each of them plays a day.")
    ] = D.matches_per_player,
    reads_per_match: Annotated[
        float, typer.Option(help="Board reads by a player after each match (top, rank, friends).")
    ] = D.reads_per_match,
    peak: Annotated[
        float, typer.Option(help="The busiest second over the day's average.")
    ] = D.peak,
    windows_per_result: Annotated[
        int, typer.Option(help="Board windows each result counts for (season, week, day: 3).")
    ] = D.windows_per_result,
    players_per_board: Annotated[
        int | None, typer.Option(help="Players on each board window (default: the daily players).")
    ] = None,
    keep_days: Annotated[
        float, typer.Option(help="Days results stay in the store (store.keep_results_days).")
    ] = D.keep_days,
    measured_file: Annotated[
        Path | None,
        typer.Option(
            "--measured", help="Per-node capacities from the benchmarks (JSON).", dir_okay=False
        ),
    ] = None,
    capacity: Annotated[
        list[str] | None,
        typer.Option(help="One capacity, NAME=VALUE (repeatable; over --measured)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """How many Redis shards, Postgres databases and API processes a game needs at its
    peak, and which limit sets each count."""
    caps, origin = _capacities(measured_file, capacity or [])
    load = Load(
        daily_players,
        matches_per_player,
        reads_per_match,
        peak,
        windows_per_result,
        players_per_board,
        keep_days,
    )
    try:
        p = plan(load, caps)
    except CapacityError as e:
        message = str(e)
        if e.field is not None:  # named as the option that gave it: --peak, not peak
            message = f"--{e.field.replace('_', '-')}{message.removeprefix(e.field)}"
        raise _fail(message) from None
    if as_json:
        out = p.as_json()
        out["capacity_sources"] = {
            k: SOURCES[k] if v == "default" else v for k, v in origin.items()
        }
        typer.echo(json.dumps(out, indent=2))
        return
    _print(p, origin)


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _bytes(x: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if x >= size:
            return f"{x / size:,.1f} {unit}"
    return f"{x:,.0f} B"


def _rows(table: Table, name: str, t: Tier) -> None:
    """One row per limit of the tier; the limit that sets the count is starred."""
    fullest = max(t.needs, key=t.need)
    for i, (limit, shares) in enumerate(t.needs.items()):
        parts = " + ".join(f"{k} {v:,.1f}" for k, v in shares.items()) if len(shares) > 1 else ""
        table.add_row(
            name if i == 0 else "",
            str(t.nodes) if i == 0 else "",
            f"{limit} *" if limit == fullest else limit,
            f"{t.need(limit):,.1f}",
            parts,
        )


def _print(p: Plan, origin: dict[str, str]) -> None:
    console = Console(highlight=False)
    ld, c = p.load, p.capacities
    console.print(
        f"[bold]podium plan[/]: {_n(ld.daily_players)} daily players, "
        f"{ld.matches_per_player:g} matches each, {ld.reads_per_match:g} reads a match, "
        f"peak {ld.peak:g}x",
        soft_wrap=True,
    )
    load = Table("load", "average", "peak", box=None, pad_edge=False)
    for col in (1, 2):
        load.columns[col].justify = "right"
    load.add_row("results/s", _n(p.results_per_s), _n(p.results_per_s_peak))
    load.add_row(
        f"board writes/s ({ld.windows_per_result} windows a result)",
        _n(p.board_writes_per_s_peak / ld.peak),
        _n(p.board_writes_per_s_peak),
    )
    load.add_row("reads/s", _n(p.reads_per_s_peak / ld.peak), _n(p.reads_per_s_peak))
    console.print(load)
    console.print(
        f"boards in Redis: {_n(p.board_members)} members x {c.bytes_per_member:g} B = "
        f"[bold]{_bytes(p.board_bytes)}[/]"
    )
    console.print(
        f"results in the store: {ld.keep_days:g} days x "
        f"{_n(ld.daily_players * ld.matches_per_player)} a day x "
        f"{c.bytes_per_result_stored:g} B = {_bytes(p.store_bytes)}"
    )
    tiers = Table("tier", "nodes", "limit", "needs", "of which", box=None, pad_edge=False)
    for col in (1, 3):
        tiers.columns[col].justify = "right"
    _rows(tiers, "Redis shards", p.redis)
    _rows(tiers, "Postgres databases", p.postgres)
    _rows(tiers, "API processes", p.api)
    console.print(tiers)
    console.print("* the limit that sets the count: the nodes it alone needs, rounded up")
    caps = Table("per-node capacity", "value", "from", box=None, pad_edge=False)
    for f in fields(Capacities):
        caps.add_row(f.name, f"{getattr(c, f.name):,g}", origin[f.name])
    console.print(caps)
    console.print("where each default comes from: podium plan --json (capacity_sources)")
