"""1,000 concurrent live board streams on one ``podium serve`` process.

Starts a server (SQLite, in-process index) in a subprocess, gives its week board ~200
players, opens N Server-Sent Event streams on ``/v1/boards/week/stream`` from raw sockets
(so the client side stays cheap), and submits a match every 0.2 s so the top page changes
nearly every tick. Over the measured window it reports the server's CPU and RSS, and the
delay from the broadcaster's tick (the ``tickAt`` in every frame, taken before it reads the
page) to each client receiving the frame: the read, the fan-out and the socket together.
The server and the clients share this machine's clock.

    python benchmarks/streams.py                        # 1,000 streams, 30 s
    python benchmarks/streams.py --streams 200 --seconds 10

Linux only: it reads /proc for the server's CPU and memory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

TICK_RE = re.compile(rb'"tickAt":([0-9.]+)\}')
CLK_TCK = os.sysconf("SC_CLK_TCK")


def raise_fd_limit(need: int) -> None:
    """Each stream is a socket at both ends; the server inherits this process's limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, need))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < need:
        sys.exit(f"open-file limit {want} is below the {need} this run needs (ulimit -Hn)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of every CPU since boot: the whole machine, both ends and the
    kernel's loopback work included."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_server(tmp: Path, port: int) -> tuple[subprocess.Popen[bytes], str]:
    cfg = tmp / "podium.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp}/podium.db"\n[server]\nread_rate_per_s = 0\n')
    cli = [sys.executable, "-m", "podium"]
    out = subprocess.run(
        [*cli, "keys", "create", "--name", "bench", "--modes", "default", "--config", str(cfg)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp,
    )
    key = out.stdout.strip().splitlines()[-1]
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [*cli, "serve", "--config", str(cfg), "--port", str(port)],
        cwd=tmp,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, key


@dataclass
class Results:
    delays: list[float] = field(default_factory=list)  # seconds, tick to receipt
    frames: list[int] = field(default_factory=list)  # frames received, per stream
    ticks: set[float] = field(default_factory=set)  # distinct frames seen by anyone
    measuring: bool = False


async def stream(port: int, res: Results, connected: asyncio.Event, stop: asyncio.Event) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    writer.write(
        b"GET /v1/boards/week/stream HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n"
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n", 1)[0], head
    assert b"chunked" in head.lower(), "expected a chunked streaming response"
    connected.set()
    count = 0
    try:
        while not stop.is_set():
            # HTTP/1.1 chunked framing: one chunk per SSE event the server yields.
            size = int((await reader.readline()).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            m = TICK_RE.search(chunk, max(0, size - 40))
            if m and res.measuring:
                now = time.time()
                tick = float(m[1])
                res.delays.append(now - tick)
                res.ticks.add(tick)
                count += 1
    finally:
        res.frames.append(count)
        writer.close()


async def traffic(url: str, key: str, players: int, stop: asyncio.Event) -> int:
    """Matches at 5/s among ``players`` players, so the top 100 keeps changing."""
    rng = random.Random(1)
    sent = 0
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        while not stop.is_set():
            ids = rng.sample(range(players), 4)
            body = {
                "mode": "default",
                "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "durationSeconds": 300,
                "results": [{"playerId": f"b{i:04d}", "points": rng.randint(1, 50)} for i in ids],
            }
            r = await client.post(
                f"/v1/matches/bench-{sent}/results",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            )
            r.raise_for_status()
            sent += 1
            await asyncio.sleep(0.2)
    return sent


async def seed(url: str, key: str, players: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for start in range(0, players, 100):
            body = {
                "mode": "default",
                "endedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "durationSeconds": 300,
                "results": [
                    {"playerId": f"b{i:04d}", "points": 1 + (i * 7919) % 500}
                    for i in range(start, min(players, start + 100))
                ],
            }
            r = await client.post(
                f"/v1/matches/seed-{start}/results",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            )
            r.raise_for_status()


async def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(300):
            if proc.poll() is not None:
                output = await asyncio.to_thread(log.read_text)
                sys.exit(f"the server exited during start:\n{output}")
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    sys.exit("the server did not become ready")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def run(args: argparse.Namespace) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="podium-streams-") as tmp:
        proc, key = start_server(Path(tmp), port)
        try:
            await wait_ready(url, proc, Path(tmp) / "serve.log")
            await seed(url, key, args.players)
            await asyncio.sleep(1)
            idle_rss = rss_mib(proc.pid)

            res = Results()
            stop = asyncio.Event()
            tasks: list[asyncio.Task[None]] = []
            opened = time.monotonic()
            for start in range(0, args.streams, 100):  # in batches: gentle on the accept queue
                batch = [asyncio.Event() for _ in range(start, min(args.streams, start + 100))]
                tasks += [asyncio.create_task(stream(port, res, e, stop)) for e in batch]
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in batch)), 30)
            connect_s = time.monotonic() - opened
            load = asyncio.create_task(traffic(url, key, args.players, stop))
            await asyncio.sleep(3)  # warm up: everyone has had a few frames

            res.measuring = True
            cpu0, t0, client0 = cpu_seconds(proc.pid), time.monotonic(), time.process_time()
            busy0 = machine_busy()
            await asyncio.sleep(args.seconds)
            cpu1, t1, client1 = cpu_seconds(proc.pid), time.monotonic(), time.process_time()
            busy1 = machine_busy()
            res.measuring = False
            busy_rss = rss_mib(proc.pid)

            stop.set()
            matches = await load
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()

    span = t1 - t0
    ms = [d * 1000 for d in res.delays]
    print(f"streams                 {args.streams} (all connected in {connect_s:.1f} s)")
    print(f"measured                {span:.0f} s, {matches} matches submitted in all")
    print(f"frames published        {len(res.ticks)} ({len(res.ticks) / span:.2f}/s)")
    print(f"frames received         {len(ms)} ({len(ms) / span:.0f}/s)")
    median = statistics.median(res.frames)
    print(f"  per stream            median {median:.0f}, min {min(res.frames)}")
    print(f"tick -> client delay    p50 {pct(ms, 0.5):.1f} ms, p99 {pct(ms, 0.99):.1f} ms,")
    print(f"                        max {max(ms):.1f} ms")
    print(f"server CPU              {100 * (cpu1 - cpu0) / span:.0f} % of one core")
    print(f"server RSS              {idle_rss:.0f} MiB idle -> {busy_rss:.0f} MiB with streams")
    print(f"  per stream            {(busy_rss - idle_rss) * 1024 / args.streams:.0f} KiB")
    print(f"client CPU (this)       {100 * (client1 - client0) / span:.0f} % of one core")
    busy = (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1])
    cores = os.cpu_count()
    print(f"machine CPU             {100 * busy:.0f} % busy over all {cores} cores, every process")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--players", type=int, default=200)
    args = p.parse_args()
    raise_fd_limit(2 * args.streams + 256)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
