"""Read benchmark: a player's rank with neighbours, and the top page, on a preloaded board.

    python benchmarks/reads.py --config embedded      # SQLite + in-process index (default)
    python benchmarks/reads.py --config production    # Postgres + Redis on this machine

1. Preload ``--players`` players (default 100,000) into the current window of every board.
   ``--preload service`` (the default for embedded) goes through podium's own service in this
   process: matches of 100 players with ``Matches.record`` (the code of ``POST
   /v1/matches/{id}/results``), then the updater role until the outbox is empty; to fit the
   time budget the preload's SQLite connections use ``synchronous=OFF`` and its Postgres
   connections ``synchronous_commit=off`` (the server later opens its own, with the defaults).
   That path does about 1,000 results/s on Postgres here, 100 s for 100,000, so ``--preload
   sql`` (the default for production) inserts the tallies with one INSERT ... SELECT per board
   and loads Redis with ``Rebuilds.rebuild``, what ``podium rebuild`` runs (about 5 s). Then
   (unless ``--no-profiles``) every player gets a name and an avatar, written into the
   store's table and, in production, copied into Redis with ``Rebuilds.copy_profiles``.
2. ``podium serve`` starts on that store (embedded: it rebuilds the in-process index from
   SQLite at start; the time is reported).
3. For each concurrency in ``--concurrency``, closed-loop readers for ``--duration`` s each:
   podium ``GET /v1/boards/week/players/{random id}?neighbors=2``; the same on the bare framework
   (a constant answer of the same shape); production only: raw Redis doing the index work of
   that read (MULTI ZREVRANK+ZSCORE, then ZREVRANGE WITHSCORES of the 5 rows) with redis-py, the
   client podium uses, from the generator process; then podium ``GET /v1/boards/week?limit=100``
   and the bare equivalent. Server time comes from ``podium_read_seconds{kind=...}``, interpolated
   inside its buckets (bounds ..., 10, 25, 50, 100 ms: a p99 shown as 24.9 means "just under
   25 ms"). Closed-loop readers keep the one server process saturated, so latency there is
   mostly queueing: concurrency / throughput.
4. The targets are stated at a sustained 500 results/s, so the podium cells are run once more
   at ``--load-concurrency`` while an open-loop writer sends ``--write-rate`` matches/s of 2
   players (default 250 = 500 results/s) into the same board, plus an open-loop cell of
   ``--read-rate`` rank reads/s (default 500) under the same writes. The writer's own accept
   latency is printed under each of those cells, client and server, without its first second
   (its ramp, before the readers start; printed apart). A run meets the reads target only if
   its writes also kept up: at least 98 % of the matches accepted, with a client p99 under
   100 ms.

``--split`` (production) serves the reads from one podium process (``server.api = "read"``,
no background roles) and the writes from another (``"write"``, with the roles), as a fleet
that runs them apart would; the server CPU shown is then the reads' process, the other's
beside it.

``--repeat N`` repeats steps 3-4 and prints the median and range. ``--quiet F`` waits before
each cell for a second in which the machine is less than F busy. Everything it creates (the
temporary directory, the Postgres database ``podium_bench_*``, the Redis keys under
``podium-bench-*:``, the child servers) is removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import (
    PG_DB,
    REDIS_URL,
    CpuMeter,
    Env,
    Req,
    Server,
    bare_server,
    bench_main,
    closed_loop,
    col,
    common_args,
    cpu_line,
    create_key,
    histogram,
    http_client,
    match_body,
    med_spread,
    ms,
    num_spread,
    open_loop,
    player_id,
    podium_server,
    save_json,
    scrape,
    summary,
    wait_quiet,
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", choices=["embedded", "production"], default="embedded")
    p.add_argument("--players", type=int, default=100_000)
    p.add_argument("--concurrency", default="16,32,64")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measured cell")
    p.add_argument("--write-rate", type=float, default=250.0, help="matches/s of 2 players")
    p.add_argument(
        "--split",
        action="store_true",
        help="production only: reads to a podium process of their own (server.api = read), "
        "writes and the background roles to another (server.api = write)",
    )
    p.add_argument(
        "--load-concurrency",
        type=int,
        default=32,
        help="closed-loop readers in the +writes cells (0: only the open-loop cell)",
    )
    p.add_argument(
        "--read-rate", type=float, default=500.0, help="open-loop rank reads/s in the +writes cells"
    )
    p.add_argument(
        "--preload",
        choices=["auto", "service", "sql"],
        default="auto",
        help="auto: service for embedded, sql for production (see the module docstring)",
    )
    p.add_argument(
        "--profiles",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="give every player a name and an avatar, as a real game's players have",
    )
    common_args(p, wait_s=30, unit="cell")
    return p.parse_args()


# -- preload ------------------------------------------------------------------------------


async def preload(env: Env, n: int) -> dict[str, float]:
    """Through the service in this process, then the updater role until the outbox is empty.
    Only public pieces are used (``bootstrap.build``, ``Keys.create``,
    ``Matches.record``, ``Backends.start_roles``), so that refactors do not break it."""
    from podium import bootstrap
    from podium.config import settings as config
    from podium.domain.models import PlayerResult

    settings = config.load(env.config_path)
    if env.kind == "production":
        url = env.store_url + "?synchronous_commit=off"
        settings = dataclasses.replace(settings, store=dataclasses.replace(settings.store, url=url))
    settings = dataclasses.replace(
        settings, workers=dataclasses.replace(settings.workers, batch=5000)
    )
    backends = bootstrap.build(settings)
    if env.kind == "embedded" and hasattr(backends.store, "_synchronous"):
        # The connections open lazily; the server later opens the file with its own default.
        backends.store._synchronous = "OFF"
    try:
        await backends.start()
        key, _ = await backends.podium.keys.create("preload", ["default"], admin=False)
        rng = random.Random(7)
        now = int(time.time())
        t0 = time.perf_counter()
        sem = asyncio.Semaphore(4)

        async def match(m: int) -> None:
            ids = range(m * 100, min(n, (m + 1) * 100))
            results = [PlayerResult(player_id(i), rng.randint(1, 100_000)) for i in ids]
            async with sem:
                await backends.podium.matches.record(key, f"pre-{m}", "default", now, 600, results)

        await asyncio.gather(*(match(m) for m in range((n + 99) // 100)))
        t_record = time.perf_counter() - t0
        t1 = time.perf_counter()
        pending, _ = await backends.store.outbox_backlog(time.time())
        backends.start_roles(["updater"])
        while True:
            left, _ = await backends.store.outbox_backlog(time.time())
            if left == 0:
                break
            await asyncio.sleep(0.2)
        t_drain = time.perf_counter() - t1
        return {"record_s": t_record, "drain_s": t_drain, "applied": pending}
    finally:
        await backends.close()


async def preload_sql(env: Env, n: int) -> dict[str, float]:
    """Production only: tallies bulk-inserted with one INSERT ... SELECT per board, then each
    board window rebuilt into Redis by ``Rebuilds.rebuild`` (what ``podium rebuild`` runs)."""
    import asyncpg

    from podium import bootstrap
    from podium.config import settings as config

    settings = config.load(env.config_path)
    backends = bootstrap.build(settings)
    try:
        await backends.start()  # migrates the schema
        now = int(time.time())
        t0 = time.perf_counter()
        conn = await asyncpg.connect(env.store_url)
        try:
            for spec in settings.boards:
                w = spec.rule.window_at(now)
                assert w is not None
                # The ids as player_id() writes them (at least 6 digits: lpad alone would cut
                # a 7-digit id to 6), and the totals computed in bigint (i * 7919 overflows
                # a 32-bit integer above 271,189 players).
                await conn.execute(
                    "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version)"
                    " SELECT $1, $2, 'p_' || CASE WHEN i < 1000000 THEN lpad(i::text, 6, '0')"
                    " ELSE i::text END, 1 + (i * 7919 + 13) % 100000,"
                    " $3, 1 FROM generate_series(0::bigint, $4 - 1) AS i",
                    spec.name,
                    w.id,
                    now,
                    n,
                )
            # As after any bulk load: left to autovacuum, the new rows were vacuumed and
            # analyzed during the first measured cells, which then ran against it.
            await conn.execute("VACUUM (ANALYZE) tallies")
        finally:
            await conn.close()
        t_insert = time.perf_counter() - t0
        t1 = time.perf_counter()
        applied = 0
        for spec in settings.boards:
            w = spec.rule.window_at(now)
            assert w is not None
            applied += await backends.podium.rebuilds.rebuild(spec.name, w.id)
        return {"record_s": t_insert, "drain_s": time.perf_counter() - t1, "applied": applied}
    finally:
        await backends.close()


async def preload_profiles(env: Env, n: int) -> float:
    """A name and an avatar for every player, written straight into the store's table (as a
    bulk import would), then, in production, copied into Redis by ``Rebuilds.copy_profiles``
    where the podium under test keeps such a copy (the embedded server copies them at
    start). Returns the seconds it took."""
    t0 = time.perf_counter()
    rows = [(player_id(i), f"Player {i}", f"https://cdn.example.test/a/{i}.png") for i in range(n)]
    if env.kind == "embedded":
        import sqlite3

        path = env.store_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path)) as c, c:
            c.executemany("INSERT INTO profiles (player_id, name, avatar) VALUES (?, ?, ?)", rows)
        return time.perf_counter() - t0
    import asyncpg

    from podium import bootstrap
    from podium.config import settings as config

    conn = await asyncpg.connect(env.store_url)
    try:
        await conn.copy_records_to_table(
            "profiles", records=rows, columns=["player_id", "name", "avatar"]
        )
        await conn.execute("VACUUM (ANALYZE) profiles")
    finally:
        await conn.close()
    # Copied before the server starts: else its updater copies them while the first cells
    # run, and until it is done every rank read takes the names from Postgres.
    backends = bootstrap.build(config.load(env.config_path))
    try:
        await backends.start()
        await backends.podium.rebuilds.copy_profiles()
    finally:
        await backends.close()
    return time.perf_counter() - t0


async def profiles_copy_bytes(env: Env) -> int:
    """What Redis's copy of the profiles takes (``MEMORY USAGE ... SAMPLES 0``: every field
    counted), or 0 where the podium under test keeps no such copy."""
    import redis.asyncio as aioredis

    assert env.prefix is not None
    r = aioredis.Redis.from_url(env.index_url)
    try:
        used = await r.memory_usage(f"{env.prefix}:profiles", samples=0)
    finally:
        await r.aclose()
    return int(used or 0)


# -- cells --------------------------------------------------------------------------------


async def http_cell(
    server: Server,
    path_for: Callable[[], str],
    concurrency: int,
    duration: float,
    kind: str | None,
) -> dict[str, Any]:
    """Closed-loop GETs; with ``kind`` also the server's podium_read_seconds{kind=...}."""
    async with http_client(server.url, concurrency) as client:

        async def op() -> str:
            r = await client.get(path_for())
            return str(r.status_code)

        for _ in range(20):  # open the connections
            await op()
        before = await scrape(client) if kind else ""
        cpu = CpuMeter({"server": server.pid}, PG_DB["name"])
        cpu.begin()
        res = await closed_loop(concurrency, duration, op)
        out = res.report()
        out["cpu"] = cpu.end()
        if kind:
            after = await scrape(client)
            h = histogram(after, "podium_read_seconds", kind=kind) - histogram(
                before, "podium_read_seconds", kind=kind
            )
            out["server"] = {"n": h.count, "p50": h.quantile(0.5), "p99": h.quantile(0.99)}
            out["server"]["over_30ms"] = h.over(0.025)  # nearest bucket bound below 30 ms
        return out


