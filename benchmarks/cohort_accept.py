"""What a league cohort adds to the cost of a match: one `podium serve` with a board
"week" that every mode feeds, and two boards of the same week beside it: "plain", fed by
mode "default", and "league", fed by mode "league" and played in cohorts of 30 in four
tiers. In one run, alternating, the same open loop sends matches of mode "default" (two
board windows, no cohort) and of mode "league" (two board windows and the player's cohort:
a placement on their first result in the week, in the record's transaction, and a tally
after), and prints for each the server's CPU per accepted match and the accept p99 (the
server's own histogram, and the client's).

    python benchmarks/cohort_accept.py --config embedded      # SQLite + in-process index
    python benchmarks/cohort_accept.py --config production    # Postgres + Redis

Each match has ``--players-per-match`` players drawn from ``--pool`` (fresh match ids, ended
now): with the default pool of 50,000 most results of a run are a player's first of the
week, so most "league" matches place their players. ``--repeat N`` alternates N times and
prints the median and range of each figure. Everything it creates is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import random
from typing import Any

from _harness import (
    OPS_KEY,
    Env,
    _cli_key,
    bench_main,
    common_args,
    med_spread,
    num_spread,
    podium_server,
    save_json,
)

# The match body and the open-loop run with its CPU meter are the tournament benchmark's.
from tournament_accept import drive

MODES = ("default", "league")
EXTRA_TOML = """
[[modes]]
name = "default"
max_points = 1000
[[modes]]
name = "league"
max_points = 1000
[[boards]]
name = "week"
window = "week"
[[boards]]
name = "plain"
window = "week"
modes = ["default"]
[[boards]]
name = "league"
window = "week"
modes = ["league"]
cohort_size = 30
tiers = ["bronze", "silver", "gold", "diamond"]
promote = 5
demote = 5
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", choices=["embedded", "production"], default="embedded")
    p.add_argument("--rate", type=float, default=250.0, help="matches/s")
    p.add_argument("--players-per-match", type=int, default=2)
    p.add_argument("--duration", type=float, default=15.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--pool", type=int, default=50_000, help="distinct players drawn from")
    p.add_argument("--connections", type=int, default=256)
    common_args(p, wait_s=120, unit="run")
    return p.parse_args()


async def bench(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    env.config_path.write_text(env.config_path.read_text() + EXTRA_TOML)
    game = _cli_key(env, "bench", "--modes", ",".join(MODES))
    OPS_KEY["key"] = _cli_key(env, "bench-ops", "--ops")
    pod = podium_server(stack, env, args.profile.resolve() if args.profile else None)
    print(f"podium ready in {await pod.wait_ready():.1f} s (pid {pod.pid})")
    rng = random.Random(1)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for rep in range(args.repeat):
        for mode in MODES:
            out = await drive(pod.url, pod.pid, game, mode, args, rng)
            runs[mode].append(out)
            print(
                f"run {rep + 1}/{args.repeat} mode {mode:7}: {out['ok']}/{out['sent']} ok, "
                f"server CPU {out['server_cpu_ms_per_match']:.2f} ms/match, accept p99 "
                f"server {1000 * out['server_accept_p99']:.1f} ms, client "
                f"{1000 * out['latency']['p99']:.1f} ms",
                flush=True,
            )
    print(f"\n{'':28}{'no cohort':>22}{'with its cohort':>22}")
    rows = (
        ("server CPU per match", "server_cpu_ms_per_match", 0.001),
        ("accept p99 (server)", "server_accept_p99", 1.0),
    )
    for label, field, scale in rows:
        cells = [med_spread([r[field] * scale for r in runs[m]]) for m in MODES]
        print(f"{label:28}{cells[0]:>22}{cells[1]:>22}")
    p99 = [med_spread([r["latency"]["p99"] for r in runs[m]]) for m in MODES]
    print(f"{'accept p99 (client)':28}{p99[0]:>22}{p99[1]:>22}")
    ok = [num_spread([float(r["ok"]) for r in runs[m]]) for m in MODES]
    print(f"{'matches accepted':28}{ok[0]:>22}{ok[1]:>22}")
    save_json(args, runs=runs)


def main() -> None:
    args = parse_args()
    header = (
        f"config {args.config}; {args.rate:g} matches/s x {args.players_per_match} players, "
        f"modes {' and '.join(MODES)} alternating; {args.duration:g} s measured after "
        f"{args.warmup:g} s warm-up; {args.repeat} repeat(s)"
    )
    bench_main(args, header, bench)


if __name__ == "__main__":
    main()
