"""The ``podium`` command: serve, worker, keys, migrate, rebuild, store, archive, config;
the operator's ban, unban, freeze and status (``cli_ops.py``); plan (``cli_plan.py``)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Annotated, TypeVar

import typer

from podium import bootstrap, metrics
from podium.bootstrap import Backends
from podium.cli import ops as cli_ops
from podium.cli import plan as cli_plan
from podium.cli import rebuild as cli_rebuild
from podium.cli import tournament as cli_tournament
from podium.config import settings as config
from podium.config.settings import Settings, StoreSettings
from podium.config.topology import Topology
from podium.domain.models import ApiKey, Scope
from podium.domain.validation import text_problem
from podium.domain.windows import to_rfc3339
from podium.errors import ConfigError, PodiumError
from podium.loadgen.command import loadgen_command
from podium.serve import gcpolicy
from podium.workers import roles as registry

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Real-time leaderboards for games."
)
keys_app = typer.Typer(no_args_is_help=True, help="Game-server, admin and ops credentials.")
app.add_typer(keys_app, name="keys")

T = TypeVar("T")
DEMO_STORE_URL = "sqlite:///podium-demo.db"
ConfigOpt = Annotated[
    str | None, typer.Option("--config", envvar="PODIUM_CONFIG", help="TOML settings file.")
]


def _settings(path: str | None) -> Settings:
    try:
        return config.load(path)
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None


def _topology(settings: Settings) -> Topology:
    try:
        return bootstrap.topology(settings)
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None


def _run(settings: Settings, fn: Callable[[Backends], Awaitable[T]]) -> T:
    async def main() -> T:
        backends = bootstrap.build(settings)
        try:
            await backends.store.migrate()
            await backends.follow_layout()  # the shard count a reshard left live, if any
            return await fn(backends)
        finally:
            await backends.close()

    try:
        return asyncio.run(main())
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None
    except PodiumError as e:
        typer.echo(f"podium: {e}", err=True)
        raise typer.Exit(1) from None


def _logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


@app.command()
def serve(
    config_file: ConfigOpt = None,
    host: Annotated[str | None, typer.Option(help="Listen address.")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port.")] = None,
    workers: Annotated[
        bool,
        typer.Option("--workers/--no-workers", help="Run the background roles in this process."),
    ] = True,
    demo: Annotated[
        bool, typer.Option("--demo", help="Also run simulated game servers and players.")
    ] = False,
    processes: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="API processes sharing the port (needs a shared index); the background "
            "roles then run in one process of their own, even with --processes 1.",
        ),
    ] = None,
) -> None:
    """The API and, by default, every background role, in one process (or --processes)."""
    import uvicorn

    from podium.serve import serving
    from podium.serve.app import create_app

    settings = _settings(config_file)
    server = replace(
        settings.server, host=host or settings.server.host, port=port or settings.server.port
    )
    settings = replace(settings, server=server)
    if demo and settings.store.url == StoreSettings().url:
        # Simulated players stay out of the file a real deployment would use.
        settings = replace(settings, store=replace(settings.store, url=DEMO_STORE_URL))
    # Asked before uvicorn starts, so that a configuration error is said as one, not as a
    # failed start.
    in_process = _topology(settings).in_process_index
    if not workers and in_process:
        typer.echo(
            "podium: --no-workers needs a shared index (index.url = redis://...): "
            "the in-process index is only fed by this process's own updater",
            err=True,
        )
        raise typer.Exit(2)
    if processes is not None:
        _serve_processes(settings, config_file, processes, workers=workers, demo=demo)
        return
    if demo:
        # `podium keys create` writes to the configured store, not the demo's own: so the
        # demo makes the key its ops page asks for, in its own store, and says it.
        _, secret = _run(settings, lambda b: b.podium.keys.create("demo-ops", [], scope=Scope.OPS))
        typer.echo(f"demo: the ops page http://{server.host}:{server.port}/ops takes this key:")
        typer.echo(secret)
    try:
        application = create_app(settings, roles=bootstrap.ROLES if workers else (), demo=demo)
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None
    _logging()
    serving.file_headroom(server)
    config = serving.Config(  # idle and slow connections closed, connections capped
        application,
        server,
        log_level="info",
        access_log=False,
        # Open board streams never end by themselves: give them this long, then close them.
        timeout_graceful_shutdown=3,
        # podium alone decides whose forwarded headers it believes (server.trusted_proxies,
        # api/ratelimit.py): uvicorn's own rewriting trusts 127.0.0.1 and would let anyone
        # on this host choose the client address the read limits count.
        proxy_headers=False,
    )
    runner = uvicorn.Server(config)
    runner.run()
    if not runner.started:  # as uvicorn.run says a failed start
        raise typer.Exit(3)


def _serve_processes(
    settings: Settings, config_file: str | None, processes: int, *, workers: bool, demo: bool
) -> None:
    """``processes`` API processes on one port (uvicorn's supervisor restarts one that dies),
    plus, with ``workers``, one ``podium worker`` process for the background roles: the roles
    coordinate through the store, but one set of them is all a machine needs."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile

    from uvicorn.supervisors import Multiprocess

    from podium.serve import orphans, serving

    if _topology(settings).in_process_index:
        typer.echo(
            "podium: --processes needs a shared index (index.url = redis://...): "
            "each process would hold a board of its own",
            err=True,
        )
        raise typer.Exit(2)
    if demo:
        typer.echo("podium: --demo runs in one process; leave out --processes", err=True)
        raise typer.Exit(2)
    # The API processes are started afresh by uvicorn and read their settings as this one
    # did: from the same file and the same PODIUM_* environment.
    if config_file is not None:
        os.environ["PODIUM_CONFIG"] = os.path.abspath(config_file)
    # Every process of the group writes its metrics here and /metrics sums them (metrics.py).
    shared_metrics = tempfile.mkdtemp(prefix="podium-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = shared_metrics
    _logging()
    roles = None
    if workers:
        argv = [sys.executable, "-m", "podium", "worker", "--roles", ",".join(bootstrap.ROLES)]
        roles = subprocess.Popen(argv, preexec_fn=orphans.die_with_parent)
    try:
        # uvicorn.run would serve a single process in this one, whose metrics were set up
        # before PROMETHEUS_MULTIPROC_DIR existed: the supervisor starts them all afresh.
        serving.file_headroom(settings.server)  # the processes inherit the limit
        config = serving.Config(
            "podium.api.app:from_environment",
            settings.server,
            factory=True,
            workers=processes,
            log_level="info",
            access_log=False,
            timeout_graceful_shutdown=3,
            proxy_headers=False,  # as in serve: server.trusted_proxies alone is believed
        )
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    finally:
        if roles is not None:
            roles.terminate()
            try:
                roles.wait(10)
            except subprocess.TimeoutExpired:
                roles.kill()
        shutil.rmtree(shared_metrics, ignore_errors=True)


@app.command()
def worker(
    roles: Annotated[
        str, typer.Option(help=f"Comma-separated roles, of {','.join(registry.NAMES)}.")
    ],
    config_file: ConfigOpt = None,
    replay_since: Annotated[
        str | None,
        typer.Option(
            help="Before the roles start, apply again everything committed this long ago or "
            "later (60s, 15m, 2h): mends a board after a Redis failover dropped writes."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Serve this process's /metrics on this port (for Prometheus; no key).",
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(help="The address --metrics-port binds (a private one).")
    ] = "127.0.0.1",
) -> None:
    """Background roles only, for a fleet (needs a shared index)."""
    settings = _settings(config_file)
    since_s = _duration(replay_since) if replay_since is not None else None
    if _topology(settings).in_process_index:
        typer.echo("podium: workers need a shared index (index.url = redis://...)", err=True)
        raise typer.Exit(2)
    names = [r.strip() for r in roles.split(",") if r.strip()]
    try:
        registry.chosen(names)  # refused before anything is built or connected
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None
    _logging()
    if metrics_port is not None:
        metrics.serve(metrics_host, metrics_port)

    async def main(b: Backends) -> None:
        gcpolicy.settle()  # the process ends here, so there is nothing to release
        if since_s is not None:
            await b.replay(since_s)
        b.start_roles(names)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        logging.getLogger("podium").info("worker running roles %s", ",".join(names))
        await stop.wait()

    _run(settings, main)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


def _duration(text: str) -> float:
    """Seconds in ``60s``, ``15m``, ``2h``, ``1d`` or a bare number of seconds."""
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:])
    try:
        value = float(t[:-1] if unit else t)
    except ValueError:
        value = -1.0
    if value < 0:
        raise typer.BadParameter(f"expected a duration like 60s, 15m or 2h, got {text!r}")
    return value * (unit or 1.0)


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option(help="Who the key is for, e.g. eu-west-gs.")],
    modes: Annotated[
        str | None, typer.Option(help="A game server's key: the comma-separated modes it submits.")
    ] = None,
    admin: Annotated[
        bool, typer.Option("--admin", help="An admin key: players, bans, freezes, keys.")
    ] = False,
    ops: Annotated[
        bool, typer.Option("--ops", help="A read-only ops key: the ops page and /metrics.")
    ] = False,
    config_file: ConfigOpt = None,
) -> None:
    """Create a credential; prints the key once, on the last line."""
    if [bool(modes), admin, ops].count(True) != 1:
        typer.echo("podium: give exactly one of --modes, --admin or --ops", err=True)
        raise typer.Exit(2)
    scope = Scope.ADMIN if admin else Scope.OPS if ops else Scope.GAME
    settings = _settings(config_file)
    mode_list = [m.strip() for m in (modes or "").split(",") if m.strip()]
    key, secret = _run(settings, lambda b: b.podium.keys.create(name, mode_list, scope=scope))
    typer.echo(f"created key {key.id} ({key.name}, {_scope(key)}); it is shown only once:")
    typer.echo(secret)


