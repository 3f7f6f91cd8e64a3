"""What a person sees: a live panel while the load runs (rich ``Live``, refreshed a few
times a second from the event loop, so it never reads the counts while they change), and
the summary at the end."""

from __future__ import annotations

import asyncio
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from podium.loadgen.driver import Run
from podium.loadgen.stats import PERCENTILES, ROUTES

REFRESH_S = 0.25


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.1f}"


def _ms_value(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:,.1f}"


def panel(run: Run) -> Group:
    """The live figures: progress, counts, the rates of the last seconds, p99 so far."""
    t, s, now = run.tally, run.s, run.now()
    head = Text(
        f"podium loadgen  {min(now, s.duration_s):,.1f}/{s.duration_s:g} s  "
        f"target {s.rate:,.1f} matches/s  in flight {run.in_flight}"
    )
    counts = Table(box=None, pad_edge=False)
    for name in ("matches sent", "acknowledged", "retried", "failed", "results/s", "reads/s"):
        counts.add_column(name, justify="right")
    counts.add_row(
        f"{t.matches_sent:,}",
        f"{t.matches_acknowledged:,}",
        f"{t.retries:,}",
        f"{t.matches_failed:,}",
        f"{t.results_rate.per_s(now):,.1f}",
        f"{t.reads_rate.per_s(now):,.1f}",
    )
    routes = Table("route", "answered", "p99 ms so far", "errors", box=None, pad_edge=False)
    for col in (1, 2, 3):
        routes.columns[col].justify = "right"
    errors = t.errors_by_route()
    for r in ROUTES:
        routes.add_row(
            r,
            f"{t.latency[r].count:,}",
            _ms(t.latency[r].percentile(99)),
            f"{sum(errors.get(r, {}).values()):,}",
        )
    commit = Text(
        f"commit to board: p50 {_ms(t.commit.percentile(50))} ms, "
        f"p99 {_ms(t.commit.percentile(99))} ms ({t.commit.count:,} seen)"
    )
    return Group(head, counts, routes, commit)


async def live(run: Run, console: Console) -> None:
    """Refreshes the panel until the run is done; cancelled, it stops cleanly."""
    with Live(panel(run), console=console, auto_refresh=False, transient=True) as view:
        while not run.done:
            await asyncio.sleep(REFRESH_S)
            view.update(panel(run), refresh=True)


def print_summary(out: dict[str, Any], console: Console) -> None:
    def say(text: str) -> None:
        console.print(text, soft_wrap=True, markup=False)  # whole lines, in a pipe too

    m, res, reads = out["matches"], out["results"], out["reads"]
    say(
        f"podium loadgen: {out['elapsed_s']:,.1f} s "
        f"({out['offered_s']:,.1f} s of new matches, then the rest answered), "
        f"{out['settings']['rate_matches_per_s']:,.1f} matches/s offered, "
        f"{len(out['settings']['apis'])} API address(es)",
    )
    say(
        f"matches: {m['sent']:,} sent, {m['acknowledged']:,} acknowledged, "
        f"{m['failed']:,} failed, {m['retries']:,} retries"
    )
    say(
        f"results/s {res['per_s']:,.1f} ({res['acknowledged']:,})   "
        f"reads/s {reads['per_s']:,.1f} ({reads['answered']:,}; "
        f"{reads['rank_not_on_board_yet']:,} ranks not on the board yet)"
    )
    table = Table("route", "count", *(f"{n} ms" for n, _ in PERCENTILES), "max ms", box=None)
    for col in range(1, 6):
        table.columns[col].justify = "right"
    for route, p in out["routes"].items():
        table.add_row(
            route,
            f"{p['count']:,}",
            *(_ms_value(p[f"{n}_ms"]) for n, _ in PERCENTILES),
            _ms_value(p["max_ms"]),
        )
    console.print(table)
    c = out["commit_to_board"]
    say(
        f"commit to board: p50 {_ms_value(c['p50_ms'])} ms, p99 {_ms_value(c['p99_ms'])} ms; "
        f"{c['seen']:,} of {c['sampled']:,} sampled seen, {c['not_seen']:,} not seen"
    )
    errors = out["errors"]
    if errors:
        listed = "; ".join(
            f"{route} " + ", ".join(f"{status}: {n:,}" for status, n in by.items())
            for route, by in errors.items()
        )
        say(f"errors by status: {listed}")
    else:
        say("errors: none")
    v = out["verify"]
    if v is not None:
        say(
            f"verify: {'passed' if v['passed'] else 'FAILED'}: {v['checked']:,} totals of "
            f"{v['players']:,} players read back, {v['mismatch_count']:,} mismatches"
        )
        for failure in v["failures"]:
            say(f"  {failure}")
        for x in v["mismatches"][:10]:
            say(f"  {x['player']} on {x['board']}: answered {x['answered']}, read {x['read']}")
        for note in v["skipped"]:
            say(f"  not checked: {note}")
    for note in out["notes"]:
        say(f"note: {note}")