async def open_read_cell(
    server: Server,
    path_for: Callable[[], str],
    rate: float,
    duration: float,
    kind: str,
    writes: Server | None = None,
) -> dict[str, Any]:
    """Open-loop GETs at a fixed rate, with the server's podium_read_seconds{kind=...};
    ``writes``: the process the writes go to, when it is another one (its CPU is shown)."""
    async with http_client(server.url, 256) as client:

        async def fire(i: int, req: Req) -> str:
            return str((await client.get(path_for())).status_code)

        before = await scrape(client)
        pids = {"server": server.pid} | ({"writes server": writes.pid} if writes else {})
        cpu = CpuMeter(pids, PG_DB["name"])
        cpu.begin()
        res = await open_loop(rate, duration, fire)
        rep = res.report()
        rep["cpu"] = cpu.end()
        after = await scrape(client)
    h = histogram(after, "podium_read_seconds", kind=kind) - histogram(
        before, "podium_read_seconds", kind=kind
    )
    rep["rate"] = rep["ok"] / duration
    rep["server"] = {"n": h.count, "p50": h.quantile(0.5), "p99": h.quantile(0.99)}
    rep["server"]["over_30ms"] = h.over(0.025)
    if writes is None:  # the writes' own server time, over the same span, from the same process
        a = histogram(after, "podium_accept_seconds") - histogram(before, "podium_accept_seconds")
        rep["server_accept"] = {"n": a.count, "p50": a.quantile(0.5), "p99": a.quantile(0.99)}
    return rep


