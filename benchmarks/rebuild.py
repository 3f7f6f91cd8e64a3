"""``podium rebuild`` against ``redis-cli --pipe``: members per second put into one Redis.

One board window of N members (``--members``, a million by default) is written into the
store's ``tallies`` table of a fresh Postgres database, once. Then, alternating in one run,
into one private ``redis-server`` (no persistence) started here:

- podium: the rebuild without a gap (``service/upkeep/gapless.py``, what ``podium rebuild --board
week``
  runs), in a child process of its own: the log's position noted, a new generation of keys
  filled from Postgres page by page, the log applied again, the two generations compared
  (counts, top 1,000, 1,000 sampled ranks), the switch, the old keys dropped. Timed from the
  first page to the end of the switch, and the fill alone; its peak RSS from ``wait4``.
- the reference: ``redis-cli --pipe`` fed a file of the very same members and scores (the
  board's packed scores, ``ZADD`` of as many members a command as podium's fill sends,
  RESP written out beforehand,
  untimed), timed from its start to its exit, its peak RSS likewise.

The board key is unlinked before each run, and its member count checked after it.

    PODIUM_BENCH_POSTGRES=postgresql://postgres@127.0.0.1:5432/postgres \\
        python benchmarks/rebuild.py --members 1000000 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _harness import code_line, free_port, install_sigterm, machine_line, make_env
from podium.index.redis.rebuild import FILL_CHUNK as PAGE  # members a ZADD, as podium sends

BOARD = "week"


def start_redis(stack: contextlib.ExitStack, tmp: Path) -> int:
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp), "--protected-mode", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def stop() -> None:
        proc.terminate()
        proc.wait(10)

    stack.callback(stop)
    for _ in range(100):
        done = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True)
        if done.stdout.strip() == b"PONG":
            return port
        time.sleep(0.1)
    raise SystemExit("the private redis-server did not start")


async def seed(store_url: str, window: str, start: int, n: int) -> None:
    import asyncpg

    from podium.store.postgres import PostgresStore

    store = PostgresStore.from_url(store_url)
    await store.migrate()
    await store.close()
    conn = await asyncpg.connect(store_url)
    try:
        await conn.execute(
            "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version) "
            "SELECT $1, $2, 'p_' || lpad(i::text, 7, '0'), (i::bigint * 7919) % 100000, "
            "$3 + (i % 86400), 1 FROM generate_series(1, $4) AS i",
            BOARD, window, start, n,
        )  # fmt: skip
        await conn.execute("ANALYZE tallies")
    finally:
        await conn.close()


async def resp_file(store_url: str, key: str, window: str, start: int, path: Path) -> int:
    """The same members and packed scores as podium writes, as RESP ``ZADD``s in a file."""
    import asyncpg

    from podium.config.settings import parse

    spec = next(b for b in parse({}).boards if b.name == BOARD)
    encode = spec.codec.encode
    conn = await asyncpg.connect(store_url)
    n = 0
    k = key.encode()
    try:
        with path.open("wb") as out:
            async with conn.transaction():
                rows: list[Any] = []
                async for r in conn.cursor(
                    "SELECT player_id, total, reached_at FROM tallies "
                    "WHERE board = $1 AND window_id = $2 ORDER BY player_id",
                    BOARD, window, prefetch=10_000,
                ):  # fmt: skip
                    rows.append(r)
                    if len(rows) == PAGE:
                        out.write(_zadd(k, rows, encode, start))
                        n += len(rows)
                        rows = []
                if rows:
                    out.write(_zadd(k, rows, encode, start))
                    n += len(rows)
    finally:
        await conn.close()
    return n


def _zadd(key: bytes, rows: list[Any], encode: Any, start: int) -> bytes:
    parts = [b"*%d\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n" % (2 + 2 * len(rows), len(key), key)]
    for player, total, reached in rows:
        m, s = player.encode(), b"%d" % encode(total, reached - start)
        parts.append(b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(s), s, len(m), m))
    return b"".join(parts)


def timed_child(argv: list[str], stdin: Any = None) -> tuple[float, int, bytes]:
    """Run a child to its end: its wall time, its peak RSS in kB (wait4), its stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {out[-2000:]!r}")
    return wall, usage.ru_maxrss, out


def redis_cli(port: int, *args: str) -> str:
    done = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, check=True)
    return done.stdout.decode().strip()


