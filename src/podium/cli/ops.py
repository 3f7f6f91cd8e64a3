"""The operator's commands: ``podium ban``, ``unban``, ``freeze`` and ``status``.

Each goes through the very use case its admin route calls (``player_admin.py``,
``board_admin.py``, ``status.py``), never around it: a ban from here is recorded in the store
first and lifted from every board window as the API's is, a freeze freezes once. A refusal
is said in one line, as the API's problem says it, and exits 1 (``common.run``). The commands
read the same settings file as every other (``--config`` or ``PODIUM_CONFIG``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from podium.bootstrap import Backends
from podium.cli import common
from podium.cli.common import ConfigOpt
from podium.domain.models import FrozenWindow
from podium.domain.windows import to_rfc3339
from podium.service.views import Page

if TYPE_CHECKING:
    from podium.service.status import Report

REASON_MAX = 500  # as the API's ban body (api/schemas.py BanIn)

# What the API's 202 says of a ban or an unban recorded while the index is out: the same here.
BAN_PENDING = (
    "the rank index is unavailable, so the boards drop them once it is back (a retry is "
    "safe, and does it at once)"
)
UNBAN_PENDING = (
    "their totals could not be sent to the boards yet, and return to them once the store "
    "and the index answer again"
)
# A CLI process has an in-process index of its own, which no server reads.
IN_PROCESS = (
    "; the index is in process (index.url = memory://): a running `podium serve` drops "
    "them from its boards when its reconciler comes to them, and rebuilds without them at "
    "its next start"
)


def ban(
    player: Annotated[str, typer.Argument(metavar="PLAYER", help="The player's id.")],
    reason: Annotated[str, typer.Option(help="Why, kept with the ban (for appeals).")],
    config_file: ConfigOpt = None,
) -> None:
    """Ban a player from every board (their totals stay in the store).

    Recorded in the store first, then removed from every board window and refused there, as
    the admin route does; `podium unban` restores them."""
    if not 1 <= len(reason) <= REASON_MAX:
        typer.echo(f"podium: --reason: 1 to {REASON_MAX} characters, got {len(reason)}", err=True)
        raise typer.Exit(2)
    settings = common.load_settings(config_file)
    in_process = common.topology_of(settings).in_process_index
    done = common.run(settings, lambda b: b.podium.player_admin.ban(player, reason))
    if not done:
        typer.echo(
            f"banned {player}: recorded, and their results are no longer counted; {BAN_PENDING}"
        )
        return
    typer.echo(
        f"banned {player}: recorded in the store, removed from every board window and refused "
        f"there; their totals stay in the store" + (IN_PROCESS if in_process else "")
    )


def unban(
    player: Annotated[str, typer.Argument(metavar="PLAYER", help="The player's id.")],
    config_file: ConfigOpt = None,
) -> None:
    """Lift a ban: the player's totals, kept in the store, return to the boards."""
    settings = common.load_settings(config_file)
    done = common.run(settings, lambda b: b.podium.player_admin.unban(player))
    if not done:
        typer.echo(f"unbanned {player}: recorded; {UNBAN_PENDING}")
        return
    # The totals go through the outbox: the updaters (of `podium serve` or the fleet) put
    # them back, as after a ban lifted through the API.
    typer.echo(f"unbanned {player}: their totals are sent to the boards again")


def freeze(
    board: Annotated[str, typer.Option(help="The board's name.")],
    window: Annotated[
        str, typer.Option(help="The window id (2026-W44; on a grouped board 2026-W44@FR).")
    ],
    top: Annotated[
        int, typer.Option(min=0, max=1000, help="Rows of the final standings to print.")
    ] = 10,
    config_file: ConfigOpt = None,
) -> None:
    """Freeze a board window now, once, and print its final standings.

    As the admin route does (a tournament that ended early): the final standings go into
    the store and every player into the archive file; a second freeze changes nothing."""

    async def run(b: Backends) -> tuple[bool, FrozenWindow, Page]:
        froze, info = await b.podium.board_admin.freeze(board, window)
        page = await b.podium.reads.page(board, info.window, 0, top) if top else None
        return froze, info, page or Page(board, info.window, info.frozen_at, [])

    froze, info, page = common.run(common.load_settings(config_file), run)
    how = "froze" if froze else "already frozen:"
    typer.echo(
        f"{how} {info.board} {info.window} at {to_rfc3339(info.frozen_at)}, {info.players} "
        f"players; archive {info.archive or '-'} (sha256 {info.checksum or '-'})"
    )
    for e in page.entries:
        typer.echo(f"{e.rank:>6}  {e.points:>12}  {e.player_id}")


