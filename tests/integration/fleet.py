"""Real podium processes for the fleet test: each started with ``sys.executable -m podium``,
its output in a file of its own (printed when the test fails), and every one stopped at the
end, whatever happened."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

START_S = 45.0  # a process's start, on a small machine that is starting seven others


@dataclass
class Proc:
    name: str
    args: tuple[str, ...]
    log: Path
    popen: subprocess.Popen[bytes]
    port: int | None = None
    wrap: tuple[str, ...] = ()  # what it runs under (``ip netns exec NS``: a host of its own)
    host: str = "127.0.0.1"  # where its HTTP answers


@dataclass
class Fleet:
    cfg: Path
    tmp: Path
    procs: dict[str, Proc] = field(default_factory=dict)
    _logs: list[Path] = field(default_factory=list)

    def podium(self, *args: str) -> str:
        """A one-shot command (migrate, keys create); its standard output."""
        r = subprocess.run(
            [sys.executable, "-m", "podium", *args, "--config", str(self.cfg)],
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, f"podium {' '.join(args)}: {r.stdout}{r.stderr}"
        return r.stdout

    def start(
        self,
        name: str,
        *args: str,
        port: int | None = None,
        wrap: Sequence[str] = (),
        host: str = "127.0.0.1",
    ) -> Proc:
        """Start (or start again, under the same name) one long-running process; with
        ``wrap``, under it (on a host of a test's own net, answering at ``host``)."""
        argv = [*wrap, sys.executable, "-m", "podium", *args, "--config", str(self.cfg)]
        if port is not None:
            argv += ["--port", str(port)]
        log = self.tmp / f"{name}-{len(self._logs)}.log"
        self._logs.append(log)
        out = open(log, "wb")  # noqa: SIM115 - the child holds it; closed when we exit
        popen = subprocess.Popen(argv, cwd=self.tmp, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        proc = Proc(name, args, log, popen, port, tuple(wrap), host)
        self.procs[name] = proc
        return proc

    def kill9(self, name: str) -> None:
        proc = self.procs[name]
        proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait(10)

    def restart(self, name: str) -> Proc:
        old = self.procs[name]
        assert old.popen.poll() is not None, f"{name} is still running"
        return self.start(name, *old.args, port=old.port, wrap=old.wrap, host=old.host)

    async def api_ready(self, name: str, timeout: float = START_S) -> None:
        proc = self.procs[name]
        deadline = time.monotonic() + timeout
        last = "no answer"
        async with httpx.AsyncClient(base_url=f"http://{proc.host}:{proc.port}", timeout=2) as c:
            while time.monotonic() < deadline:
                assert proc.popen.poll() is None, f"{name} exited during start"
                try:
                    got = await c.get("/readyz")
                    if got.status_code == 200:
                        return
                    last = f"{got.status_code} {got.text[:300]}"
                except httpx.TransportError as e:
                    last = repr(e)
                await asyncio.sleep(0.1)
        raise AssertionError(f"{name} did not become ready: {last}")

    async def worker_ready(self, name: str, timeout: float = START_S) -> None:
        """Workers have no HTTP: ready once they log that their roles run."""
        proc = self.procs[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert proc.popen.poll() is None, f"{name} exited during start"
            if b"worker running roles" in proc.log.read_bytes():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name} did not start its roles")

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.popen.wait(15)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(5)

    def dump(self) -> None:
        """Every process's output, for a failed run (pytest shows what a failed test printed)."""
        for log in self._logs:
            text = log.read_text(errors="replace") if log.exists() else "(no output)"
            print(f"===== {log.name} =====\n{text[-6000:]}")