def child(config_path: str, window: str) -> None:
    """The podium side, in a process of its own: the rebuild, timed; JSON on stdout."""
    from podium import bootstrap
    from podium.config import settings as config
    from podium.service.upkeep.gapless import Target

    class Timer:
        first: float | None = None
        filled: float | None = None

        def begin(self, what: str, total: int | None) -> None:
            self.first = self.first or time.perf_counter()

        def advance(self, members: int) -> None:
            self.filled = time.perf_counter()

        def say(self, text: str) -> None:
            return None

        def phase(self, name: str) -> None:
            return None

    async def main() -> dict[str, Any]:
        b = bootstrap.build(config.load(config_path))
        try:
            await b.store.migrate()
            spec = b.podium.boards.board(BOARD)
            timer = Timer()
            t0, c0 = time.perf_counter(), time.process_time()
            [done] = await b.gapless().run(
                [Target(spec, b.podium.boards.window(spec, window))], grace_s=0, progress=timer
            )
            end = time.perf_counter()
            assert timer.first is not None and timer.filled is not None
            return {
                "members": done.members,
                "seconds": end - t0,
                "cpu_s": time.process_time() - c0,
                "fill_s": timer.filled - timer.first,
                "same": None if done.difference is None else done.difference.lines()[0],
            }
        finally:
            await b.close()

    out = asyncio.run(main())
    out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--members", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=2, help="each side this many times, alternating")
    p.add_argument("--json", type=Path, help="also write every figure to this file")
    p.add_argument(
        "--py-spy", type=Path, help="profile podium's runs with py-spy (collapsed stacks here)"
    )
    p.add_argument("--child", nargs=2, metavar=("CONFIG", "WINDOW"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child)
        return
    install_sigterm()
    print(machine_line())
    print(code_line())
    with contextlib.ExitStack() as stack:
        env = make_env(stack, "production")
        port = start_redis(stack, env.tmp)
        env.index_url = f"redis://127.0.0.1:{port}/0"
        env.config_path.write_text(
            f'[store]\nurl = "{env.store_url}"\n[index]\nurl = "{env.index_url}"\n'
            f'prefix = "{env.prefix}"\n'
        )
        from podium.config.settings import parse

        spec = next(b for b in parse({}).boards if b.name == BOARD)
        now = int(time.time())
        w = spec.rule.window_at(now)
        assert w is not None
        key = env.redis_board_key(BOARD, w.id)
        t0 = time.perf_counter()
        asyncio.run(seed(env.store_url, w.id, w.start, args.members))
        resp = env.tmp / "zadd.resp"
        n = asyncio.run(resp_file(env.store_url, key, w.id, w.start, resp))
        print(
            f"seeded {n:,} members of {BOARD} {w.id} in Postgres and wrote {resp.stat().st_size:,}"
            f" bytes of RESP in {time.perf_counter() - t0:.1f} s; private redis-server :{port}",
            flush=True,
        )
        runs: dict[str, list[dict[str, Any]]] = {"podium": [], "redis-cli --pipe": []}
        for r in range(args.rounds):
            sides = ["podium", "redis-cli --pipe"]
            for side in sides if r % 2 == 0 else sides[::-1]:
                redis_cli(port, "UNLINK", key)
                time.sleep(1.0)  # the old key freed off the main thread before we time again
                if side == "podium":
                    argv = [sys.executable, __file__, "--child", str(env.config_path), w.id]
                    if args.py_spy:
                        spied = f"{args.py_spy}.{r}"
                        argv = [
                            "py-spy",
                            "record",
                            "-r",
                            "200",
                            "-f",
                            "raw",
                            "-o",
                            spied,
                            "--",
                            *argv,
                        ]
                    wall, rss, out = timed_child(argv)
                    said = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
                    fig = json.loads(said[-1])  # py-spy, when it runs, says things too
                    fig |= {"wall_s": wall, "peak_rss_mb": rss / 1024}
                    fig["rate"] = fig["members"] / fig["seconds"]
                else:
                    with resp.open("rb") as f:
                        wall, rss, out = timed_child(["redis-cli", "-p", str(port), "--pipe"], f)
                    fig = {"seconds": wall, "peak_rss_mb": rss / 1024, "rate": n / wall}
                    fig["said"] = out.decode().strip().splitlines()[-1]
                held = int(redis_cli(port, "ZCARD", key))
                if held != n:
                    raise SystemExit(f"{side} left {held:,} members, not {n:,}")
                fig["redis_used_mb"] = int(redis_cli(port, "MEMORY", "USAGE", key)) / 2**20
                runs[side].append(fig)
                extra = ""
                if "fill_s" in fig:
                    extra = f", fill alone {fig['fill_s']:.2f} s, its CPU {fig['cpu_s']:.2f} s"
                print(
                    f"round {r + 1} {side:17s} {fig['rate']:>10,.0f} members/s "
                    f"({fig['seconds']:.2f} s{extra}), peak RSS {fig['peak_rss_mb']:.0f} MB",
                    flush=True,
                )
        med = {s: statistics.median(f["rate"] for f in v) for s, v in runs.items()}
        ratio = med["podium"] / med["redis-cli --pipe"]
        rss = max(f["peak_rss_mb"] for f in runs["podium"])
        print(
            f"\nmedian: podium {med['podium']:,.0f} members/s, redis-cli --pipe "
            f"{med['redis-cli --pipe']:,.0f} members/s: ratio {ratio:.2f} (target 0.5); podium's "
            f"peak RSS {rss:.0f} MB, the sorted set in Redis "
            f"{runs['podium'][-1]['redis_used_mb']:.0f} MB"
        )
        if args.json:
            args.json.write_text(json.dumps({"members": n, "runs": runs, "ratio": ratio}, indent=2))


if __name__ == "__main__":
    main()
