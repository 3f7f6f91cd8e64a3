"""A private ``redis-server`` for tests that break it on purpose (flush it, kill it, promote
its replica): started from the installed binary on a free loopback port, in a temporary
directory, with nothing persisted, and stopped afterwards. The machine's shared Redis is
never touched."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tests.ports import free_ports
from tests.redis_cluster import REDIS_CLI, REDIS_SERVER, cli

START_TIMEOUT_S = 20.0


@dataclass
class RedisServer:
    port: int
    root: str
    proc: subprocess.Popen[bytes]
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def cli(self, *args: str) -> str:
        return cli(self.port, *args, host=self.host)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)


def start_server(
    replica_of: RedisServer | None = None,
    *,
    wrap: Sequence[str] = (),
    address: str = "127.0.0.1",
) -> RedisServer:
    """One node; with ``replica_of``, a replica of it (writable, so that a test can take
    from it what a lagging replica would lack), returned once its link is up. ``wrap``:
    what it runs under (``ip netns exec NS``, on a host of a test's own net), listening on
    ``address``."""
    if REDIS_SERVER is None or REDIS_CLI is None:
        raise FileNotFoundError("redis-server and redis-cli are needed for a private Redis")
    (port,) = free_ports(1)
    root = tempfile.mkdtemp(prefix="podium-redis-")
    args = ["--port", str(port), "--bind", address, "--dir", root, "--save", ""]
    args += ["--appendonly", "no", "--protected-mode", "no", "--repl-diskless-sync-delay", "0"]
    if replica_of is not None:
        args += ["--replicaof", replica_of.host, str(replica_of.port), "--replica-read-only", "no"]
    log = open(f"{root}/redis.log", "wb")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen([*wrap, REDIS_SERVER, *args], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    server = RedisServer(port, root, proc, address)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            info = server.cli("info", "replication")
            if replica_of is None or "master_link_status:up" in info:
                return server
        except subprocess.SubprocessError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"redis-server on {port} did not start")
        time.sleep(0.05)