def _scope(key: ApiKey) -> str:
    return "modes " + ",".join(key.modes) if key.scope is Scope.GAME else key.scope.value


@keys_app.command("list")
def keys_list(config_file: ConfigOpt = None) -> None:
    """Every key: id, scope, name, created, revoked (secrets are never stored)."""
    keys = _run(_settings(config_file), lambda b: b.podium.keys.all())
    for k in keys:
        revoked = "-" if k.revoked_at is None else to_rfc3339(k.revoked_at)
        # A name stored before the name rules held it may carry a newline or an escape
        # sequence: printed escaped, it cannot forge a line of this list.
        name = k.name if text_problem(k.name) is None else ascii(k.name)
        typer.echo(f"{k.id}  {_scope(k):24}  {to_rfc3339(k.created_at)}  {revoked:20}  {name}")


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="The key's id (podium keys list).")],
    config_file: ConfigOpt = None,
) -> None:
    """Revoke a key: every API process refuses it within server.key_cache_s (10 s default)."""
    settings = _settings(config_file)
    key = _run(settings, lambda b: b.podium.keys.revoke(key_id))
    bound = settings.server.key_cache_s
    typer.echo(
        f"revoked key {key.id} ({key.name}); every API process refuses it within {bound:g} s"
    )


@app.command()
def migrate(config_file: ConfigOpt = None) -> None:
    """Create or upgrade the store's schema."""

    async def done(b: Backends) -> None:
        return None

    _run(_settings(config_file), done)
    typer.echo("store schema is up to date")