def status(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object, for scripts.")] = False,
    config_file: ConfigOpt = None,
) -> None:
    """What runs, what is behind, what is down (exit 1, naming it).

    Each role's last heartbeat, the oldest change not yet on the boards, the snapshots'
    ages, each index shard's Redis node and replication, each store database."""
    import asyncio
    import json

    from podium import bootstrap
    from podium.errors import ConfigError, PodiumError
    from podium.service.status import Status

    settings = common.load_settings(config_file)
    topo = common.topology_of(settings)

    async def main() -> Report:
        b = bootstrap.build(settings)
        try:
            try:
                # As every command does; a store that cannot take it is reported, not fatal.
                await b.store.migrate()
                why = None
            except PodiumError as e:
                why = f"schema: {e}"
            await b.follow_layout()  # the shard count a reshard left live, if any
            snapshots = b.snapshots if topo.aggregated else None
            fresh = b.podium.reads.freshness  # the board marks, as an API process reads them
            behind = None if fresh is None or topo.in_process_index else fresh.behind
            report = await Status(settings, b.store, b.index, snapshots, b.clock, behind).report()
            if why is not None:
                report.problems.insert(0, why)
            return report
        finally:
            await b.close()

    try:
        report = asyncio.run(main())
    except ConfigError as e:
        typer.echo(f"podium: configuration error: {e}", err=True)
        raise typer.Exit(2) from None
    down = report.down()
    if as_json:
        typer.echo(json.dumps(as_dict(report, topo.in_process_index), indent=2))
    else:
        _print(report, topo.in_process_index)
    if down:
        typer.echo(f"podium: down: {'; '.join(down)}", err=True)
        raise typer.Exit(1)


def as_dict(r: Report, in_process: bool) -> dict[str, Any]:
    """The report for scripts: camelCase, times in RFC 3339, None where not known or n/a."""
    return {
        "ok": not r.down(),
        "down": r.down(),
        "at": to_rfc3339(r.at),
        "store": [{"name": d.name, "up": d.up, "why": d.why} for d in r.databases],
        "index": [
            {
                "shard": n.shard,
                "node": n.node,
                "up": n.up,
                "role": n.role,
                "replOffset": n.offset,
                "replicas": [
                    {"node": p.node, "state": p.state, "lagBytes": p.lag_bytes} for p in n.replicas
                ],
                "why": n.why,
            }
            for n in r.index
        ],
        "roles": None
        if r.roles is None
        else [
            {
                "role": s.role,
                "lastHeartbeat": to_rfc3339(s.at),
                "ageSeconds": round(s.age_s, 1),
                "holder": s.holder,
                "processes": s.processes,
                "stale": s.stale,
            }
            for s in r.roles
        ],
        "outbox": None
        if r.outbox_pending is None
        else {"pending": r.outbox_pending, "oldestAgeSeconds": round(r.outbox_age_s or 0.0, 1)},
        "snapshots": None
        if r.snapshots is None
        else [
            {
                "board": s.board,
                "window": s.window,
                "ageSeconds": None if s.age_s is None else round(s.age_s, 1),
            }
            for s in r.snapshots
        ],
        "boardBehindSeconds": None if r.board_behind_s is None else round(r.board_behind_s, 1),
        "inProcessIndex": in_process,
        "problems": r.problems,
    }


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _print(r: Report, in_process: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from podium.service.status import shard_name

    out = Console(highlight=False, soft_wrap=True)
    ok, bad = "[green]up[/]", "[red]DOWN[/]"

    store = Table(title="Store databases", title_justify="left")
    for col in ("database", "state", "why"):
        store.add_column(col)
    for d in r.databases:
        store.add_row(d.name, ok if d.up else bad, d.why or "")
    out.print(store)

    index = Table(title="Rank index", title_justify="left")
    for col in ("shard", "node", "state", "role", "repl offset", "replicas (lag bytes)"):
        index.add_column(col)
    for n in r.index:
        replicas = ", ".join(
            f"{p.node} {p.state} ({'n/a' if p.lag_bytes is None else p.lag_bytes})"
            for p in n.replicas
        )
        index.add_row(
            shard_name(n),
            n.node,
            ok if n.up else bad,
            n.role or "n/a",
            "n/a" if n.offset is None else str(n.offset),
            replicas or ("n/a" if n.role is None else "none"),
        )
    out.print(index)
    for n in r.index:
        if not n.up:  # under the table: a driver's message is too long for a cell
            out.print(f"[red]{shard_name(n)} at {n.node}[/]: {n.why}")

    roles = Table(title="Roles (heartbeats in the store)", title_justify="left")
    for col in ("role", "last heartbeat", "age", "process", "live processes"):
        roles.add_column(col)
    for s in r.roles or ():
        age = f"[red]{_age(s.age_s)} (stale)[/]" if s.stale else _age(s.age_s)
        roles.add_row(s.role, to_rfc3339(s.at), age, s.holder, str(s.processes))
    out.print(roles)
    if r.roles == []:
        out.print("no role has written a heartbeat yet (none runs against this store)")

    pending = "n/a" if r.outbox_pending is None else str(r.outbox_pending)
    out.print(f"oldest change not yet on the boards: {_age(r.outbox_age_s)} ({pending} waiting)")
    if r.board_behind_s is not None:  # the in-process index is another process's: not read
        out.print(f"board behind the store (its marks): {_age(r.board_behind_s)}")
    if r.snapshots is None and not any(p.startswith("snapshots:") for p in r.problems):
        out.print("snapshots: n/a (boards are not split across index shards)")
    for snap in r.snapshots or ():
        age = "none published" if snap.age_s is None else _age(snap.age_s)
        out.print(f"snapshot {snap.board} {snap.window}: {age}")
    if in_process:
        out.print("the index is in process: each podium process holds its own (n/a here)")
    for p in r.problems:
        out.print(f"[yellow]not known[/] {p}")