async def redis_cell(
    zkey: str, ids: Callable[[], str], concurrency: int, duration: float
) -> dict[str, Any]:
    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:

        async def op() -> str:
            pipe = r.pipeline(transaction=True)
            p = ids()
            pipe.zrevrank(zkey, p)
            pipe.zscore(zkey, p)
            rank, _score = await pipe.execute()
            if rank is None:
                return "missing"
            await r.zrevrange(zkey, max(0, rank - 2), rank + 2, withscores=True)
            return "ok"

        for _ in range(20):
            await op()
        cpu = CpuMeter({}, PG_DB["name"])
        cpu.begin()
        res = await closed_loop(concurrency, duration, op)
        out = res.report()
        out["cpu"] = cpu.end()
        return out
    finally:
        await r.aclose()


@contextlib.asynccontextmanager
async def write_load(server: Server, key: str, rate: float, players: int) -> Any:
    """An open-loop writer in the background for the duration of the block."""
    rng = random.Random(11)
    tag = f"w{secrets.token_hex(4)}"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    box: dict[str, Any] = {}
    stop = asyncio.Event()
    async with http_client(server.url, 128) as client:

        async def fire(i: int, req: Req) -> str:
            ps = [player_id(x) for x in rng.sample(range(players), 2)]
            r = await client.post(
                f"/v1/matches/{tag}-{i}/results", content=match_body(ps, rng), headers=headers
            )
            return str(r.status_code)

        async def writer() -> None:
            res = await open_loop(rate, 3600.0, fire, stop=stop)
            ok = res.ok()
            box["sent"] = len(res.reqs)
            box["ok"] = len(ok)
            box["seconds"] = res.duration
            # The first second is the writer's ramp (its connections opening) before the
            # readers start: the latency that counts is that of the writes beside the reads.
            t0 = min((r.intended for r in res.reqs), default=0.0)
            box["latency"] = summary(r.done - r.started for r in ok if r.intended >= t0 + 1.0)
            box["latency_ramp"] = summary(r.done - r.started for r in ok if r.intended < t0 + 1.0)
            box["lag"] = summary(r.started - r.intended for r in res.reqs)

        task = asyncio.create_task(writer())
        await asyncio.sleep(1.0)  # let it reach its rate before the readers start
        try:
            yield box
        finally:
            stop.set()
            await task


