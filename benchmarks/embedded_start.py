"""Embedded start benchmark: ``podium serve`` on a SQLite store of N players, against plain
Python reading the same rows into a sorted list (issue 23).

    python benchmarks/embedded_start.py                          # 1,000,000 players, one board
    python benchmarks/embedded_start.py --boards 3 --profiles    # season, week, day + profiles
    python benchmarks/embedded_start.py --players 100000 --rounds 3

1. The store is made once and kept in ``--dir`` (default: ``podium-bench-start`` under the
   temporary directory), keyed by its shape, so that later runs (and a run of another
   checkout) start on the very same file: ``podium migrate`` makes the schema, then the
   rows go straight into it with ``executemany`` in one transaction, exactly the rows a
   record writes (``tallies``: total, reached_at in the current window, version 1, scored
   1, no metadata; with ``--profiles`` a ``profiles`` row per player, version 1). Nothing
   is in the outbox, as after the updaters caught up.
2. Each round, alternating which goes first: (a) ``podium serve`` as a subprocess, timed
   from the spawn until ``/healthz`` answers 200, and until a rank read of the last player
   in board order answers rank N on every board (the board is whole), with the peak RSS
   (``VmHWM``) of the server then; (b) the reference: a ``python`` subprocess that reads the
   same rows with ``sqlite3`` (tuples, no row factory), packs each score as podium does
   (§2) and builds a ``sortedcontainers.SortedList`` once from a list per board (and with
   profiles, a dict of them), timed from spawn to its exit, with its peak RSS.
3. Prints each round, then the medians and the ratio podium / reference.

``--py-spy FILE`` runs one more start of podium under ``py-spy record`` (speedscope
format) after the rounds, for where the time goes. Everything but the cached store is
removed at the end; ``--fresh`` makes the store again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from _harness import CLK_TCK, Server, code_line, free_port, install_sigterm, machine_line
from podium.config.settings import load
from podium.domain.boards import Order

BOARDS = {1: ("week",), 3: ("season", "week", "day")}

REFERENCE = r"""
import sqlite3, sys
from sortedcontainers import SortedList
path, profiles = sys.argv[1], sys.argv[2] == "1"
boards = [a.split(":") for a in sys.argv[3:]]  # name:window:start:bits:desc
conn = sqlite3.connect(path)
lists, names = [], {}
for name, window, start, bits, desc in boards:
    start, bits, desc = int(start), int(bits), desc == "1"
    top = (1 << bits) - 1
    rows = conn.execute(
        "SELECT player_id, total, reached_at FROM tallies WHERE board = ? AND window_id = ?",
        (name, window),
    )
    if bits == 0:
        lists.append(SortedList([(t, p) for p, t, _ in rows]))
    elif desc:
        lists.append(SortedList([((t << bits) + top - (r - start), p) for p, t, r in rows]))
    else:
        lists.append(SortedList([((t << bits) + (r - start), p) for p, t, r in rows]))
if profiles:
    for p, n, a, c, v in conn.execute(
        "SELECT player_id, name, avatar, country, version FROM profiles"
    ):
        names[p] = (n, a, c, v)
