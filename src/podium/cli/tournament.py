"""``podium tournament create | list | end``: the admin's tournament calls from a terminal.

Each goes through the use case the admin routes call (``tournaments.py``), never around it:
a create is checked by the same rules (a refusal names the field, as the API's 422 does),
the same definition again is the same create, and an end freezes the run exactly once. A
refusal is said in one line and exits 1 (``common.run``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer

from podium.bootstrap import Backends
from podium.cli import common
from podium.cli.common import ConfigOpt
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.metadata import MetadataError, canonical
from podium.domain.tournaments import FOREVER, State, Tournament
from podium.domain.windows import to_epoch, to_rfc3339

app = typer.Typer(no_args_is_help=True, help="Tournaments: create, list, end.")


def _time(option: str, value: str) -> int:
    try:
        return to_epoch(datetime.fromisoformat(value))
    except ValueError:
        typer.echo(
            f"podium: {option}: expected an RFC 3339 time with its zone, "
            f"2026-12-04T18:00:00Z; got {value!r}",
            err=True,
        )
        raise typer.Exit(2) from None


def _line(t: Tournament, now: float) -> str:
    limits = []
    if t.join_required:
        limits.append(f"join required, {t.entrants}/{t.max_entrants or '-'} entrants")
    if t.max_attempts is not None:
        limits.append(f"{t.max_attempts} attempts")
    extra = f" ({'; '.join(limits)})" if limits else ""
    ends = "" if t.ends_at == FOREVER else to_rfc3339(t.ends_at)
    when = f"{to_rfc3339(t.starts_at)} .. {ends}"
    if t.schedule is not None:
        when += f" every {t.schedule!r} for {t.duration_s} s"
    return (
        f"{t.id}  {t.state(now).value:8}  {when}  {','.join(t.modes)}  {t.aggregate.value}  "
        f"{t.title}{extra}"
    )


@app.command("create")
def create(
    tournament_id: Annotated[str, typer.Argument(metavar="ID", help="The tournament's id.")],
    title: Annotated[str, typer.Option(help="What players see.")],
    modes: Annotated[str, typer.Option(help="The modes that count, comma-separated.")],
    starts_at: Annotated[
        str | None, typer.Option(help="RFC 3339, e.g. 2026-12-04T18:00:00Z (with --schedule: now).")
    ] = None,
    ends_at: Annotated[
        str | None, typer.Option(help="RFC 3339, after --starts-at (with --schedule: never).")
    ] = None,
    schedule: Annotated[
        str | None, typer.Option(help="Recurring: a run at every start of this cron (UTC).")
    ] = None,
    duration_seconds: Annotated[
        int | None, typer.Option(help="Recurring: each run's length.")
    ] = None,
    aggregate: Annotated[Aggregate, typer.Option(help="How results fold.")] = Aggregate.SUM,
    order: Annotated[Order, typer.Option(help="desc: more is better.")] = Order.DESC,
    ties: Annotated[Ties, typer.Option(help="first: who reached it first.")] = Ties.FIRST,
    join_required: Annotated[bool, typer.Option(help="Only joined players count.")] = False,
    max_entrants: Annotated[int | None, typer.Option(help="At most this many join.")] = None,
    max_attempts: Annotated[int | None, typer.Option(help="Results that count a player.")] = None,
    category: Annotated[str | None, typer.Option(help="For ?category= filters.")] = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object, shown as is.")] = None,
    config_file: ConfigOpt = None,
) -> None:
    """Create a tournament (the same definition again changes nothing)."""
    meta = None
    if metadata is not None:
        try:
            meta = canonical(json.loads(metadata))
        except (ValueError, MetadataError) as e:
            typer.echo(f"podium: --metadata: {e}", err=True)
            raise typer.Exit(2) from None
    starts = None if starts_at is None else _time("--starts-at", starts_at)
    ends = None if ends_at is None else _time("--ends-at", ends_at)
    settings = common.load_settings(config_file)

    async def run(b: Backends) -> tuple[Tournament, bool]:
        first, last = b.podium.tournaments.span(starts, ends, schedule is not None)
        t = Tournament(
            tournament_id,
            title,
            tuple(m for m in modes.split(",") if m),
            aggregate,
            order,
            ties,
            first,
            last,
            join_required,
            max_entrants,
            max_attempts,
            category,
            meta,
            schedule=schedule,
            duration_s=duration_seconds,
        )
        return await b.podium.tournaments.create(t)

    stored, created = common.run(settings, run)
    typer.echo(("created " if created else "exists, the same: ") + _line(stored, stored.created_at))


@app.command("list")
def list_tournaments(
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    state: Annotated[State | None, typer.Option(help="upcoming, live or ended.")] = None,
    config_file: ConfigOpt = None,
) -> None:
    """List tournaments, by start."""
    settings = common.load_settings(config_file)

    async def run(b: Backends) -> list[str]:
        now = b.podium.clock.now()
        return [_line(t, now) for t in await b.podium.tournaments.all(category, state)]

    for line in common.run(settings, run):
        typer.echo(line)


@app.command("end")
def end(
    tournament_id: Annotated[str, typer.Argument(metavar="ID", help="The tournament's id.")],
    config_file: ConfigOpt = None,
) -> None:
    """End a tournament now, as if its time were up: its run freezes into final standings."""
    settings = common.load_settings(config_file)
    t = common.run(settings, lambda b: b.podium.tournaments.end(tournament_id))
    typer.echo(f"ended {_line(t, t.ended_early or t.ends_at)}")
