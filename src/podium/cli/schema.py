"""``podium config schema``: the settings file's JSON Schema, for editors."""

from __future__ import annotations

import typer

from podium.config import settings as config

app = typer.Typer(no_args_is_help=True, help="The settings file.")


@app.command("schema")
def config_schema() -> None:
    """Print the JSON Schema of the settings file (podium.schema.json), for editors."""
    import json

    typer.echo(json.dumps(config.schema(), indent=2))
