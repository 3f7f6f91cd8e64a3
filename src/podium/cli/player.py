"""``podium player export | erase | erasure``: a player's data, straight from the store
(issue 35; the admin API's ``/v1/admin/players/{playerId}/export`` and ``DELETE``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from podium.bootstrap import Backends
from podium.cli import common
from podium.cli.common import ConfigOpt
from podium.domain.erasure import Erasure
from podium.domain.windows import to_rfc3339

app = typer.Typer(no_args_is_help=True, help="A player's data: exported, erased.")

PlayerArg = Annotated[str, typer.Argument(metavar="ID", help="The player's id.")]
BY = "cli"  # who asked an erasure made here (the API notes the admin key's id)


@app.command("export")
def player_export(
    player_id: PlayerArg,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the document here, not to stdout.")
    ] = None,
    config_file: ConfigOpt = None,
) -> None:
    """Everything podium holds on the player, as one JSON document (docs/export.md),
    written a page at a time."""

    settings = common.load_settings(config_file)
    target: BinaryIO = sys.stdout.buffer if out is None else open(out, "wb")  # noqa: SIM115

    async def write(b: Backends) -> None:
        async for chunk in await b.podium.erasures.export(player_id):
            target.write(chunk)
        target.write(b"\n")

    try:
        common.run(settings, write)
    finally:
        target.flush()
        if out is not None:
            target.close()


def _show(e: Erasure) -> None:
    state = "done" if e.done_at is not None else f"pending (step {e.step.value})"
    typer.echo(f"erasure {e.id}: {state}, asked {to_rfc3339(e.requested_at)} by {e.requested_by}")
    for kind, n in sorted(e.counts.items()):
        typer.echo(f"  {kind:32} {n}")


@app.command("erase")
def player_erase(
    player_id: PlayerArg,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="Carry it out here, to its end, rather than leave it to the eraser role."
        ),
    ] = False,
    config_file: ConfigOpt = None,
) -> None:
    """Erase the player everywhere, for good: the receipt is printed at once (poll it with
    podium player erasure RECEIPT); the eraser role carries it out."""

    async def erase(b: Backends) -> Erasure:
        e = await b.podium.erasures.request(player_id, BY)
        if wait:
            await b.podium.erasures.carry_out(e)
            found = await b.podium.erasures.status(e.id)
            return found or e
        return e

    _show(common.run(common.load_settings(config_file), erase))


@app.command("erasure")
def player_erasure(
    receipt: Annotated[str, typer.Argument(metavar="RECEIPT", help="The erasure's id.")],
    config_file: ConfigOpt = None,
) -> None:
    """An erasure's state and the counts of what it touched."""
    found = common.run(
        common.load_settings(config_file), lambda b: b.podium.erasures.status(receipt)
    )
    if found is None:
        typer.echo(f"podium: no erasure {receipt}", err=True)
        raise typer.Exit(1)
    _show(found)