store_app = typer.Typer(no_args_is_help=True, help="The score store.")
app.add_typer(store_app, name="store")


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

    _logging()
    done = _run(_settings(config_file), run)
    if abort:
        typer.echo(
            f"the move of bucket {bucket} was undone" if done else f"bucket {bucket} is not moving"
        )
    elif done:
        typer.echo(f"bucket {bucket} moved to {to}")
    else:
        typer.echo(f"bucket {bucket} is on {to} already")


archive_app = typer.Typer(no_args_is_help=True, help="Results past the retention, as files.")
app.add_typer(archive_app, name="archive")


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
    settings = _settings(config_file)

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
        pruner = Pruner(b.store, settings.archive.dir, b.clock, keep)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn()) as bar:
            task = bar.add_task("days", total=days or None)

            def step(start: int, archived: int, deleted: int) -> None:
                bar.update(task, advance=1, description=f"{day_id(start)}: {deleted} results moved")

            return await pruner.prune_before(limit, step)

    n = _run(settings, run)
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

    from podium.archive import results as result_archive

    try:
        manifest = result_archive.verify(file)
    except (OSError, ValueError, KeyError, result_archive.ManifestMismatch) as e:
        typer.echo(f"podium: {file}: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"{manifest['file']}: {manifest['results']} results of {manifest['day']}, "
        f"sha256 {manifest['sha256']} (verified)"
    )
    typer.echo(",".join(result_archive.COLUMNS))
    for r in itertools.islice(result_archive.rows(file), limit):
        typer.echo(
            f"{r.ended_at},{r.player_id},{r.match_id},{r.key_id},{r.mode},{r.duration_s},"
            f"{r.points},{r.recorded_at!r},{r.flag or ''}"
        )


config_app = typer.Typer(no_args_is_help=True, help="The settings file.")
app.add_typer(config_app, name="config")


@config_app.command("schema")
def config_schema() -> None:
    """Print the JSON Schema of the settings file (podium.schema.json), for editors."""
    import json

    typer.echo(json.dumps(config.schema(), indent=2))


# The operator's commands live in a module of their own; they use the helpers above.
for _command in (cli_ops.ban, cli_ops.unban, cli_ops.freeze, cli_ops.status):
    app.command()(_command)
# The rebuild without a gap: its own module, the procedure in rebuilding.py.
app.command()(cli_rebuild.rebuild)
# The capacity planner: its own module, arithmetic in domain/capacity.py.
app.command("plan")(cli_plan.plan_command)
# The load generator: its own package, driving a running podium through podium.client.
app.command("loadgen")(loadgen_command)
# Tournaments: create, list, end (cli_tournament.py, through the admin's use cases).
app.add_typer(cli_tournament.app, name="tournament")


def main() -> None:
    app()
