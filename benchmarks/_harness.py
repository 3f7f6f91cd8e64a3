"""Shared plumbing for the benchmarks: environments, servers, load loops, statistics.

Every resource made here (temporary directory, Postgres database, Redis keys, child
processes) is registered on a ``contextlib.ExitStack`` that the calling script closes in a
``finally``, so an error, Ctrl-C or SIGTERM still removes them. The machine's Postgres and
Redis are shared: we create a database of our own and a key prefix of our own, and never
flush or reconfigure anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import random
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlparse

import httpx
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
PG_ADMIN_URL = os.environ.get(
    "PODIUM_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("PODIUM_BENCH_REDIS", "redis://127.0.0.1:6379/0")
NATS_URL = os.environ.get("PODIUM_BENCH_NATS", "nats://127.0.0.1:4222")
CLK_TCK = os.sysconf("SC_CLK_TCK")
CONFIGS = ("embedded", "production")
PG_DB: dict[str, str | None] = {"name": None}  # our database, once make_env created it


# -- process lifetime ---------------------------------------------------------------------


def install_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt so that every ``finally`` runs on a kill."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop when it is installed (it is, as a uvicorn extra)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: the child gets SIGTERM if this process dies without cleaning up.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A child HTTP server (podium or the bare reference) on 127.0.0.1."""

    name: str
    argv: list[str]
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None  # added to this process's environment

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, env: dict[str, str] | None = None) -> None:
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # Ctrl-C reaches us, and we stop it in order
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def stop(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown (runs the lifespan exit)
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
        self.keep_log_if_errors()

    def keep_log_if_errors(self) -> None:
        """The temporary directory goes away; a log with errors in it is worth keeping."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return
        if "Traceback" in text or " ERROR " in text or " WARNING " in text:
            keep = Path(tempfile.gettempdir()) / "podium-bench-logs"
            keep.mkdir(exist_ok=True)
            dest = keep / f"{self.name}-{time.strftime('%Y%m%dT%H%M%S')}-{self.pid}.log"
            shutil.copyfile(self.log_path, dest)
            print(f"[cleanup] {self.name} logged errors or warnings; kept {dest}", file=sys.stderr)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def wait_ready(self, path: str = "/healthz", wait_s: float = 120.0) -> float:
        """Poll until the server answers; returns the seconds it took."""
        t0 = time.perf_counter()
        async with httpx.AsyncClient(base_url=self.url, timeout=2.0) as client:
            while True:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited at start:\n{self.log_tail()}")
                try:
                    r = await client.get(path)
                    if r.status_code == 200:
                        return time.perf_counter() - t0
                except httpx.TransportError:
                    pass
                if time.perf_counter() - t0 > wait_s:
                    raise RuntimeError(f"{self.name} not ready after {wait_s}s:\n{self.log_tail()}")
                await asyncio.sleep(0.1)


def start_server(stack: contextlib.ExitStack, server: Server) -> Server:
    server.start(server.env)
    stack.callback(server.stop)
    return server


def podium_server(
    stack: contextlib.ExitStack,
    env: Env,
    profile: Path | None = None,
    processes: int = 0,
    api: str = "all",
) -> Server:
    """``podium serve`` with every role in one process, or (``processes`` > 0) with that many
    API processes and one of roles; with ``profile`` under cProfile, the stats written to
    that file when it stops (the timings are then not representative). ``api`` "read": a
    process for reads only, without the background roles; "write": for writes only, with
    them (``server.api``)."""
    port = free_port()
    argv = [sys.executable]
    if profile is not None:
        argv += ["-m", "cProfile", "-o", str(profile)]
    argv += ["-m", "podium", "serve", "--config", str(env.config_path), "--port", str(port)]
    if processes > 0:
        argv += ["--processes", str(processes)]
    if api == "read":
        argv += ["--no-workers"]
    name = "podium" if api == "all" else f"podium-{api}"
    log = env.tmp / f"{name}-serve.log"
    server = Server(name, argv, port, log, env={"PODIUM_SERVER_API": api})
    return start_server(stack, server)


def bare_server(stack: contextlib.ExitStack, env: Env) -> Server:
    port = free_port()
    argv = [sys.executable, str(HERE / "_bare_app.py"), "--port", str(port)]
    return start_server(stack, Server("bare", argv, port, env.tmp / "bare.log"))


# -- environments -------------------------------------------------------------------------


@dataclass
class Env:
    """One configuration: its TOML file and the resources it owns."""

    kind: str
    tmp: Path
    config_path: Path
    store_url: str
    index_url: str
    prefix: str | None = None
    pg_db: str | None = None
    key: str = ""

    def redis_board_key(self, board: str, window: str) -> str:
        from podium.index.redis.keys import Keys
        from podium.ports import BoardKey

        assert self.prefix is not None
        return Keys(self.prefix).board(BoardKey(board, window))


def make_env(stack: contextlib.ExitStack, kind: str) -> Env:
    if kind not in CONFIGS:
        raise SystemExit(f"--config must be one of {', '.join(CONFIGS)}")
    tmp = Path(tempfile.mkdtemp(prefix=f"podium-bench-{kind}-"))
    stack.callback(shutil.rmtree, tmp, True)
    token = secrets.token_hex(4)
    if kind == "embedded":
        env = Env(kind, tmp, tmp / "podium.toml", f"sqlite:///{tmp}/podium.db", "memory://")
    else:
        db = f"podium_bench_{token}"
        asyncio.run(_pg_admin(f'CREATE DATABASE "{db}"'))
        PG_DB["name"] = db
        stack.callback(drop_database, db)
        prefix = f"podium-bench-{token}"
        stack.callback(delete_redis_keys, prefix)
        store_url = urlparse(PG_ADMIN_URL)._replace(path=f"/{db}").geturl()
        env = Env(kind, tmp, tmp / "podium.toml", store_url, REDIS_URL, prefix, db)
    env.config_path.write_text(config_toml(env))
    return env


def config_toml(env: Env) -> str:
    lines = [
        "[server]",
        "read_rate_per_s = 0  # the read limiter off: we measure the service, not the limiter",
        "[store]",
        f'url = "{env.store_url}"',
        "[index]",
        f'url = "{env.index_url}"',
    ]
    if env.prefix:
        lines.append(f'prefix = "{env.prefix}"')
    return "\n".join(lines) + "\n"


async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def delete_stream(name: str) -> None:
    """A benchmark's JetStream stream, and the relays' lease bucket beside it if a relay
    made one."""
    import nats
    import nats.js.errors

    nc = await nats.connect(NATS_URL)
    try:
        js = nc.jetstream()
        for delete in (js.delete_stream(name), js.delete_key_value(f"{name}-relays")):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await delete
    finally:
        await nc.close()


async def migrate_store(url: str) -> None:
    """The store at ``url`` migrated to this tree's schema, by podium's own migrations (its
    imports here, so that a script's parent process that only seeds and measures does not
    load podium)."""
    from podium import bootstrap
    from podium.config.settings import parse

    b = bootstrap.build(parse({"store": {"url": url}}))
    try:
        await b.store.migrate()
    finally:
        await b.close()


def drop_database(db: str) -> None:
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
    print(f"[cleanup] dropped database {db}", file=sys.stderr)


def delete_redis_keys(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    n = 0
    try:
        batch: list[bytes] = []
        # UNLINK, not DEL: a board of millions of members freed by DEL holds the server (and
        # this call) past the client's timeout; UNLINK frees it in the background.
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                n += int(client.unlink(*batch))
                batch = []
        if batch:
            n += int(client.unlink(*batch))
    finally:
        client.close()
    print(f"[cleanup] deleted {n} redis keys under {prefix}:", file=sys.stderr)


# The ops key ``scrape`` reads /metrics with (an ops key is the only one /metrics takes).
OPS_KEY: dict[str, str] = {}


def _cli_key(env: Env, name: str, *scope: str) -> str:
    out = subprocess.run(
        [
            *(sys.executable, "-m", "podium", "keys", "create", "--name", name, *scope),
            *("--config", str(env.config_path)),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


def create_key(env: Env) -> str:
    """A game-server key through the CLI, as an operator would (the key is the last line),
    and an ops key for the scrapes of /metrics."""
    env.key = _cli_key(env, "bench", "--modes", "default")
    try:
        OPS_KEY["key"] = _cli_key(env, "bench-ops", "--ops")
    except subprocess.CalledProcessError:
        # A revision from before the ops scope (pinned with PYTHONPATH): /metrics was open.
        OPS_KEY.pop("key", None)
    return env.key


# -- statistics ---------------------------------------------------------------------------


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary(values: Iterable[float]) -> dict[str, float]:
    v = sorted(values)
    return {
        "n": len(v),
        "p50": quantile(v, 0.50),
        "p90": quantile(v, 0.90),
        "p99": quantile(v, 0.99),
        "max": v[-1] if v else float("nan"),
    }


def ms(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:  # None or NaN
        return "-"
    return f"{seconds * 1000:.1f}"


def med_spread(values: Sequence[float]) -> str:
    """'median [min-max]' of repeated runs, in ms."""
    vals = [v for v in values if v == v]
    if not vals:
        return "-"
    if len(vals) == 1:
        return ms(vals[0])
    return f"{ms(statistics.median(vals))} [{ms(min(vals))}-{ms(max(vals))}]"


def num_spread(values: Sequence[float], fmt: str = "{:.0f}") -> str:
    vals = [v for v in values if v == v]
    if not vals:
        return "-"
    if len(vals) == 1:
        return fmt.format(vals[0])
    return (
        f"{fmt.format(statistics.median(vals))} [{fmt.format(min(vals))}-{fmt.format(max(vals))}]"
    )


def col(runs: Sequence[dict[str, Any]], *path: str) -> list[float]:
    """One figure of every run, found by its keys (``col(runs, "podium", "p99")``); NaN where
    a run lacks it, so the spreads above leave it out."""
    out = []
    for x in runs:
        v: Any = x
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        out.append(float("nan") if v is None else float(v))
    return out


def save_json(args: Any, **figures: Any) -> None:
    """``--json FILE``: the arguments and the figures of a run, for comparing runs later."""
    if args.json:
        meta = {k: str(v) for k, v in vars(args).items()}
        args.json.write_text(json.dumps({"args": meta, **figures}, indent=1))


# -- Prometheus ---------------------------------------------------------------------------


@dataclass
class Hist:
    buckets: list[tuple[float, float]]  # (upper bound, cumulative count), +Inf last
    count: float
    total: float

    def __sub__(self, other: Hist) -> Hist:
        before = dict(other.buckets)
        return Hist(
            [(le, c - before.get(le, 0.0)) for le, c in self.buckets],
            self.count - other.count,
            self.total - other.total,
        )

    def quantile(self, q: float) -> float | None:
        """Prometheus' histogram_quantile: linear interpolation inside the bucket that holds
        the rank. Past the last finite bound it answers that bound (a floor, not a value)."""
        if self.count <= 0:
            return None
        rank = q * self.count
        lower, prev = 0.0, 0.0
        for le, cum in self.buckets:
            if cum >= rank:
                if le == float("inf"):
                    return lower
                inside = cum - prev
                return lower + (le - lower) * ((rank - prev) / inside if inside else 0.0)
            lower, prev = le, cum
        return lower

    def over(self, bound: float) -> float:
        """Share of observations above ``bound`` (which must be a bucket bound)."""
        if self.count <= 0:
            return float("nan")
        cum = dict(self.buckets).get(bound)
        return float("nan") if cum is None else 1.0 - cum / self.count


def histogram(text: str, name: str, **labels: str) -> Hist:
    for fam in text_string_to_metric_families(text):
        if fam.name != name:
            continue
        buckets: list[tuple[float, float]] = []
        count = total = 0.0
        for s in fam.samples:
            extra = {k: v for k, v in s.labels.items() if k != "le"}
            if any(extra.get(k) != v for k, v in labels.items()):
                continue
            if s.name.endswith("_bucket"):
                buckets.append((float(s.labels["le"]), float(s.value)))
            elif s.name.endswith("_count"):
                count = float(s.value)
            elif s.name.endswith("_sum"):
                total = float(s.value)
        buckets.sort()
        return Hist(buckets, count, total)
    return Hist([], 0.0, 0.0)


def sample(text: str, name: str, **labels: str) -> float:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


async def scrape(client: RawHttp | HttpxClient) -> str:
    key = OPS_KEY.get("key")
    r = await client.get("/metrics", headers={"Authorization": f"Bearer {key}"} if key else None)
    if r.status_code != 200:
        raise RuntimeError(f"/metrics answered {r.status_code}")
    return r.text


# -- CPU accounting -----------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cpu(fields: list[str]) -> float:
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_cpu(pid: int) -> float:
    fields = _stat(pid)
    return 0.0 if fields is None else _cpu(fields)


def _pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


def _cpu_of_session(sid: int) -> dict[int, float]:
    """CPU seconds of each live process in session ``sid``: a server and every process it
    started (``podium serve --processes N`` runs N API processes and one of roles)."""
    out: dict[int, float] = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None and int(fields[3]) == sid:
            out[pid] = _cpu(fields)
    return out


def _cpu_by_comm(names: tuple[str, ...], contains: str | None = None) -> dict[int, float]:
    """CPU seconds of each live process whose name starts with one of ``names`` (and whose
    command line contains ``contains``, e.g. our database in a Postgres backend's title)."""
    out: dict[int, float] = {}
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/comm") as f:
                if not f.read().strip().startswith(names):
                    continue
            if contains is not None:
                with open(f"/proc/{pid}/cmdline", "rb") as fb:
                    if contains.encode() not in fb.read():
                        continue
        except OSError:
            continue
        out[pid] = proc_cpu(pid)
    return out


def _machine() -> tuple[float, float, float]:
    """(busy, total, stolen) jiffies of the whole machine since boot. Stolen: time the
    hypervisor gave our virtual cores to someone else (counted as busy too)."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    steal = parts[7] if len(parts) > 7 else 0
    return float(sum(parts) - idle), float(sum(parts)), float(steal)


@dataclass
class CpuMeter:
    """Cores used by each party over a window (1.0 = one full core). Per process: a process
    that exits inside the window loses its share (it is not seen at the end), none counts
    twice. "postgres" is every Postgres process on the machine (other users' too), "pg ours"
    the backends serving ``pg_db``; "nats" every NATS server on the machine; "others" is the
    rest of the machine's busy time."""

    pids: dict[str, int]
    pg_db: str | None = None
    start: dict[str, dict[int, float]] = field(default_factory=dict)
    t0: float = 0.0
    wall: float = 0.0
    _m0: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def _now(self) -> dict[str, dict[int, float]]:
        # Servers start in a session of their own (Server.start), children included.
        out = {name: _cpu_of_session(pid) for name, pid in self.pids.items()}
        out["generator"] = {0: time.process_time()}
        out["postgres"] = _cpu_by_comm(("postgres",))
        if self.pg_db:
            out["pg ours"] = _cpu_by_comm(("postgres",), self.pg_db)
        out["redis"] = _cpu_by_comm(("redis-server",))
        out["nats"] = _cpu_by_comm(("nats-server",))
        return out

    def begin(self) -> None:
        self.start = self._now()
        self._m0 = _machine()
        self.t0 = time.perf_counter()

    def end(self) -> dict[str, float]:
        end = self._now()
        busy1, total1, steal1 = _machine()
        wall = time.perf_counter() - self.t0
        self.wall = wall
        out: dict[str, float] = {}
        for k, procs in end.items():
            before = self.start.get(k, {})
            out[k] = sum(v - before.get(pid, 0.0) for pid, v in procs.items()) / wall
        total = total1 - self._m0[1]
        busy = (busy1 - self._m0[0]) / total if total else 0.0
        ncpu = os.cpu_count() or 1
        ours = sum(v for k, v in out.items() if k != "pg ours")
        out["others"] = max(0.0, busy * ncpu - ours)
        out["machine_busy"] = busy
        out["machine_steal"] = (steal1 - self._m0[2]) / total if total else 0.0
        return out


async def wait_quiet(threshold: float, max_wait_s: float) -> float:
    """Wait (up to ``max_wait_s``) for a second in which the machine is less than
    ``threshold`` busy, so that runs start while other users' jobs are quiet. Returns the
    busy fraction of the last second sampled; 0 ``threshold`` does not wait at all."""
    if threshold <= 0:
        return float("nan")
    t0 = time.perf_counter()
    while True:
        b0, a0, _ = _machine()
        await asyncio.sleep(1.0)
        b1, a1, _ = _machine()
        busy = (b1 - b0) / (a1 - a0) if a1 > a0 else 0.0
        if busy < threshold or time.perf_counter() - t0 > max_wait_s:
            return busy


def cpu_line(cpu: dict[str, float]) -> str:
    parts = [f"{k} {v:.2f}" for k, v in cpu.items() if not k.startswith("machine_") and v >= 0.005]
    busy, steal = cpu.get("machine_busy", 0), cpu.get("machine_steal", 0)
    return (
        f"cores used: {', '.join(parts)}; machine busy {busy:.0%} of {os.cpu_count()} cores "
        f"(stolen by the hypervisor: {steal:.0%})"
    )


# -- load loops ---------------------------------------------------------------------------


@dataclass
class Req:
    intended: float  # when the open loop meant to send it (loop clock)
    started: float  # when the request task actually began
    done: float = 0.0
    status: str = ""


@dataclass
class OpenLoopResult:
    reqs: list[Req]
    rate: float
    duration: float

    def ok(self) -> list[Req]:
        return [r for r in self.reqs if r.status == "200"]

    def report(self) -> dict[str, Any]:
        reqs = self.reqs
        starts = sorted(r.started for r in reqs)
        span = (starts[-1] - starts[0]) if len(starts) > 1 else float("nan")
        achieved = (len(starts) - 1) / span if span and span == span else float("nan")
        ok = self.ok()
        span = (max(r.done for r in ok) - min(r.started for r in ok)) if len(ok) > 1 else 0.0
        return {
            "intended_rate": self.rate,
            "sent": len(reqs),
            "achieved_rate": achieved,
            "ok": len(ok),
            # answered per second, from the first send to the last answer: what the server
            # kept up with, whatever the generator's schedule was
            "throughput": (len(ok) / span) if span > 0 else float("nan"),
            "statuses": dict(Counter(r.status for r in reqs)),
            "latency": summary(r.done - r.started for r in self.ok()),
            "latency_from_intended": summary(r.done - r.intended for r in self.ok()),
            "lag": summary(r.started - r.intended for r in reqs),
        }


async def open_loop(
    rate: float,
    duration: float,
    fire: Callable[[int, Req], Awaitable[str]],
    *,
    drain_s: float = 30.0,
    stop: asyncio.Event | None = None,
) -> OpenLoopResult:
    """Start request ``i`` at ``t0 + i / rate`` whatever the earlier ones are doing (no
    coordinated omission): a slow server makes requests pile up, not the rate drop.

    ``fire(i, req)`` performs the request and returns its status as text; the loop stamps
    ``started`` and ``done``. Requests still in flight at the end get ``drain_s`` to finish.
    With ``stop``, it also ends (early) when that event is set.
    """
    clock = time.perf_counter  # uvloop's loop clock only ticks in whole milliseconds
    n = int(rate * duration)
    interval = 1.0 / rate
    t0 = clock() + 0.02
    reqs: list[Req] = []
    tasks: set[asyncio.Task[None]] = set()

    async def one(i: int, req: Req) -> None:
        req.started = clock()
        try:
            req.status = await fire(i, req)
        except Exception as e:  # a transport error is a result too
            req.status = type(e).__name__
        req.done = clock()

    i = 0
    while i < n and not (stop is not None and stop.is_set()):
        now = clock()
        due = min(n, int((now - t0) / interval) + 1) if now >= t0 else 0
        while i < due:
            req = Req(intended=t0 + i * interval, started=0.0)
            reqs.append(req)
            task = asyncio.create_task(one(i, req))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            i += 1
        await asyncio.sleep(max(0.0, t0 + i * interval - clock()))
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=drain_s)
        for t in pending:
            t.cancel()
        for r in reqs:
            if not r.status:
                r.status = "unfinished"
    if stop is not None:
        duration = min(duration, i / rate)
    return OpenLoopResult(reqs, rate, duration)


@dataclass
class ClosedLoopResult:
    latencies: list[float]
    statuses: Counter[str]
    wall: float

    def report(self) -> dict[str, Any]:
        return {
            "ops": len(self.latencies),
            "rate": len(self.latencies) / self.wall if self.wall else float("nan"),
            "statuses": dict(self.statuses),
            "latency": summary(self.latencies),
        }


async def closed_loop(
    concurrency: int, duration: float, op: Callable[[], Awaitable[str]]
) -> ClosedLoopResult:
    """``concurrency`` workers each issuing ``op`` back to back for ``duration`` seconds.
    Only successful operations ("200"/"ok") count toward the latencies and the rate."""
    clock = time.perf_counter
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    t0 = clock()
    deadline = t0 + duration

    async def worker() -> None:
        while clock() < deadline:
            s = clock()
            try:
                status = await op()
            except Exception as e:
                status = type(e).__name__
            statuses[status] += 1
            if status in ("200", "ok"):
                latencies.append(clock() - s)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ClosedLoopResult(latencies, statuses, clock() - t0)


@dataclass
class Resp:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode()

    def json(self) -> Any:
        return json.loads(self.content)


class RawHttp:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams, for the load generator.

    httpx costs about a millisecond of CPU per request here, so on two shared cores the
    generator would take as much CPU as the server it measures; this costs a fraction of
    that. At most ``connections`` requests are in flight; the others wait for a connection
    (as they would in httpx's pool). Answers must carry Content-Length (uvicorn's do).
    """

    def __init__(self, base_url: str, connections: int, timeout_s: float = 30.0) -> None:
        u = urlparse(base_url)
        self._host = u.hostname or "127.0.0.1"
        self._port = u.port or 80
        self._hosthdr = f"Host: {self._host}:{self._port}\r\n".encode()
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._slots = asyncio.Semaphore(connections)
        self._timeout = timeout_s

    async def __aenter__(self) -> RawHttp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, w in idle:
            w.close()

    async def get(
        self, path: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Resp:
        if params:
            path += ("&" if "?" in path else "?") + urlencode(params)
        return await self.request("GET", path, headers=headers)

    async def post(self, path: str, content: bytes, headers: dict[str, str]) -> Resp:
        return await self.request("POST", path, content, headers)

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> Resp:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = f"{method} {path} HTTP/1.1\r\n".encode() + self._hosthdr
        head += f"{extra}Content-Length: {len(body)}\r\n\r\n".encode()
        async with self._slots:
            while True:
                reused = bool(self._idle)
                if reused:
                    reader, writer = self._idle.pop()
                else:
                    reader, writer = await asyncio.open_connection(self._host, self._port)
                try:
                    writer.write(head + body)
                    async with asyncio.timeout(self._timeout):
                        raw = await reader.readuntil(b"\r\n\r\n")
                        status = int(raw[9:12])
                        lower = raw.lower()
                        i = lower.find(b"\r\ncontent-length:")
                        if i < 0:
                            raise RuntimeError("answer without Content-Length")
                        j = lower.index(b"\r\n", i + 2)
                        content = await reader.readexactly(int(raw[i + 17 : j]))
                except (asyncio.IncompleteReadError, ConnectionError) as e:
                    writer.close()
                    # uvicorn closes a connection idle for 5 s; a kept one may be gone. Nothing
                    # came back, so the request was not read: send it again on a new one.
                    stale = not isinstance(e, asyncio.IncompleteReadError) or not e.partial
                    if reused and stale:
                        continue
                    raise
                except BaseException:
                    writer.close()
                    raise
                if b"\r\nconnection: close" in lower:
                    writer.close()
                else:
                    self._idle.append((reader, writer))
                return Resp(status, content)


class HttpxClient:
    """The same interface over httpx (``--client httpx``), to compare the generators."""

    def __init__(self, base_url: str, connections: int, timeout_s: float = 30.0) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self._c = httpx.AsyncClient(
            base_url=base_url, limits=limits, timeout=httpx.Timeout(timeout_s, pool=timeout_s * 2)
        )

    async def __aenter__(self) -> HttpxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._c.aclose()

    async def get(
        self, path: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Resp:
        r = await self._c.get(path, params=params, headers=headers)
        return Resp(r.status_code, r.content)

    async def post(self, path: str, content: bytes, headers: dict[str, str]) -> Resp:
        r = await self._c.post(path, content=content, headers=headers)
        return Resp(r.status_code, r.content)


CLIENT = {"kind": os.environ.get("PODIUM_BENCH_CLIENT", "raw")}


def http_client(base_url: str, connections: int) -> RawHttp | HttpxClient:
    if CLIENT["kind"] == "httpx":
        return HttpxClient(base_url, connections)
    return RawHttp(base_url, connections)


# -- match bodies -------------------------------------------------------------------------


def rfc3339_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def match_body(
    players: Sequence[str], rng: random.Random, metadata: dict[str, Any] | None = None
) -> bytes:
    """A match of these players, ended now; with ``metadata``, each result carries it."""
    # 1..1000: every result moves the total, so every one reaches the board
    results: list[dict[str, Any]] = [
        {"playerId": p, "points": rng.randint(1, 1000)} for p in players
    ]
    if metadata is not None:
        for r in results:
            r["metadata"] = metadata
    return json.dumps(
        {"mode": "default", "endedAt": rfc3339_now(), "durationSeconds": 540, "results": results}
    ).encode()


def player_id(n: int) -> str:
    return f"p_{n:06d}"


def machine_line() -> str:
    load = os.getloadavg()
    return (
        f"machine: {os.cpu_count()} cores (nproc), Python {sys.version.split()[0]}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start"
    )


def code_line() -> str:
    """Which podium is measured: the import path, and its git revision when it is a checkout.
    (Pin a revision with ``git archive REV src | tar -x -C DIR`` and ``PYTHONPATH=DIR/src``.)"""
    import podium

    src = Path(podium.__file__).resolve().parents[1]
    try:
        rev = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        where = f"git {rev}" + (" with uncommitted changes under src/" if dirty else ", clean")
    except (OSError, subprocess.CalledProcessError):
        where = "not a git checkout"
    return f"podium {podium.__version__} from {src} ({where})"


def bench_main(
    args: Any,
    header: str,
    bench: Callable[[Env, contextlib.ExitStack, Any], Coroutine[Any, Any, None]],
) -> None:
    """What every load script's ``main`` does around its own ``bench``: the header lines,
    the environment (server, database, keys) and its cleanup, even on Ctrl-C."""
    CLIENT["kind"] = args.client
    install_sigterm()
    print(machine_line())
    print(code_line())
    print(f"load generator: {args.client} HTTP/1.1 client on asyncio (uvloop), one process")
    print(header, flush=True)
    with contextlib.ExitStack() as stack:
        env = make_env(stack, args.config)
        try:
            run(bench(env, stack, args))
        except KeyboardInterrupt:
            print("interrupted; cleaning up", file=sys.stderr)
            raise


def common_args(p: argparse.ArgumentParser, *, wait_s: int, unit: str) -> None:
    """The options every load script shares: repeats, the client, waiting for a quiet
    machine, profiling, and a JSON copy of the figures."""
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--client", choices=["raw", "httpx"], default="raw", help="load generator")
    p.add_argument(
        "--quiet",
        type=float,
        default=0.0,
        help=f"before each {unit} wait (up to {wait_s} s) for the machine to be less busy than "
        "this fraction (0: do not wait); this machine is shared",
    )
    p.add_argument(
        "--profile",
        type=Path,
        help="run podium under cProfile and write its stats here (timings then inflated)",
    )
    p.add_argument("--json", type=Path, help="also write every figure to this file")
    p.add_argument(
        "--processes",
        type=int,
        default=0,
        help="podium serve --processes N: N API processes and one of background roles "
        "(production only; CPU figures then add up the whole group); 0: one process for all",
    )