# -- printing -----------------------------------------------------------------------------


def line(label: str, r: dict[str, Any]) -> str:
    lat = r["latency"]
    text = (
        f"  {label:<34} {r['rate']:7.0f}/s  client p50 {ms(lat['p50']):>6} "
        f"p99 {ms(lat['p99']):>6} ms"
    )
    if "server" in r:
        s = r["server"]
        text += f"  server p50 {ms(s['p50']):>5} p99 {ms(s['p99']):>5} ms"
    bad = {k: v for k, v in r["statuses"].items() if k not in ("200", "ok")}
    if bad:
        text += f"  ERRORS {bad}"
    return text + f"\n      {cpu_line(r['cpu'])}"


def print_summary(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n== summary: median [min-max] over {args.repeat} run(s); times in ms ==")
    names = sorted({k for r in runs for k in r}, key=lambda k: (k.split("@")[1], k))
    print(f"{'cell':<28} {'reads/s':>18} {'client p50':>16} {'client p99':>16} {'server p99':>16}")
    for name in names:
        xs = [r[name] for r in runs if name in r]
        server = med_spread(col(xs, "server", "p99")) if "server" in xs[0] else "-"
        print(
            f"{name:<28} {num_spread(col(xs, 'rate')):>18} "
            f"{med_spread(col(xs, 'latency', 'p50')):>16} "
            f"{med_spread(col(xs, 'latency', 'p99')):>16} {server:>16}"
        )
    for name in names:
        if not name.startswith("podium "):
            continue
        bare = name.replace("podium", "bare").replace(" +writes", "")
        ratios50, ratios99 = [], []
        for r in runs:
            if name in r and bare in r:
                ratios50.append(r[name]["latency"]["p50"] / r[bare]["latency"]["p50"])
                ratios99.append(r[name]["latency"]["p99"] / r[bare]["latency"]["p99"])
        if ratios50:
            print(
                f"  {name}: client p50 {num_spread(ratios50, '{:.1f}')} x bare, "
                f"p99 {num_spread(ratios99, '{:.1f}')} x bare"
            )
    targets = [n for n in names if n.startswith("podium") and "+writes" in n]
    for name in targets or [n for n in names if n.startswith("podium")]:
        xs = [r[name] for r in runs if name in r]
        p99 = col(xs, "server", "p99")
        k = sum(1 for v in p99 if v < 0.030)
        print(
            f"  target server p99 < 30 ms, {name}: met in {k} of {len(p99)} run(s) "
            f"(p99s {[ms(v) for v in p99]}; bucket bounds 25 and 50 ms)"
        )
        writers = [x["writer"] for x in xs if "writer" in x]
        if writers:
            # The reads target holds only while the writes go on at their intended rate: a
            # run whose writer fell behind, or whose accepts were slow, does not count.
            kept = [w["ok"] >= 0.98 * w["sent"] for w in writers]
            slow = [w["latency"]["p99"] for w in writers]
            both = sum(
                1 for v, k, a in zip(p99, kept, slow, strict=True) if v < 0.030 and k and a < 0.100
            )
            print(
                f"  ... with the writes sustained (>= 98 % of the matches accepted) and their "
                f"client p99 < 100 ms: {both} of {len(writers)} run(s) (writer p99s "
                f"{[ms(a) for a in slow]}, sustained {kept})"
            )


# -- main ---------------------------------------------------------------------------------


async def bench(env: Env, stack: contextlib.ExitStack, args: argparse.Namespace) -> None:
    concs = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if args.split and env.kind != "production":
        raise SystemExit("--split is for the production configuration (a shared index)")
    how = args.preload
    if how == "auto":
        how = "service" if env.kind == "embedded" else "sql"
    if how == "sql" and env.kind != "production":
        raise SystemExit("--preload sql is for the production configuration")
    if how == "service":
        print(f"preloading {args.players} players in matches of 100 (in-process service) ...")
        pre: dict[str, Any] = dict(await preload(env, args.players))
        print(
            f"  recorded in {pre['record_s']:.1f} s "
            f"({args.players / pre['record_s']:.0f} results/s, durability relaxed); updater "
            f"applied {pre['applied']} changes in {pre['drain_s']:.1f} s "
            f"({pre['applied'] / max(pre['drain_s'], 1e-9):.0f}/s)",
            flush=True,
        )
    else:
        print(f"preloading {args.players} players: SQL tallies, then Rebuilds.rebuild ...")
        pre = dict(await preload_sql(env, args.players))
        print(
            f"  tallies inserted in {pre['record_s']:.1f} s; rebuild put {pre['applied']} "
            f"entries into Redis in {pre['drain_s']:.1f} s "
            f"({pre['applied'] / max(pre['drain_s'], 1e-9):.0f}/s)",
            flush=True,
        )
    if args.profiles:
        pre["profiles_s"] = await preload_profiles(env, args.players)
        print(f"  a profile for each player in {pre['profiles_s']:.1f} s", flush=True)
        if env.kind == "production":
            used = await profiles_copy_bytes(env)
            if used:
                print(
                    f"  Redis's copy of the profiles: {used} bytes, "
                    f"{used / args.players:.0f} a profile (MEMORY USAGE)",
                    flush=True,
                )
    pre["method"] = how
    key = create_key(env)
    profile = args.profile.resolve() if args.profile else None
    if args.split:
        # Reads to a process of their own, writes (and the background roles) to another.
        pod = podium_server(stack, env, profile, args.processes, api="read")
        writes = podium_server(stack, env, None, 0, api="write")
        await writes.wait_ready(wait_s=600)
    else:
        pod = writes = podium_server(stack, env, profile, args.processes)
    bare = bare_server(stack, env)
    t_ready = await pod.wait_ready(wait_s=600)
    await bare.wait_ready()
    note = (
        " (includes rebuilding the in-process index from SQLite)" if env.kind == "embedded" else ""
    )
    print(f"podium ready in {t_ready:.1f} s{note}")
    async with http_client(pod.url, 1) as c:
        top = (await c.get("/v1/boards/week", params={"limit": 1})).json()
    window = top["window"]
    print(f"board week window {window}, leader {top['entries'][0]}")
    rng = random.Random(3)

    def rank_path() -> str:
        return f"/v1/boards/week/players/{player_id(rng.randrange(args.players))}?neighbors=2"

    def page_path() -> str:
        return "/v1/boards/week?limit=100"

    def random_id() -> str:
        return player_id(rng.randrange(args.players))

    runs: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        print(f"\n-- run {rep + 1}/{args.repeat} --", flush=True)
        cells: dict[str, Any] = {}

        async def cell(
            name: str, job: Awaitable[dict[str, Any]], cells: dict[str, Any], wait: bool = True
        ) -> None:
            busy = await wait_quiet(args.quiet, 30.0) if wait else float("nan")
            cells[name] = r = await job
            r["busy_before"] = busy
            print(line(name, r), flush=True)

        for n in concs:
            d = args.duration
            await cell(f"podium rank @{n}", http_cell(pod, rank_path, n, d, "rank"), cells)
            await cell(f"bare rank @{n}", http_cell(bare, rank_path, n, d, None), cells)
            if env.kind == "production":
                zkey = env.redis_board_key("week", window)
                await cell(f"raw redis rank @{n}", redis_cell(zkey, random_id, n, d), cells)
            await cell(f"podium page @{n}", http_cell(pod, page_path, n, d, "page"), cells)
            await cell(f"bare page @{n}", http_cell(bare, page_path, n, d, None), cells)
        if args.write_rate > 0:
            c = args.load_concurrency
            d = args.duration
            # The open-loop cell (the targets' condition) goes first: the closed-loop cells
            # saturate the server, refuse writes past its cap and leave Postgres with dead
            # rows to clean up, which would weigh on whatever cell came next.
            loaded: list[tuple[str, Awaitable[dict[str, Any]]]] = []
            if args.read_rate > 0:
                name = f"podium rank +writes @{args.read_rate:.0f}/s"
                split = writes if writes is not pod else None
                cell_job = open_read_cell(pod, rank_path, args.read_rate, d, "rank", split)
                loaded.append((name, cell_job))
            if c > 0:
                loaded += [
                    (f"podium rank +writes @{c}", http_cell(pod, rank_path, c, d, "rank")),
                    (f"podium page +writes @{c}", http_cell(pod, page_path, c, d, "page")),
                ]
            for name, job in loaded:
                await wait_quiet(args.quiet, 30.0)  # before our own writer starts
                async with write_load(writes, key, args.write_rate, args.players) as w:
                    await cell(name, job, cells, wait=False)
                wl = w["latency"]
                sa = cells[name].get("server_accept")
                server = f", server p50 {ms(sa['p50'])} p99 {ms(sa['p99'])} ms" if sa else ""
                print(
                    f"      writer: {w['ok']}/{w['sent']} matches accepted in {w['seconds']:.1f} s "
                    f"({w['ok'] * 2 / max(w['seconds'], 1e-9):.0f} results/s), accept client p50 "
                    f"{ms(wl['p50'])} p99 {ms(wl['p99'])} ms{server} (in the first second, "
                    f"before the reads: p99 {ms(w['latency_ramp']['p99'])} ms); generator lag p99 "
                    f"{ms(w['lag']['p99'])} ms",
                    flush=True,
                )
                cells[name]["writer"] = w
        runs.append(cells)
    print_summary(runs, args)
    save_json(args, preload=pre, runs=runs)


def main() -> None:
    args = parse_args()
    header = (
        f"config {args.config}; {args.players} players; concurrency {args.concurrency}; "
        f"{args.duration:g} s per cell; writes during the +writes cells: {args.write_rate:g} "
        f"matches/s x 2 players; {args.repeat} repeat(s)"
    )
    bench_main(args, header, bench)


if __name__ == "__main__":
    main()