print(sum(len(s) for s in lists), len(names))
"""


def config_text(db: Path, boards: int) -> str:
    lines = [
        "[server]",
        "read_rate_per_s = 0",
        "[store]",
        f'url = "sqlite:///{db}"',
        "[index]",
        'url = "memory://"',
    ]
    for name in BOARDS[boards]:
        lines += ["[[boards]]", f'name = "{name}"', f'window = "{name}"']
    return "\n".join(lines) + "\n"


def make_store(folder: Path, players: int, boards: int, profiles: bool, fresh: bool) -> Path:
    """The store (cached by shape) and its config; returns the config's path."""
    shape = f"n{players}-b{boards}-p{int(profiles)}"
    db = folder / f"{shape}.db"
    cfg = folder / f"{shape}.toml"
    cfg.write_text(config_text(db, boards))
    done = folder / f"{shape}.done"
    if done.exists() and not fresh:
        return cfg
    for f in folder.glob(f"{shape}.db*"):
        f.unlink()
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "podium", "migrate", "--config", str(cfg)],
        check=True,
        capture_output=True,
    )
    settings = load(cfg)
    now = int(time.time())
    rng = random.Random(23)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("BEGIN")
    for spec in settings.boards:
        w = spec.rule.window_at(now)
        assert w is not None
        span = max(1, now - w.start)
        rows = (
            (
                spec.name,
                w.id,
                f"p_{i:07d}",
                rng.randint(1, 1_000_000),
                w.start + rng.randrange(span),
            )
            for i in range(players)
        )
        conn.executemany(
            "INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, "
            "scored, metadata) VALUES (?, ?, ?, ?, ?, 1, 1, NULL)",
            rows,
        )
    if profiles:
        countries = ("FR", "DE", "US", "BR", "JP", "KR", "GB", "ES")
        conn.executemany(
            "INSERT INTO profiles (player_id, name, avatar, country, version) "
            "VALUES (?, ?, ?, ?, 1)",
            (
                (
                    f"p_{i:07d}",
                    f"Player {i}",
                    f"https://cdn.example.com/a/{i % 1000}.png",
                    rng.choice(countries),
                )
                for i in range(players)
            ),
        )
    conn.execute("COMMIT")
    conn.close()
    done.touch()
    took = time.perf_counter() - t0
    print(f"made {db.name}: {players:,} players x {boards} boards in {took:.1f} s")
    return cfg


def last_in_order(cfg: Path) -> list[tuple[str, str, str]]:
    """(board, window, player) of the last player in board order on each board."""
    settings = load(cfg)
    db = settings.store.url.removeprefix("sqlite:///")
    conn = sqlite3.connect(db)
    now = int(time.time())
    out = []
    for spec in settings.boards:
        w = spec.rule.window_at(now)
        assert w is not None
        rows = conn.execute(
            "SELECT player_id, total, reached_at FROM tallies WHERE board = ? AND window_id = ?",
            (spec.name, w.id),
        ).fetchall()
        scored = [(spec.codec.encode(t, r - w.start), p) for p, t, r in rows]
        pick = min(scored) if spec.order is Order.DESC else max(scored)
        out.append((spec.name, w.id, pick[1]))
    conn.close()
    return out


def reference_args(cfg: Path, profiles: bool) -> list[str]:
    settings = load(cfg)
    now = int(time.time())
    argv = [sys.executable, "-c", REFERENCE, settings.store.url.removeprefix("sqlite:///")]
    argv.append("1" if profiles else "0")
    for spec in settings.boards:
        w = spec.rule.window_at(now)
        assert w is not None
        c = spec.codec
        argv.append(f"{spec.name}:{w.id}:{w.start}:{c.time_bits}:{int(c.descending)}")
    return argv


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process so far (this machine is shared: CPU
    moves less with the others' load than wall time does)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def podium_start(
    cfg: Path, tmp: Path, last: list[tuple[str, str, str]], n: int, spy: Path | None = None
) -> tuple[float, float, float, float]:
    """Seconds to /healthz 200, seconds to every board whole, CPU seconds then, peak RSS
    in MB."""
    port = free_port()
    argv = [sys.executable, "-m", "podium", "serve", "--config", str(cfg), "--port", str(port)]
    if spy is not None:
        argv = ["py-spy", "record", "-o", str(spy), "--format", "speedscope", "--", *argv]
    server = Server("podium", argv, port, tmp / "serve.log")
    t0 = time.perf_counter()
    server.start()
    healthy: float | None = None
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=5.0) as client:
            while True:
                if server.proc is not None and server.proc.poll() is not None:
                    raise RuntimeError(f"podium exited at start:\n{server.log_tail()}")
                if time.perf_counter() - t0 > 600:
                    raise RuntimeError(f"podium not ready after 600 s:\n{server.log_tail()}")
                try:
                    if healthy is None:
                        if (await client.get("/healthz")).status_code == 200:
                            healthy = time.perf_counter() - t0
                        else:
                            await asyncio.sleep(0.02)
                        continue
                    whole = True
                    for board, window, player in last:
                        r = await client.get(
                            f"/v1/boards/{board}/players/{player}", params={"window": window}
                        )
                        whole = whole and r.status_code == 200 and r.json()["rank"] == n
                    if whole:
                        ready = time.perf_counter() - t0
                        cpu, rss = cpu_s(server.pid), peak_rss_mb(server.pid)
                        return healthy, ready, cpu, rss
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.02)
    finally:
        server.stop()


