"""The store's commands: ``podium migrate``, ``podium store move-bucket`` (a store split by
player), and ``podium archive results | show`` (results past the retention, as files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from podium.bootstrap import Backends
from podium.cli import common
from podium.cli.common import ConfigOpt
from podium.errors import ConfigError, PodiumError

store_app = typer.Typer(no_args_is_help=True, help="The score store.")
archive_app = typer.Typer(no_args_is_help=True, help="Results past the retention, as files.")


def migrate(config_file: ConfigOpt = None) -> None:
    """Create or upgrade the store's schema."""

    async def done(b: Backends) -> None:
        return None

    common.run(common.load_settings(config_file), done)
    typer.echo("store schema is up to date")


@store_app.command("move-bucket")
def store_move_bucket(
    bucket: Annotated[int, typer.Option(min=0, max=4095, help="The bucket, 0..4095.")],
    to: Annotated[str | None, typer.Option(help="The URL of the database it moves to.")] = None,
    grace: Annotated[
        float, typer.Option(min=0, help="Seconds before the old copy is deleted.")
    ] = 10.0,
    drain_timeout: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds to wait for the bucket's outbox rows before the move is undone."
        ),
    ] = 30.0,
    abort: Annotated[
        bool,
        typer.Option("--abort", help="Undo a move that stopped before the map named its target."),
    ] = False,
    config_file: ConfigOpt = None,
) -> None:
    """Move one bucket of players to another database, while results keep arriving
    (store.shards set): README, "Store split by player"."""
    if (to is None) == (not abort):
        raise typer.BadParameter("give --to URL, or --abort")

    async def run(b: Backends) -> bool:
        moves = b.buckets()
        if to is None:  # --abort
            return await moves.abort_move(bucket)
        return await moves.move_bucket(bucket, to, grace_s=grace, drain_timeout_s=drain_timeout)

    common.start_logging()
    done = common.run(common.load_settings(config_file), run)
    if abort:
        typer.echo(
            f"the move of bucket {bucket} was undone" if done else f"bucket {bucket} is not moving"
        )
    elif done:
        typer.echo(f"bucket {bucket} moved to {to}")
    else:
        typer.echo(f"bucket {bucket} is on {to} already")


@archive_app.command("results")
def archive_results(
    before: Annotated[
        str, typer.Option(help="A UTC date, YYYY-MM-DD: every day before it leaves the store.")
    ],
    config_file: ConfigOpt = None,
) -> None:
    """Move the results of every UTC day (of endedAt) before DATE out of the store into
    their day files under [archive] dir, as the pruner role does; DATE may be no later than
    the retention allows ([store] keep_results_days)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from podium.domain.retention import DAY_S, day_id, day_start, hand_limit, parse_day
    from podium.workers.pruner import Pruner

    try:
        limit = parse_day(before)
    except ValueError:
        raise typer.BadParameter(f"expected a date like 2026-08-01, got {before!r}") from None
    settings = common.load_settings(config_file)

    async def run(b: Backends) -> int:
        keep = settings.store.keep_results_days
        latest = hand_limit(b.clock.now(), keep)
        if latest is None:
            raise ConfigError("store.keep_results_days = 0 keeps every result: nothing to prune")
        if limit > latest:
            raise PodiumError(
                f"--before {before}: results after {day_id(latest)} are within the "
                f"{keep} days the store keeps (store.keep_results_days), and a late retry "
                "of one pruned would be accepted again"
            )
        oldest = await b.store.oldest_result()
        days = 0 if oldest is None else max(0, (limit - day_start(oldest)) // DAY_S)
        pruner = Pruner(b.store, b.result_files(), b.clock, keep)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()) as bar:
            task = bar.add_task("days", total=days or None)

            def step(start: int, archived: int, deleted: int) -> None:
                bar.update(task, advance=1, description=f"{day_id(start)}: {deleted} results moved")

            return await pruner.prune_before(limit, step)

    n = common.run(settings, run)
    typer.echo(f"{n} results moved to {settings.archive.dir}/results")


@archive_app.command("show")
def archive_show(
    file: Annotated[str, typer.Argument(help="A day file: results/YYYY-MM-DD.csv.gz.")],
    limit: Annotated[
        int | None, typer.Option(min=0, help="Print at most this many results.")
    ] = None,
) -> None:
    """Check a day file against its manifest (sha256, count) and print its results."""
    import itertools

    from podium.bootstrap import result_files

    files = result_files(str(Path(file).parent.parent))  # the archive dir: <dir>/results/<day>
    try:
        manifest = files.verify(file)
    except (OSError, ValueError, KeyError) as e:
        typer.echo(f"podium: {file}: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"{manifest['file']}: {manifest['results']} results of {manifest['day']}, "
        f"sha256 {manifest['sha256']} (verified)"
    )
    typer.echo(",".join(files.columns))
    for r in itertools.islice(files.rows(file), limit):
        typer.echo(
            f"{r.ended_at},{r.player_id},{r.match_id},{r.key_id},{r.mode},{r.duration_s},"
            f"{r.points},{r.recorded_at!r},{r.flag or ''}"
        )
