"""``podium keys create | list | revoke``: game-server, admin and ops credentials."""

from __future__ import annotations

from typing import Annotated

import typer

from podium.cli import common
from podium.cli.common import ConfigOpt
from podium.domain.models import ApiKey, Scope
from podium.domain.validation import text_problem
from podium.domain.windows import to_rfc3339

app = typer.Typer(no_args_is_help=True, help="Game-server, admin and ops credentials.")


@app.command("create")
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
    settings = common.load_settings(config_file)
    mode_list = [m.strip() for m in (modes or "").split(",") if m.strip()]
    key, secret = common.run(settings, lambda b: b.podium.keys.create(name, mode_list, scope=scope))
    typer.echo(f"created key {key.id} ({key.name}, {_scope(key)}); it is shown only once:")
    typer.echo(secret)


def _scope(key: ApiKey) -> str:
    return "modes " + ",".join(key.modes) if key.scope is Scope.GAME else key.scope.value


@app.command("list")
def keys_list(config_file: ConfigOpt = None) -> None:
    """Every key: id, scope, name, created, revoked (secrets are never stored)."""
    keys = common.run(common.load_settings(config_file), lambda b: b.podium.keys.all())
    for k in keys:
        revoked = "-" if k.revoked_at is None else to_rfc3339(k.revoked_at)
        # A name stored before the name rules held it may carry a newline or an escape
        # sequence: printed escaped, it cannot forge a line of this list.
        name = k.name if text_problem(k.name) is None else ascii(k.name)
        typer.echo(f"{k.id}  {_scope(k):24}  {to_rfc3339(k.created_at)}  {revoked:20}  {name}")


@app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="The key's id (podium keys list).")],
    config_file: ConfigOpt = None,
) -> None:
    """Revoke a key: every API process refuses it within server.key_cache_s (10 s default)."""
    settings = common.load_settings(config_file)
    key = common.run(settings, lambda b: b.podium.keys.revoke(key_id))
    bound = settings.server.key_cache_s
    typer.echo(
        f"revoked key {key.id} ({key.name}); every API process refuses it within {bound:g} s"
    )