def reference_start(argv: list[str]) -> tuple[float, float, float]:
    """Seconds from spawn to exit, its CPU seconds, and its peak RSS in MB."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    took = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"the reference failed with {p.returncode}")
    assert p.stdout is not None
    p.stdout.close()
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--players", type=int, default=1_000_000)
    p.add_argument("--boards", type=int, choices=sorted(BOARDS), default=1)
    p.add_argument("--profiles", action="store_true", help="a profile for every player")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "podium-bench-start")
    p.add_argument("--fresh", action="store_true", help="make the store again")
    p.add_argument("--py-spy", type=Path, help="one more podium start under py-spy record")
    args = p.parse_args()
    install_sigterm()
    print(machine_line())
    print(code_line())
    args.dir.mkdir(parents=True, exist_ok=True)
    cfg = make_store(args.dir, args.players, args.boards, args.profiles, args.fresh)
    print(
        f"store: {args.players:,} players on {args.boards} board(s)"
        f"{' with profiles' if args.profiles else ''}; {args.rounds} rounds, alternating",
        flush=True,
    )
    last = last_in_order(cfg)
    ref_argv = reference_args(cfg, args.profiles)
    health: list[float] = []
    ready: list[float] = []
    cpu: list[float] = []
    rss: list[float] = []
    ref: list[float] = []
    ref_cpu: list[float] = []
    ref_rss: list[float] = []
    with tempfile.TemporaryDirectory(prefix="podium-bench-start-") as tmp:
        for i in range(args.rounds):
            order = ("podium", "reference") if i % 2 == 0 else ("reference", "podium")
            for who in order:
                if who == "podium":
                    h, r, c, m = asyncio.run(podium_start(cfg, Path(tmp), last, args.players))
                    health.append(h)
                    ready.append(r)
                    cpu.append(c)
                    rss.append(m)
                    print(
                        f"round {i + 1} podium: /healthz {h:.2f} s, whole {r:.2f} s, "
                        f"CPU {c:.2f} s, {m:.0f} MB",
                        flush=True,
                    )
                else:
                    t, c, m = reference_start(ref_argv)
                    ref.append(t)
                    ref_cpu.append(c)
                    ref_rss.append(m)
                    print(
                        f"round {i + 1} reference: {t:.2f} s, CPU {c:.2f} s, {m:.0f} MB", flush=True
                    )
        print(
            f"median: podium /healthz {med(health):.2f} s, whole {med(ready):.2f} s, "
            f"CPU {med(cpu):.2f} s, peak {med(rss):.0f} MB | reference {med(ref):.2f} s, "
            f"CPU {med(ref_cpu):.2f} s, peak {med(ref_rss):.0f} MB"
        )
        print(
            f"ratio podium / reference: wall {med(ready) / med(ref):.2f}x, "
            f"CPU {med(cpu) / med(ref_cpu):.2f}x, peak RSS {med(rss) / med(ref_rss):.2f}x"
        )
        if args.py_spy is not None:
            asyncio.run(podium_start(cfg, Path(tmp), last, args.players, spy=args.py_spy))
            print(f"py-spy profile of one start: {args.py_spy}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
