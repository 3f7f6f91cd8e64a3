"""``podium loadgen``: its options, and the run from setup to summary. The keys come from
an option, a file or the environment and are never printed."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from podium.client import AsyncClient, PodiumClientError
from podium.loadgen import display
from podium.loadgen.driver import Run
from podium.loadgen.mix import MixError, derived_rate, parse_mix
from podium.loadgen.setup import Settings, SetupError, choose_boards, friend_lists, set_friends
from podium.loadgen.stats import Verified, summary
from podium.loadgen.verify import verify

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def _fail(message: str) -> typer.Exit:
    typer.echo(f"podium loadgen: {message}", err=True)
    return typer.Exit(2)


def _seconds(text: str) -> float:
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:])
    try:
        value = float(t[:-1] if unit else t)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise _fail(f"--duration: expected a duration like 30s, 5m or 1h, got {text!r}")
    return value * (unit or 1.0)


def _key(given: str | None, file: Path | None, option: str) -> str | None:
    if given and file:
        raise _fail(f"{option} and {option}-file: one of them")
    if file is not None:
        try:
            return file.read_text().strip()
        except OSError as e:
            raise _fail(f"{option}-file {file}: {e.strerror}") from None
    return given or None


def loadgen_command(
    api: Annotated[
        list[str],
        typer.Option(help="An API address; repeat it or give a comma list to drive a fleet."),
    ] = ["http://127.0.0.1:8000"],  # noqa: B006 (typer reads the default, never mutates it)
    key: Annotated[
        str | None, typer.Option(help="A game server's key.", envvar="PODIUM_LOADGEN_KEY")
    ] = None,
    key_file: Annotated[
        Path | None, typer.Option(help="A file holding the game server's key.", dir_okay=False)
    ] = None,
    admin_key: Annotated[
        str | None,
        typer.Option(
            help="An admin key, to give players friends; without one, no friends reads.",
            envvar="PODIUM_LOADGEN_ADMIN_KEY",
        ),
    ] = None,
    admin_key_file: Annotated[
        Path | None, typer.Option(help="A file holding the admin key.", dir_okay=False)
    ] = None,
    players: Annotated[int, typer.Option(help="Simulated players.")] = 1000,
    rate: Annotated[
        float | None,
        typer.Option(help="Matches a second (default: from --matches-per-player and --peak)."),
    ] = None,
    matches_per_player: Annotated[
        float, typer.Option(help="Matches each player plays over the run, at the average.")
    ] = 2.0,
    peak: Annotated[float, typer.Option(help="Times that average to run at: the peak.")] = 1.0,
    players_per_match: Annotated[int, typer.Option(help="Players in each match.")] = 2,
    reads_per_match: Annotated[
        float, typer.Option(help="Reads by each player after a match.")
    ] = 3.5,
    mix: Annotated[
        str, typer.Option(help="How the reads split: weights of top, rank and friends.")
    ] = "top=0.4,rank=0.4,friends=0.2",
    boards: Annotated[
        str | None, typer.Option(help="The boards read, comma list (default: every board).")
    ] = None,
    mode: Annotated[str, typer.Option(help="The mode of every match.")] = "default",
    duration: Annotated[str, typer.Option(help="How long to offer load: 30s, 5m.")] = "30s",
    concurrency: Annotated[int, typer.Option(help="Requests in flight at most.")] = 256,
    game_servers: Annotated[int, typer.Option(help="Simulated game servers.")] = 8,
    friends_players: Annotated[
        int, typer.Option(help="Players given a friends list (with --admin-key).")
    ] = 500,
    commit_sample: Annotated[
        float, typer.Option(help="The share of matches watched until on the board.")
    ] = 0.02,
    commit_deadline: Annotated[
        float, typer.Option(help="Seconds a watched result may take to show; then not seen.")
    ] = 10.0,
    seed: Annotated[int | None, typer.Option(help="The traffic's random seed.")] = None,
    verify_totals: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Read back every player's totals at the end. Exit 1 unless every match was "
            "acknowledged and every total read back is the one answered.",
        ),
    ] = False,
    json_file: Annotated[
        Path | None, typer.Option("--json", help="Write the summary to FILE as JSON.")
    ] = None,
    no_live: Annotated[
        bool, typer.Option("--no-live", help="No live display (CI, pipes).")
    ] = False,
) -> None:
    """Simulated game servers and players against a running podium: open-loop matches at a
    rate, the seed's reads after each, a live display, and a summary (latency per route,
    commit to board, errors by status). With --verify, exits 1 unless the run was verified:
    every match acknowledged (none refused, unanswered or cut off), at least one total read
    back, and each equal to what the submissions answered."""
    apis = tuple(a.strip().rstrip("/") for item in api for a in item.split(",") if a.strip())
    game_key = _key(key, key_file, "--key")
    if game_key is None:
        raise _fail("--key (or --key-file, or PODIUM_LOADGEN_KEY): a game server's key")
    admin = _key(admin_key, admin_key_file, "--admin-key")
    seconds = _seconds(duration)
    try:
        the_mix = parse_mix(mix, reads_per_match)
        if rate is None:
            rate = derived_rate(players, matches_per_player, players_per_match, seconds, peak)
        named = None if boards is None else tuple(b.strip() for b in boards.split(",") if b)
        settings = Settings(
            apis,
            game_key,
            players,
            rate,
            seconds,
            the_mix,
            players_per_match,
            admin,
            named,
            mode,
            concurrency,
            game_servers,
            seed,
            friends_players,
            commit_sample,
            commit_deadline,
            verify_totals,
        )
    except MixError as e:
        raise _fail(str(e)) from None
    console = Console(highlight=False, stderr=False)
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            out = runner.run(_main(settings, console, live=not no_live))
    except SetupError as e:
        raise _fail(str(e)) from None
    display.print_summary(out, console)
    if json_file is not None:
        json_file.write_text(json.dumps(out, indent=2) + "\n")
    if out.get("fatal"):
        raise _fail(out["fatal"])
    if out["verify"] is not None and not out["verify"]["passed"]:
        raise typer.Exit(1)


async def _main(s: Settings, console: Console, *, live: bool) -> dict[str, Any]:
    notes: list[str] = []
    async with AsyncClient(s.apis[0], timeout=s.timeout_s) as c:
        try:
            available = await c.boards()
        except PodiumClientError as e:
            raise SetupError(f"GET /v1/boards on {s.apis[0]}: {e}") from None
    chosen, passed = choose_boards(available, s.boards, s.mode)
    notes += passed
    friended: dict[int, list[int]] = {}
    if s.admin_key is not None and s.mix.friends > 0 and s.friends_players > 0:
        friended = friend_lists(random.Random(s.seed), s.players, s.friends_players)
        await set_friends(
            s.apis[0], s.admin_key, friended, concurrency=s.concurrency, timeout_s=s.timeout_s
        )
    elif s.mix.friends > 0:
        notes.append(
            "no --admin-key: no friends lists set, so no friends reads; their share went "
            "to the top page and the rank"
        )
        s = replace(s, mix=s.mix.without_friends())
    run = Run(s, chosen, friended)
    viewer = asyncio.create_task(display.live(run, console)) if live else None
    try:
        await run.run()
    finally:
        if viewer is not None:
            await viewer
    elapsed = run.now()
    verified: Verified | None = None
    if s.verify:
        verified = await verify(
            s.apis,
            run.expected,
            chosen,
            deadline_s=max(s.commit_deadline_s, 10.0),
            timeout_s=s.timeout_s,
        )
    notes += _notes(run, elapsed)
    out = summary(
        run.tally,
        elapsed_s=elapsed,
        offered_s=run.offered_s,
        settings=s.public(),
        notes=notes,
        verified=verified,
    )
    if run.fatal is not None:
        out["fatal"] = run.fatal
    return out


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when it is there (uvicorn[standard] brings it): the generator's own cost per
    request is what limits how much load one process can offer."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _notes(run: Run, elapsed: float) -> list[str]:
    notes = []
    lag = run.loop_lag.percentile(99) or 0.0
    busy = run.cpu_s / max(elapsed, 1e-9)
    if lag > 0.02 or busy > 0.8:
        notes.append(
            f"the generator itself was busy ({busy:.0%} of a core; its loop late by "
            f"{lag * 1000:,.0f} ms at p99): latencies count from when a request was due, so "
            "they include its own delay; run fewer per process (several processes, or "
            "machines, each with a share of --rate)"
        )
    if any(status == "429" for (_, status) in run.tally.errors):
        notes.append(
            "429s: the server limits reads per client address (server.read_rate_per_s), "
            "and all of this run's players share this machine's; turn it off for a load test"
        )
    return notes
