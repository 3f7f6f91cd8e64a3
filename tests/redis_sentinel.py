"""A private Redis primary with its replicas and Sentinels watching it, for tests that kill
the primary and let Sentinel promote a replica: ``redis-server`` nodes (``redis_server.py``)
and ``redis-server --sentinel`` processes (the binary Debian also installs as
``redis-sentinel``), each Sentinel with a ``sentinel.conf`` of its own (a Sentinel rewrites
its file as it learns the others), on free loopback ports, stopped and removed afterwards.

The primary is thought down after ``DOWN_AFTER_MS`` without an answer, so a promotion takes
a few seconds; the machine's shared Redis is never watched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.ports import free_ports
from tests.redis_cluster import REDIS_CLI, REDIS_SERVER, cli
from tests.redis_server import RedisServer, start_server

SERVICE = "podium"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
START_TIMEOUT_S = 30.0


@dataclass
class Sentinels:
    """A primary, its replicas, and the Sentinels watching them under ``SERVICE``."""

    primary: RedisServer
    replicas: list[RedisServer]
    ports: list[int]  # the Sentinels'
    root: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    address: str = "127.0.0.1"  # the Sentinels'

    def url(self, query: str = "") -> str:
        """``redis+sentinel://`` with every Sentinel, as a deployment lists them."""
        hosts = ",".join(f"{self.address}:{p}" for p in self.ports)
        return f"redis+sentinel://{hosts}/{SERVICE}" + (f"?{query}" if query else "")

    @property
    def nodes(self) -> list[RedisServer]:
        return [self.primary, *self.replicas]

    def master_port(self, sentinel: int) -> int | None:
        """The primary's port as one Sentinel names it now."""
        out = cli(
            sentinel, "sentinel", "get-master-addr-by-name", SERVICE, host=self.address
        ).split()
        return int(out[1]) if len(out) == 2 else None

    def wait_promoted(self, away_from: int, timeout_s: float = 60.0) -> RedisServer:
        """Until every Sentinel names a node other than ``away_from`` as the primary, and
        that node says it is one; that node."""
        deadline = time.monotonic() + timeout_s
        while True:
            named = {self.master_port(p) for p in self.ports}
            if len(named) == 1 and (port := named.pop()) not in (None, away_from):
                node = next(n for n in self.nodes if n.port == port)
                if "role:master" in node.cli("info", "replication"):
                    return node
            if time.monotonic() > deadline:
                raise AssertionError(f"Sentinel promoted no replica in time: {named}")
            time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _sentinel_conf(port: int, root: str, primary: RedisServer, quorum: int, address: str) -> str:
    path = os.path.join(root, f"sentinel-{port}.conf")
    with open(path, "w") as f:
        f.write(
            f"port {port}\nbind {address}\nprotected-mode no\ndir {root}\n"
            f"sentinel monitor {SERVICE} {primary.host} {primary.port} {quorum}\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
    return path


Place = tuple[Sequence[str], str]  # what a process runs under, and the address it binds


def start_sentinels(
    replicas: int = 1,
    sentinels: int = 3,
    *,
    nodes: Sequence[Place] = (),
    watchers: Place = ((), "127.0.0.1"),
) -> Sentinels:
    """A primary with ``replicas`` replicas (writable, so that a test can take from one what
    a lagging replica lacks) and ``sentinels`` Sentinels (quorum: a majority of them),
    returned once every Sentinel sees every replica and every other Sentinel. ``nodes``:
    where the primary and each replica run (on hosts of a test's own net), in that order;
    ``watchers``: where the Sentinels do (loopback by default)."""
    if REDIS_SERVER is None or REDIS_CLI is None:
        raise FileNotFoundError("redis-server and redis-cli are needed for a private Sentinel")
    places = list(nodes) or [((), "127.0.0.1")] * (1 + replicas)
    primary = start_server(wrap=places[0][0], address=places[0][1])
    root = tempfile.mkdtemp(prefix="podium-sentinel-")
    wrap, address = watchers
    out = Sentinels(primary, [], free_ports(sentinels), root, address=address)
    try:
        out.replicas = [
            start_server(replica_of=primary, wrap=w, address=a) for w, a in places[1 : 1 + replicas]
        ]
        quorum = sentinels // 2 + 1
        for port in out.ports:
            conf = _sentinel_conf(port, root, primary, quorum, address)
            log = open(os.path.join(root, f"sentinel-{port}.log"), "wb")  # noqa: SIM115
            out.procs.append(
                subprocess.Popen(
                    [*wrap, REDIS_SERVER, conf, "--sentinel"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(_sees_all(p, replicas, sentinels - 1, address) for p in out.ports):
            if time.monotonic() > deadline:
                raise RuntimeError("the Sentinels did not find each other and the replicas")
            time.sleep(0.1)
    except BaseException:
        out.stop()
        raise
    return out


def _sees_all(port: int, replicas: int, others: int, address: str = "127.0.0.1") -> bool:
    try:
        fields = cli(port, "sentinel", "master", SERVICE, host=address).split()
    except subprocess.SubprocessError:
        return False
    state = dict(zip(fields[::2], fields[1::2], strict=False))
    return (
        state.get("flags") == "master"
        and int(state.get("num-slaves", 0)) >= replicas
        and int(state.get("num-other-sentinels", 0)) >= others
    )
