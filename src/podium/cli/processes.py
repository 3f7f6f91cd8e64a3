"""``podium serve`` and ``podium worker``: the processes, the API's and the background roles'."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import replace
from typing import Annotated

import typer

from podium import bootstrap, metrics
from podium.bootstrap import Backends
from podium.cli import common
from podium.cli.common import ConfigOpt
from podium.config.sections import StoreSettings
from podium.config.settings import Settings
from podium.domain.models import Scope
from podium.errors import ConfigError
from podium.serve import gcpolicy
from podium.workers import roles as registry
from podium.workers.runner import START_WAIT_S

DEMO_STORE_URL = "sqlite:///podium-demo.db"


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

    settings = common.load_settings(config_file)
    server = replace(
        settings.server, host=host or settings.server.host, port=port or settings.server.port
    )
    settings = replace(settings, server=server)
    if demo and settings.store.url == StoreSettings().url:
        # Simulated players stay out of the file a real deployment would use.
        settings = replace(settings, store=replace(settings.store, url=DEMO_STORE_URL))
    # Asked before uvicorn starts, so that a configuration error is said as one, not as a
    # failed start.
    in_process = common.topology_of(settings).in_process_index
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
        _, secret = common.run(
            settings, lambda b: b.podium.keys.create("demo-ops", [], scope=Scope.OPS)
        )
        typer.echo(f"demo: the ops page http://{server.host}:{server.port}/ops takes this key:")
        typer.echo(secret)
    try:
        application = create_app(settings, roles=bootstrap.ROLES if workers else (), demo=demo)
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None
    common.start_logging()
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

    if common.topology_of(settings).in_process_index:
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
    common.start_logging()
    roles = None
    if workers:
        argv = [sys.executable, "-m", "podium", "worker", "--roles", ",".join(bootstrap.ROLES)]
        roles = subprocess.Popen(argv, preexec_fn=orphans.die_with_parent)
    try:
        # uvicorn.run would serve a single process in this one, whose metrics were set up
        # before PROMETHEUS_MULTIPROC_DIR existed: the supervisor starts them all afresh.
        serving.file_headroom(settings.server)  # the processes inherit the limit
        config = serving.Config(
            "podium.serve.app:from_environment",
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
    settings = common.load_settings(config_file)
    since_s = _duration(replay_since) if replay_since is not None else None
    if common.topology_of(settings).in_process_index:
        typer.echo("podium: workers need a shared index (index.url = redis://...)", err=True)
        raise typer.Exit(2)
    names = [r.strip() for r in roles.split(",") if r.strip()]
    try:
        registry.chosen(names)  # refused before anything is built or connected
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None
    common.start_logging()
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

    common.run(settings, main, wait_s=START_WAIT_S)


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
