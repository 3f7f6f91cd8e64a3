"""Accept benchmark: open-loop match results against `podium serve`, next to the bare framework.

    python benchmarks/accept.py --config embedded      # SQLite + in-process index (default)
    python benchmarks/accept.py --config production    # Postgres + Redis on this machine

At each rate (``--rates``, in MATCHES/s; each match carries ``--players-per-match`` player
results, so the default 250,500 with 2 players is 500 and 1,000 player results/s) it runs:

1. podium: ``--warmup`` s unmeasured, then ``--duration`` s measured. Requests start on a
   fixed schedule whatever the server does (open loop), each with a fresh match id and players
   drawn from ``--pool``. Client latency is from the actual send; "from intended" adds the
   generator's own lag. Server figures come from the difference of two ``/metrics`` scrapes and
   are interpolated inside the Prometheus buckets. For one match in ``--sample-every`` the
   client polls ``GET /v1/boards/week/players/{id}`` after the ack until the new total shows:
   ack-to-visible, a lower bound of commit-to-board (the commit happens before the ack). It
   polls every ``--poll-interval`` (5 ms) for 50 ms, then backs off to 100 ms, with at most 8
   watches at once, so that it does not add load of its own when the board lags.
2. the bare framework (``_bare_app.py``: FastAPI, podium's own request model, a constant
   answer), driven by the same generator at the same rate.
3. production only, unless ``--no-pgbench``: pgbench running the SQL podium runs for one match
   (its three transactions, one after the other) at the same match rate, in tables of its own:
   a floor for what Postgres alone needs, and a canary for the state of the shared Postgres.
   The statements are a hand copy of ``store/postgres/record_sql.py`` (claim, then per
   player: advisory lock, replay check, insert, tallies FOR UPDATE, upsert, outbox); later
   additions (the player's country, the frozen-window check, recent points) are not in it.

The generator is one asyncio process with a minimal keep-alive HTTP/1.1 client (``--client
httpx`` for httpx, which costs about four times the CPU per request here); it reports the
arrival rate it achieved and its lag behind the schedule. Requests not answered 15 s after the
last one was sent are cancelled and counted as "unfinished". "Server CPU per accepted match" is
the podium process's CPU time over the measured window divided by the matches acknowledged in
it: a figure the noise of this shared machine barely moves (below saturation; past it, work on
requests that finish after the window inflates it). ``--quiet F`` waits before each run for a
second in which the machine is less than F busy.

``--repeat N`` repeats the whole sequence and prints the median and range of each figure.

``--log nats`` relays the changes through the machine's NATS JetStream (a stream of its own)
instead of letting the updater read the outbox. ``--mark-s 0.5,0`` (A/B mode, issue 36) runs
podium once with each ``[workers] mark_s`` in turn at every rate and repeat (A, B, B, A...),
each on a server started afresh on the same database, in place of the bare framework and
pgbench; it also counts what the machine's Redis (every command, and ``EVALSHA``) and NATS
(JetStream API requests, messages into our stream) were asked a second in the measured window,
and prints each value's medians and its ratios to the first value's, run by run.

    python benchmarks/accept.py --config production --log nats --rates 150 --mark-s 0.5,0

Everything it creates (a temporary directory, the Postgres database ``podium_bench_*``, the
Redis keys under ``podium-bench-*:``, the JetStream stream ``podium-bench-*``, the child
servers) is removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import secrets
import shutil
import sys
import time
from typing import Any
from urllib.parse import urlparse

from _harness import (
    NATS_URL,
    PG_DB,
    REDIS_URL,
    CpuMeter,
    Env,
    Req,
    Server,
    bare_server,
    bench_main,
    col,
    common_args,
    cpu_line,
    create_key,
    delete_stream,
    histogram,
    http_client,
    match_body,
    med_spread,
    ms,
    num_spread,
    open_loop,
    player_id,
    podium_server,
    sample,
    save_json,
    scrape,
    summary,
    wait_quiet,
)

BOARDS = 3  # the default configuration: season, week and day, all fed by mode "default"


# What --metadata sends with every result: a car and a replay id, as a game would.
METADATA = {"car": "mx5-nd2", "replay": "r-20261028-0193-000417"}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", choices=["embedded", "production"], default="embedded")
    p.add_argument("--rates", default="250,500", help="match rates to run, matches/s")
    p.add_argument("--players-per-match", type=int, default=2)
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--pool", type=int, default=50_000, help="distinct players drawn from")
    p.add_argument("--sample-every", type=int, default=50, help="ack-to-visible: 1 match in N")
    p.add_argument("--poll-interval", type=float, default=0.005)
    p.add_argument("--connections", type=int, default=256, help="generator connection pool")
    p.add_argument("--pgbench", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--pgbench-duration", type=float, default=10.0)
    p.add_argument(
        "--metadata",
        action="store_true",
        help="every result carries entry metadata (a 51-byte object: a car and a replay id)",
    )
    p.add_argument("--log", choices=["outbox", "nats"], default="outbox", help="the change log")
    p.add_argument(
        "--mark-s",
        default="",
        help="A/B: [workers] mark_s values by commas (0.5,0: board marks on, off), in turn",
    )
    common_args(p, wait_s=120, unit="run")
    return p.parse_args()


# -- one measured run ---------------------------------------------------------------------


async def drive(
    server: Server,
    key: str,
    rate: float,
    args: argparse.Namespace,
    rng: random.Random,
    *,
    measure_podium: bool,
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    tag = f"w{secrets.token_hex(4)}"  # the warm-up's match ids; the measured run gets its own
    visible: list[float] = []
    missed = 0
    skipped = [0]  # samples not taken because 8 watches were already running
    pollers: set[asyncio.Task[None]] = set()
    sampling = False

    async with (
        http_client(server.url, args.connections) as client,
        http_client(server.url, 32) as poll_client,
    ):

        async def watch(player: str, want: int, acked: float) -> None:
            # The poll must not become load of its own when the board lags: after 50 ms the
            # interval grows from --poll-interval to 100 ms, and at most 8 watches run at once.
            nonlocal missed
            interval = args.poll_interval
            while True:
                try:
                    r = await poll_client.get(f"/v1/boards/week/players/{player}")
                except Exception:  # counted as not seen; the poll goes on
                    r = None
                if r is not None and r.status_code == 200 and r.json()["points"] >= want:
                    visible.append(time.perf_counter() - acked)
                    return
                if time.perf_counter() - acked > 10:
                    missed += 1
                    return
                await asyncio.sleep(interval)
                if time.perf_counter() - acked > 0.05:
                    interval = min(0.1, interval * 1.5)

        async def fire(i: int, req: Req) -> str:
            players = [player_id(n) for n in rng.sample(range(args.pool), args.players_per_match)]
            r = await client.post(
                f"/v1/matches/{tag}-{i}/results",
                content=match_body(players, rng, METADATA if args.metadata else None),
                headers=headers,
            )
            if sampling and r.status_code == 200 and i % args.sample_every == 0:
                if len(pollers) >= 8:
                    skipped[0] += 1
                    return str(r.status_code)
                acked = time.perf_counter()
                want = r.json()["players"][0]["totals"]["week"]
                t = asyncio.create_task(watch(players[0], want, acked))
                pollers.add(t)
                t.add_done_callback(pollers.discard)
            return str(r.status_code)

        out_quiet = await wait_quiet(args.quiet, 120.0)
        if args.warmup > 0:
            await open_loop(rate, args.warmup, fire)
        tag = f"m{secrets.token_hex(4)}"
        before = await scrape(client) if measure_podium else ""
        pids = {"server": server.pid}
        cpu = CpuMeter(pids, PG_DB["name"])
        sampling = measure_podium
        asked0 = await asked(args) if args.mark_s else {}
        cpu.begin()
        res = await open_loop(rate, args.duration, fire, drain_s=15.0)
        cores = cpu.end()
        asked1 = await asked(args) if args.mark_s else {}
        ended = time.perf_counter()
        sampling = False
        out = res.report()
        out["cpu"] = cores
        out["busy_before"] = out_quiet
        # CPU per accepted match: robust to the noise of this shared machine
        out["server_cpu_ms_per_match"] = 1000 * cores["server"] * cpu.wall / max(out["ok"], 1)
        out["results_per_s_ok"] = out["throughput"] * args.players_per_match
        out["asked_per_s"] = {k: (asked1[k] - v) / cpu.wall for k, v in asked0.items()}
        if not measure_podium:
            return out

        # Let the updater catch up, then read the server's own histograms.
        drained = None
        after = ""
        while time.perf_counter() - ended < 20:
            after = await scrape(client)
            accepted = sample(after, "podium_results_accepted_total")
            applied = sample(after, "podium_changes_applied_total")
            if applied >= BOARDS * accepted:
                drained = time.perf_counter() - ended
                break
            await asyncio.sleep(0.05)
        if pollers:
            await asyncio.wait(set(pollers), timeout=15)
        acc = histogram(after, "podium_accept_seconds") - histogram(before, "podium_accept_seconds")
        c2b = histogram(after, "podium_commit_to_board_seconds") - histogram(
            before, "podium_commit_to_board_seconds"
        )
        out["server_accept"] = {"n": acc.count, "p50": acc.quantile(0.5), "p99": acc.quantile(0.99)}
        out["server_accept"]["over_100ms"] = acc.over(0.1)
        out["commit_to_board"] = {
            "n": c2b.count,
            "p50": c2b.quantile(0.5),
            "p99": c2b.quantile(0.99),
            "over_1s": c2b.over(1.0),
        }
        out["drain_s"] = drained
        out["ack_to_visible"] = summary(visible)
        out["ack_to_visible"]["missed"] = missed
        out["ack_to_visible"]["skipped"] = skipped[0]
        return out


async def asked(args: argparse.Namespace) -> dict[str, float]:
    """What the machine's Redis and NATS were asked so far (every user's: the machine is
    shared), for ``--mark-s``: Redis commands, ``EVALSHA`` calls (the marks' note is one);
    JetStream API requests of the account (``settled`` asks a consumer's info), messages
    into our stream."""
    out: dict[str, float] = {}
    if args.config == "production":
        import redis.asyncio as aioredis

        r = aioredis.Redis.from_url(REDIS_URL)
        try:
            stats, cmds = await r.info("stats"), await r.info("commandstats")
        finally:
            await r.aclose()
        out["redis commands"] = stats["total_commands_processed"]
        out["redis evalsha"] = cmds.get("cmdstat_evalsha", {}).get("calls", 0)
    if args.log == "nats":
        import nats

        nc = await nats.connect(NATS_URL)
        try:
            js = nc.jetstream()
            out["jetstream api"] = (await js.account_info()).api.total
            out["stream msgs"] = (await js.stream_info(args.stream)).state.last_seq
        finally:
            await nc.close()
    return out


# -- pgbench reference --------------------------------------------------------------------

PGB_SCHEMA = """
CREATE TABLE pgb_matches (match_id text PRIMARY KEY, key_id text NOT NULL,
    recorded_at double precision NOT NULL);
CREATE TABLE pgb_results (player_id text NOT NULL, match_id text NOT NULL, key_id text NOT NULL,
    mode text NOT NULL, ended_at bigint NOT NULL, duration_s integer NOT NULL,
    points bigint NOT NULL, recorded_at double precision NOT NULL,
    PRIMARY KEY (player_id, match_id));
CREATE INDEX pgb_results_recent ON pgb_results (player_id, mode, recorded_at);
CREATE TABLE pgb_tallies (board text NOT NULL, window_id text NOT NULL, player_id text NOT NULL,
    total bigint NOT NULL, reached_at bigint NOT NULL, version bigint NOT NULL,
    PRIMARY KEY (board, window_id, player_id));
CREATE INDEX pgb_tallies_player ON pgb_tallies (player_id);
CREATE TABLE pgb_outbox (id bigserial PRIMARY KEY, board text NOT NULL, window_id text NOT NULL,
    player_id text NOT NULL, total bigint NOT NULL, reached_at bigint NOT NULL,
    version bigint NOT NULL, committed_at double precision NOT NULL,
    claimed_until double precision NOT NULL DEFAULT 0);
CREATE INDEX pgb_outbox_claimable ON pgb_outbox (claimed_until, id);
"""


def _pgb_player(v: str) -> list[str]:
    """The round trips of podium's record transaction for one player (``store/postgres``): BEGIN
    with the lock, one read (the stored result, the tallies FOR UPDATE), one write (result,
    tallies, outbox), COMMIT. ``\\;`` sends two statements in one round trip, as podium's
    simple-protocol BEGIN does."""
    pid = f"'p:{v}'"
    boards = "'{season,week,day}'::text[]"
    return [
        f"BEGIN \\; SELECT pg_advisory_xact_lock(1, :{v});",
        f"SELECT (SELECT 1 FROM pgb_results WHERE player_id = {pid} AND match_id = ':mid'), "
        f"ARRAY(SELECT total FROM pgb_tallies WHERE player_id = {pid} "
        f"AND board = ANY({boards}) FOR UPDATE);",
        f"WITH r AS (INSERT INTO pgb_results VALUES ({pid}, ':mid', 'k', 'default', 0, 540, "
        ":pts, 0) ON CONFLICT DO NOTHING), "
        f"t AS (INSERT INTO pgb_tallies SELECT b, 'w', {pid}, :pts, 0, 1 FROM unnest({boards}) b "
        "ON CONFLICT (board, window_id, player_id) DO UPDATE SET "
        "total = pgb_tallies.total + excluded.total, version = pgb_tallies.version + 1) "
        "INSERT INTO pgb_outbox (board, window_id, player_id, total, reached_at, version, "
        f"committed_at) SELECT b, 'w', {pid}, :pts, 0, 1, 0 FROM unnest({boards}) b;",
        "COMMIT;",
    ]


def pgbench_script(players: int, pool: int) -> str:
    """One pgbench transaction = one match: claim the match id (one statement), read what
    the players already have (one statement), then each player's transaction, one after the
    other (podium runs the players concurrently)."""
    lines = [
        "\\set m random(1, 2000000000)",
        "\\set pts random(1, 1000)",
    ]
    for k in range(players):
        lines.append(f"\\set p{k} random(1, {pool})")
    lines.append(
        "WITH c AS (INSERT INTO pgb_matches VALUES ('m:client_id-:m', 'k', 0) "
        "ON CONFLICT (match_id) DO NOTHING RETURNING key_id) SELECT COALESCE("
        "(SELECT key_id FROM c), "
        "(SELECT key_id FROM pgb_matches WHERE match_id = 'm:client_id-:m'));"
    )
    ids = ", ".join(f"'p:p{k}'" for k in range(players))
    lines.append(
        "SELECT p, e.match_id, ARRAY(SELECT points FROM pgb_results r WHERE r.player_id = p "
        "AND r.mode = 'default' ORDER BY r.ended_at DESC LIMIT 20) "
        f"FROM unnest(ARRAY[{ids}]) AS p "
        "LEFT JOIN pgb_results e ON e.player_id = p AND e.match_id = 'm:client_id-:m';"
    )
    for k in range(players):
        lines += _pgb_player(f"p{k}")
    return "\n".join(lines).replace("':mid'", "'m:client_id-:m'") + "\n"


async def pgbench(env: Env, rate: float, args: argparse.Namespace) -> dict[str, Any] | None:
    exe = shutil.which("pgbench")
    if exe is None or env.pg_db is None:
        return None
    import asyncpg

    conn = await asyncpg.connect(env.store_url)
    try:
        exists = await conn.fetchval("SELECT to_regclass('pgb_matches') IS NOT NULL")
        if not exists:
            await conn.execute(PGB_SCHEMA)
    finally:
        await conn.close()
    d = env.tmp / f"pgbench-{secrets.token_hex(3)}"
    d.mkdir()
    script = d / "match.sql"
    script.write_text(pgbench_script(args.players_per_match, args.pool))
    # The server the store is on (PODIUM_BENCH_POSTGRES may name a private one).
    url = urlparse(env.store_url)
    host, port, user = url.hostname or "127.0.0.1", str(url.port or 5432), url.username
    argv = [exe, "-h", host, "-p", port, "-U", user or "postgres", "-n", "-f", str(script)]
    argv += ["-R", str(rate), "-T", str(int(args.pgbench_duration)), "-c", "10", "-j", "2"]
    argv += ["-l", f"--log-prefix={d}/log", env.pg_db]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        print(f"pgbench failed ({proc.returncode}):\n{text}", file=sys.stderr)
        return None
    lat: list[float] = []
    lag: list[float] = []
    for f in d.glob("log*"):
        for line in f.read_text().splitlines():
            cols = line.split()
            if len(cols) >= 6 and cols[2].isdigit():
                lat.append(int(cols[2]) / 1e6)
                if len(cols) >= 7:
                    lag.append(int(cols[6]) / 1e6)
    tps = next((ln for ln in text.splitlines() if ln.startswith("tps")), "")
    return {"latency": summary(lat), "lag": summary(lag), "tps_line": tps, "n": len(lat)}


# -- printing -----------------------------------------------------------------------------


def print_run(label: str, rate: float, ppm: int, r: dict[str, Any]) -> None:
    lat, lag = r["latency"], r["lag"]
    print(f"  {label}: intended {rate:.0f} matches/s ({rate * ppm:.0f} results/s)")
    print(
        f"    sent {r['sent']}, arrival rate achieved {r['achieved_rate']:.1f}/s; "
        f"generator lag p50 {ms(lag['p50'])} p99 {ms(lag['p99'])} max {ms(lag['max'])} ms"
    )
    print(
        f"    accepted {r['ok']} matches, {r['results_per_s_ok']:.0f} results/s from the first "
        f"send to the last answer; statuses {r['statuses']}"
    )
    print(
        f"    client latency ms: p50 {ms(lat['p50'])} p90 {ms(lat['p90'])} "
        f"p99 {ms(lat['p99'])} max {ms(lat['max'])}  "
        f"(from intended send: p99 {ms(r['latency_from_intended']['p99'])})"
    )
    if "server_accept" in r:
        sa, c2b, vis = r["server_accept"], r["commit_to_board"], r["ack_to_visible"]
        print(
            f"    server podium_accept_seconds (bucket-interpolated): p50 {ms(sa['p50'])} "
            f"p99 {ms(sa['p99'])} ms; over 100 ms: {sa['over_100ms']:.2%}"
        )
        print(
            f"    server podium_commit_to_board_seconds (bucket-interpolated): "
            f"p50 {ms(c2b['p50'])} p99 {ms(c2b['p99'])} ms; over 1 s: {c2b['over_1s']:.2%} "
            f"(n={c2b['n']:.0f})"
        )
        drain = "not within 20 s" if r["drain_s"] is None else f"{r['drain_s']:.2f} s"
        print(f"    updater backlog drained {drain} after the last request completed")
        print(
            f"    client ack-to-visible (lower bound of commit-to-board): n={vis['n']} "
            f"p50 {ms(vis['p50'])} p99 {ms(vis['p99'])} max {ms(vis['max'])} ms, "
            f"not visible in 10 s: {vis['missed']}, "
            f"not sampled (8 watches running): {vis['skipped']}"
        )
    print(
        f"    {cpu_line(r['cpu'])}; server CPU {r['server_cpu_ms_per_match']:.2f} ms per "
        "accepted match"
    )


def print_pgbench(rate: float, r: dict[str, Any] | None) -> None:
    if r is None:
        print("  pgbench: skipped (not installed, or not the production configuration)")
        return
    lat = r["latency"]
    print(
        f"  pgbench, podium's SQL for one match at {rate:.0f} matches/s: n={r['n']} "
        f"latency ms p50 {ms(lat['p50'])} p99 {ms(lat['p99'])} max {ms(lat['max'])}; "
        f"schedule lag p99 {ms(r['lag']['p99'])} ms; {r['tps_line']}"
    )


def print_summary(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print("\n== summary: median [min-max] over", args.repeat, "run(s); times in ms ==")
    for rate in sorted({r["rate"] for r in runs}):
        rs = [r for r in runs if r["rate"] == rate]
        pod = [r["podium"] for r in rs]
        bare = [r["bare"] for r in rs]

        def col(xs: list[dict[str, Any]], *path: str) -> list[float]:
            out = []
            for x in xs:
                v: Any = x
                for p in path:
                    v = v.get(p) if isinstance(v, dict) else None
                out.append(float("nan") if v is None else float(v))
            return out

        ratio50 = [
            p["latency"]["p50"] / b["latency"]["p50"] for p, b in zip(pod, bare, strict=True)
        ]
        ratio99 = [
            p["latency"]["p99"] / b["latency"]["p99"] for p, b in zip(pod, bare, strict=True)
        ]
        print(
            f"{args.config}, {rate:.0f} matches/s x {args.players_per_match} = "
            f"{rate * args.players_per_match:.0f} results/s intended"
        )
        print(f"  accepted results/s      {num_spread(col(pod, 'results_per_s_ok'))}")
        print(f"  podium client p50       {med_spread(col(pod, 'latency', 'p50'))}")
        print(f"  podium client p99       {med_spread(col(pod, 'latency', 'p99'))}")
        print(f"  bare client p50         {med_spread(col(bare, 'latency', 'p50'))}")
        print(f"  bare client p99         {med_spread(col(bare, 'latency', 'p99'))}")
        r50 = num_spread(ratio50, "{:.1f}")
        r99 = num_spread(ratio99, "{:.1f}")
        print(f"  podium/bare p50, p99    {r50} x, {r99} x")
        print(
            f"  server accept p50/p99   {med_spread(col(pod, 'server_accept', 'p50'))} / "
            f"{med_spread(col(pod, 'server_accept', 'p99'))}"
        )
        print(
            f"  commit-to-board p50/p99 {med_spread(col(pod, 'commit_to_board', 'p50'))} / "
            f"{med_spread(col(pod, 'commit_to_board', 'p99'))}"
        )
        print(
            f"  ack-to-visible p50/p99  {med_spread(col(pod, 'ack_to_visible', 'p50'))} / "
            f"{med_spread(col(pod, 'ack_to_visible', 'p99'))}"
        )
        print(f"  generator lag p99       {med_spread(col(pod, 'lag', 'p99'))}")
        print(f"  podium server cores     {num_spread(col(pod, 'cpu', 'server'), '{:.2f}')}")
        cpm = num_spread(col(pod, "server_cpu_ms_per_match"), "{:.2f}")
        print(f"  podium CPU ms per match {cpm}")
        cpm = num_spread(col(bare, "server_cpu_ms_per_match"), "{:.2f}")
        print(f"  bare CPU ms per match   {cpm}")
        print(f"  others' cores (noise)   {num_spread(col(pod, 'cpu', 'others'), '{:.2f}')}")
        print(f"  generator cores         {num_spread(col(pod, 'cpu', 'generator'), '{:.2f}')}")
        if args.config == "production":
            print(f"  postgres cores (all)    {num_spread(col(pod, 'cpu', 'postgres'), '{:.2f}')}")
            print(f"  postgres cores (ours)   {num_spread(col(pod, 'cpu', 'pg ours'), '{:.2f}')}")
            print(f"  redis cores             {num_spread(col(pod, 'cpu', 'redis'), '{:.2f}')}")
        pg = [r["pgbench"] for r in rs if r.get("pgbench")]
        if pg:
            print(
                f"  pgbench match p50/p99   {med_spread(col(pg, 'latency', 'p50'))} / "
                f"{med_spread(col(pg, 'latency', 'p99'))}"
            )
        p99s = col(pod, "latency", "p99")
        sacc = col(pod, "server_accept", "p99")
        c2b = col(pod, "commit_to_board", "p99")

        def met(values: list[float], limit: float) -> str:
            k = sum(1 for v in values if v < limit)
            return f"met in {k} of {len(values)} run(s)"

        print(f"  target accept p99 < 100 ms (client): {met(p99s, 0.1)}")
        print(f"  target accept p99 < 100 ms (server histogram): {met(sacc, 0.1)}")
        print(f"  target commit-to-board p99 < 1 s (server histogram): {met(c2b, 1.0)}")
        ok_rate = all(
            v >= 0.98 * rate * args.players_per_match for v in col(pod, "results_per_s_ok")
        )
        print(f"  sustained the intended rate (>= 98% accepted): {'yes' if ok_rate else 'NO'}")


# -- main ---------------------------------------------------------------------------------


async def marks_ab(env: Env, key: str, rates: list[float], args: argparse.Namespace) -> None:
    """``--mark-s``: podium with each ``[workers] mark_s`` in turn, started afresh for each run
    (the same database and keys), so that the values alternate within every repeat, in the
    reverse order every other repeat (a drift of the machine favours neither)."""
    base = env.config_path.read_text()
    values = [float(x) for x in args.mark_s.split(",") if x.strip()]
    rng = random.Random(1)
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for rate in rates:
            for v in values if rep % 2 == 0 else values[::-1]:  # A, B; then B, A
                env.config_path.write_text(base + f"[workers]\nmark_s = {v!r}\n")
                with contextlib.ExitStack() as one:
                    pod = podium_server(one, env, None, args.processes)
                    await pod.wait_ready()
                    print(
                        f"\n-- run {rep + 1}/{args.repeat}, {rate:.0f} matches/s, mark_s {v:g} --",
                        flush=True,
                    )
                    p = await drive(pod, key, rate, args, rng, measure_podium=True)
                print_run(f"podium, mark_s {v:g}", rate, args.players_per_match, p)
                got = ", ".join(f"{k} {n:.1f}" for k, n in p["asked_per_s"].items())
                print(f"    asked a second (the whole machine's): {got or '-'}")
                runs.append({"rate": rate, "mark_s": v, "rep": rep, "podium": p})
    print_marks(runs, values, args)
    save_json(args, runs=runs)


def print_marks(runs: list[dict[str, Any]], values: list[float], args: argparse.Namespace) -> None:
    """Each value's median [min-max]; then each later value against the first, run by run
    (the same repeat and rate): the median of their ratios, and of their differences."""
    rows: list[tuple[str, tuple[str, ...], float, str]] = [
        ("accepted results/s", ("results_per_s_ok",), 1, "{:.0f}"),
        ("commit-to-board p50 ms (server)", ("commit_to_board", "p50"), 1000, "{:.1f}"),
        ("commit-to-board p99 ms (server)", ("commit_to_board", "p99"), 1000, "{:.1f}"),
        ("ack-to-visible p50 ms", ("ack_to_visible", "p50"), 1000, "{:.1f}"),
        ("ack-to-visible p99 ms", ("ack_to_visible", "p99"), 1000, "{:.1f}"),
        ("backlog drained, s", ("drain_s",), 1, "{:.2f}"),
        ("server CPU ms per match", ("server_cpu_ms_per_match",), 1, "{:.2f}"),
        ("cores: podium", ("cpu", "server"), 1, "{:.3f}"),
        ("cores: our Postgres backends", ("cpu", "pg ours"), 1, "{:.3f}"),
        ("cores: redis", ("cpu", "redis"), 1, "{:.3f}"),
        ("cores: nats", ("cpu", "nats"), 1, "{:.3f}"),
    ]
    asked_keys = sorted({k for r in runs for k in r["podium"]["asked_per_s"]})
    rows += [(f"{k}/s", ("asked_per_s", k), 1, "{:.1f}") for k in asked_keys]
    first = values[0]
    for rate in sorted({r["rate"] for r in runs}):
        by = {(r["mark_s"], r["rep"]): r["podium"] for r in runs if r["rate"] == rate}
        reps = sorted({rep for _, rep in by})
        print(
            f"\n== mark_s A/B, {args.config}, log {args.log}, {rate:.0f} matches/s x "
            f"{args.players_per_match}: median [min-max] over {len(reps)} run(s) each =="
        )
        head = " | ".join(f"mark_s {v:g}" for v in values)
        later = " | ".join(f"{first:g} / {v:g}, {first:g} - {v:g}" for v in values[1:])
        print(f"figure | {head} | {later} (medians of each repeat's own)")
        for label, path, scale, fmt in rows:
            cols = {v: [x * scale for x in col([by[v, k] for k in reps], *path)] for v in values}
            cells = [num_spread(cols[v], fmt) for v in values]
            for v in values[1:]:
                pairs = [
                    (a, b) for a, b in zip(cols[first], cols[v], strict=True) if a == a and b == b
                ]
                ratio = num_spread([a / b for a, b in pairs if b], "{:.2f}")
                diff = num_spread([a - b for a, b in pairs], fmt)
                cells.append(f"{ratio}, {diff}")
            print(f"{label} | " + " | ".join(cells))


async def bench(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    rates = [float(x) for x in args.rates.split(",") if x.strip()]
    args.stream = ""
    if args.log == "nats":
        args.stream = f"podium-bench-{secrets.token_hex(4)}"
        stack.callback(lambda: asyncio.run(delete_stream(args.stream)))
        with env.config_path.open("a") as f:
            f.write(f'[log]\nurl = "{NATS_URL}"\nstream = "{args.stream}"\n')
    key = create_key(env)
    if args.mark_s:
        await marks_ab(env, key, rates, args)
        return
    pod = podium_server(
        stack, env, args.profile.resolve() if args.profile else None, args.processes
    )
    bare = bare_server(stack, env)
    t_pod = await pod.wait_ready()
    await bare.wait_ready()
    print(f"podium ready in {t_pod:.1f} s (pid {pod.pid}); bare framework pid {bare.pid}")
    rng = random.Random(1)
    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for rate in rates:
            print(f"\n-- run {rep + 1}/{args.repeat}, {rate:.0f} matches/s --", flush=True)
            p = await drive(pod, key, rate, args, rng, measure_podium=True)
            print_run("podium", rate, args.players_per_match, p)
            b = await drive(bare, key, rate, args, rng, measure_podium=False)
            print_run("bare framework", rate, args.players_per_match, b)
            pg = None
            if env.kind == "production" and args.pgbench:
                pg = await pgbench(env, rate, args)
                print_pgbench(rate, pg)
            runs.append({"rate": rate, "podium": p, "bare": b, "pgbench": pg})
    print_summary(runs, args)
    save_json(args, runs=runs)


def main() -> None:
    args = parse_args()
    header = (
        f"config {args.config}; rates {args.rates} matches/s x {args.players_per_match} "
        f"players; {args.duration:g} s measured after {args.warmup:g} s warm-up; "
        f"player pool {args.pool}; {args.repeat} repeat(s); log {args.log}"
    )
    if args.mark_s:
        header += f"; A/B of [workers] mark_s {args.mark_s}"
    bench_main(args, header, bench)


if __name__ == "__main__":
    main()
