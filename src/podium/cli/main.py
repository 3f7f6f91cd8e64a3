"""The ``podium`` command, assembled from its groups, each a module that shares
``common.py``: serve and worker (``processes.py``), keys (``keys.py``), migrate, store and
archive (``store.py``), config (``schema.py``), the operator's ban, unban, freeze and status
(``ops.py``), rebuild (``rebuild.py``), plan (``plan.py``), loadgen (``podium.loadgen``) and
tournament (``tournament.py``)."""

from __future__ import annotations

import typer

from podium.cli import keys, ops, plan, player, processes, rebuild, schema, store, tournament
from podium.loadgen.command import loadgen_command

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Real-time leaderboards for games."
)
app.add_typer(keys.app, name="keys")
app.add_typer(player.app, name="player")
app.command()(processes.serve)
app.command()(processes.worker)
app.command()(store.migrate)
app.add_typer(store.store_app, name="store")
app.add_typer(store.archive_app, name="archive")
app.add_typer(schema.app, name="config")
# The operator's commands, through the admin's use cases.
for _command in (ops.ban, ops.unban, ops.freeze, ops.status):
    app.command()(_command)
# The rebuild without a gap, the procedure in service/upkeep/gapless.py.
app.command()(rebuild.rebuild)
# The capacity planner, arithmetic in domain/capacity.py.
app.command("plan")(plan.plan_command)
# The load generator: its own package, driving a running podium through podium.client.
app.command("loadgen")(loadgen_command)
# Tournaments: create, list, end (through the admin's use cases).
app.add_typer(tournament.app, name="tournament")


def main() -> None:
    app()
