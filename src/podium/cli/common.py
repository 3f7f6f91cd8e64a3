"""What every command of ``podium`` shares: the ``--config`` option, the settings and the
topology read with a configuration error said as one (exit 2), and ``run``, which builds the
backends, migrates the store, follows the index's layout, runs one coroutine and closes
them, a refusal said in one line (exit 1). The command groups import this module, never
``main.py``, which assembles them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer

from podium import bootstrap
from podium.bootstrap import Backends
from podium.config import settings as config
from podium.config.settings import Settings
from podium.config.topology import Topology
from podium.errors import ConfigError, PodiumError
from podium.workers.runner import migrated

T = TypeVar("T")
ConfigOpt = Annotated[
    str | None, typer.Option("--config", envvar="PODIUM_CONFIG", help="TOML settings file.")
]


def load_settings(path: str | None) -> Settings:
    try:
        return config.load(path)
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None


def topology_of(settings: Settings) -> Topology:
    try:
        return bootstrap.topology(settings)
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None


def run(settings: Settings, fn: Callable[[Backends], Awaitable[T]], *, wait_s: float = 0.0) -> T:
    """``wait_s``: how long an unavailable store is waited for at start (a long-running
    process's ``START_WAIT_S``; a one-shot command says the outage at once)."""

    async def main() -> T:
        backends = bootstrap.build(settings)
        try:
            await migrated(backends.store, wait_s)
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


def start_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
