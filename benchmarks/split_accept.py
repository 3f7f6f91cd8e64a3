"""Accept with the store on one database and split by player over two, at the same load.

    python benchmarks/split_accept.py --rates 150,300 --duration 15

Two ``podium serve`` processes run side by side, on Postgres and Redis of this machine: one
with ``[store] url`` alone (the reference, exactly as ``accept.py --config production``), one
with ``[store] shards`` of two databases of the same Postgres (the home one of them). The same
open-loop generator as ``accept.py`` (``drive``) sends each the same match rate in turn, in
the same run, and the figures wanted are put side by side: accepted results/s, and accept p99
(the server's ``podium_accept_seconds`` and the client's). Both databases live on the one
Postgres server of this machine, so this measures what the split costs (the routing, the
match claim on the match id's database, the claim written again there after a part elsewhere,
a fan-out claim of the outbox), not what a second server would add. The Postgres CPU column
counts the reference's database only.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import secrets
from typing import Any
from urllib.parse import urlparse

from _harness import (
    OPS_KEY,
    PG_ADMIN_URL,
    Env,
    _pg_admin,
    bench_main,
    common_args,
    config_toml,
    create_key,
    delete_redis_keys,
    drop_database,
    med_spread,
    num_spread,
    podium_server,
)
from accept import drive, print_run


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rates", default="150,300", help="match rates to run, matches/s")
    p.add_argument("--players-per-match", type=int, default=2)
    p.add_argument("--duration", type=float, default=15.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--pool", type=int, default=50_000, help="distinct players drawn from")
    p.add_argument("--sample-every", type=int, default=50, help="ack-to-visible: 1 match in N")
    p.add_argument("--poll-interval", type=float, default=0.005)
    p.add_argument("--connections", type=int, default=256, help="generator connection pool")
    p.add_argument(
        "--metadata",
        action="store_true",
        help="every result carries entry metadata, as accept.py's --metadata (its drive reads it)",
    )
    common_args(p, wait_s=120, unit="run")
    args = p.parse_args()
    args.config = "production"
    return args


async def split_env(stack: contextlib.ExitStack, env: Env) -> Env:
    """The same environment, but for a store split over two fresh databases (the first the
    home), with a Redis prefix of its own."""
    token = secrets.token_hex(4)
    names = [f"podium_bench_{token}_{i}" for i in range(2)]
    urls = []
    for name in names:
        await _pg_admin(f'CREATE DATABASE "{name}"')
        stack.callback(drop_database, name)
        urls.append(urlparse(PG_ADMIN_URL)._replace(path=f"/{name}").geturl())
    prefix = f"podium-bench-{token}"
    stack.callback(delete_redis_keys, prefix)
    split = dataclasses.replace(
        env, config_path=env.tmp / "split.toml", store_url=urls[0], prefix=prefix, pg_db=None
    )
    text = config_toml(split).replace(
        f'url = "{urls[0]}"\n', f'url = "{urls[0]}"\nshards = ["{urls[0]}", "{urls[1]}"]\n'
    )
    split.config_path.write_text(text)
    return split


async def bench(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    rates = [float(x) for x in args.rates.split(",") if x.strip()]
    split = await split_env(stack, env)
    keys: dict[str, tuple[str, str | None]] = {}
    servers = {}
    for label, e in (("one database", env), ("two databases", split)):
        key = create_key(e)
        keys[label] = (key, OPS_KEY.get("key"))
        servers[label] = podium_server(stack, e)
    for label, server in servers.items():
        t = await server.wait_ready()
        print(f"{label}: podium ready in {t:.1f} s (pid {server.pid})")
    rng = random.Random(1)
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for rate in rates:
            for label, server in servers.items():
                print(f"\n-- run {rep + 1}/{args.repeat}, {rate:.0f} matches/s, {label} --")
                key, ops = keys[label]
                if ops is not None:
                    OPS_KEY["key"] = ops  # each store has its own keys
                out = await drive(server, key, rate, args, rng, measure_podium=True)
                print_run(label, rate, args.players_per_match, out)
                runs.append({"rate": rate, "label": label, "run": out})
    print("\n== summary (median [range] over repeats) ==")
    for rate in rates:
        print(f"{rate:.0f} matches/s ({rate * args.players_per_match:.0f} results/s intended):")
        for label in servers:
            mine = [r["run"] for r in runs if r["rate"] == rate and r["label"] == label]
            print(
                f"  {label:14}: accepted {num_spread([r['results_per_s_ok'] for r in mine])} "
                f"results/s; accept p99 server "
                f"{med_spread([r['server_accept']['p99'] for r in mine])} ms, client "
                f"{med_spread([r['latency']['p99'] for r in mine])} ms; server CPU "
                f"{num_spread([r['server_cpu_ms_per_match'] for r in mine], '{:.2f}')} ms/match"
            )


def main() -> None:
    args = parse_args()
    header = (
        f"store on one database vs split over two; rates {args.rates} matches/s x "
        f"{args.players_per_match} players; {args.duration:g} s measured after "
        f"{args.warmup:g} s warm-up; {args.repeat} repeat(s)"
    )
    bench_main(args, header, bench)


if __name__ == "__main__":
    main()
