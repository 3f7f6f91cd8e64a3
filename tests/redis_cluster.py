"""A private Redis Cluster for tests: six ``redis-server`` processes (three primaries, one
replica each) on free loopback ports, in a temporary directory, started the way a user
starts one (``redis-cli --cluster create``) and stopped and removed afterwards. A cluster
may also run on hosts of a test's own net (``tests/netns.py``), a node on each, so that the
links between its nodes can be cut (``start_cluster(places=...)``).

Destructive tests (killing a primary) run here, never on the machine's shared Redis. The
node timeout is short (1 s) so that a replica takes over within a few seconds of its
primary dying; nothing is persisted (no RDB, no AOF).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.ports import free_ports

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
NODE_TIMEOUT_MS = 1000
START_TIMEOUT_S = 20.0
Place = tuple[Sequence[str], str]  # what a node runs under, and the address it binds


def cli(port: int, *args: str, timeout: float = 5.0, host: str = "127.0.0.1") -> str:
    """One ``redis-cli`` command against a node; its output."""
    assert REDIS_CLI is not None
    out = subprocess.run(
        [REDIS_CLI, "-h", host, "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return out.stdout


@dataclass
class RedisCluster:
    """The running cluster: its ports, and its processes by port."""

    ports: list[int]
    root: str
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    options: dict[str, str] = field(default_factory=dict)  # more redis-server options
    # Where each node runs, by port: what it runs under (``ip netns exec NS``) and the
    # address it binds and announces; loopback where not named.
    places: dict[int, Place] = field(default_factory=dict)

    def host(self, port: int) -> str:
        """The address of the node on ``port``."""
        return self.places[port][1] if port in self.places else "127.0.0.1"

    def cli(self, port: int, *args: str, timeout: float = 5.0) -> str:
        """One ``redis-cli`` command against the node on ``port``; its output."""
        return cli(port, *args, timeout=timeout, host=self.host(port))

    @property
    def url(self) -> str:
        """``redis+cluster://`` with every node, as a deployment would list them."""
        return "redis+cluster://" + ",".join(f"{self.host(p)}:{p}" for p in self.ports)

    def alive(self) -> list[int]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def _spawn(self, port: int) -> None:
        assert REDIS_SERVER is not None
        d = os.path.join(self.root, str(port))
        os.makedirs(d, exist_ok=True)
        log = open(os.path.join(d, "redis.log"), "wb")  # noqa: SIM115 - the child keeps it
        wrap, address = self.places.get(port, ((), "127.0.0.1"))
        options = {
            "port": str(port),
            "bind": address,
            "dir": d,
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": str(NODE_TIMEOUT_MS),
            "save": "",
            "appendonly": "no",
            "protected-mode": "no",
            "repl-diskless-sync-delay": "0",  # replicas sync at once, not after 5 s
            # A replica is listed to clients (CLUSTER SLOTS) once its replication offset
            # moved, which on an empty primary only its pings do: every second, not 10.
            "repl-ping-replica-period": "1",
            **self.options,
        }
        args = [a for k, v in options.items() for a in (f"--{k}", v)]
        self.procs[port] = subprocess.Popen(
            [*wrap, REDIS_SERVER, *args], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def start(self) -> None:
        for port in self.ports:
            self._spawn(port)
        for port in self.ports:
            _wait(lambda p=port: self.cli(p, "ping").strip() == "PONG", f"node {port} up")
        assert REDIS_CLI is not None
        nodes = [f"{self.host(p)}:{p}" for p in self.ports]
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *nodes, "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True,
            timeout=START_TIMEOUT_S,
            check=True,
        )
        self.wait_ok()

    def wait_ok(self, timeout: float = START_TIMEOUT_S, replicas: bool = True) -> None:
        """Until every live node says ``cluster_state:ok`` with every slot served, and every
        live replica has its link to its primary up (so that reads from replicas see data)."""

        def ok() -> bool:
            for port in self.alive():
                info = self.cli(port, "cluster", "info")
                if "cluster_state:ok" not in info or "cluster_slots_assigned:16384" not in info:
                    return False
                replication = self.cli(port, "info", "replication")
                if "role:slave" in replication and "master_link_status:up" not in replication:
                    return False
                # every slot range with its replica, as a client learns them (CLUSTER SLOTS
                # leaves out a replica until its primary knows it synced)
                slots = [line for line in self.cli(port, "cluster", "slots").splitlines() if line]
                if replicas and len(slots) < 3 * (2 + 3 * 2):
                    return False
            return True

        _wait(ok, "cluster state ok", timeout)

    def primaries(self) -> list[int]:
        """The ports of the live primaries, as a live node sees them."""
        out = self.cli(self.alive()[0], "cluster", "nodes")
        found = []
        for line in out.splitlines():
            parts = line.split()
            flags = parts[2].split(",")
            if "master" in flags and "fail" not in flags and "fail?" not in flags:
                found.append(int(parts[1].split("@")[0].rsplit(":", 1)[1]))
        return sorted(found)

    def kill(self, port: int) -> None:
        """Kill one node at once (SIGKILL: a crash, no goodbye to the cluster)."""
        proc = self.procs[port]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=5)

    def restart(self, port: int) -> None:
        """Bring a killed node back (it rejoins from its nodes.conf, as a replica if its
        replica took over)."""
        self._spawn(port)
        _wait(lambda: self.cli(port, "ping").strip() == "PONG", f"node {port} up")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        shutil.rmtree(self.root, ignore_errors=True)


def _wait(check: object, what: str, timeout: float = START_TIMEOUT_S) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            if check():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis cluster: timed out waiting for {what}")
        time.sleep(0.05)


def start_cluster(places: Sequence[Place] = (), **options: str) -> RedisCluster:
    """Start a cluster of six nodes; the caller stops it (``RedisCluster.stop``). ``places``:
    where each of the six runs (on hosts of a test's own net), loopback by default;
    ``options``: more redis-server options, as ``cluster_require_full_coverage="no"``."""
    if REDIS_SERVER is None or REDIS_CLI is None:
        raise FileNotFoundError("redis-server and redis-cli are needed for a Redis Cluster")
    more = {k.replace("_", "-"): v for k, v in options.items()}
    ports = free_ports(6, also=10000)
    cluster = RedisCluster(
        ports,
        tempfile.mkdtemp(prefix="podium-cluster-"),
        options=more,
        places=dict(zip(ports, places, strict=False)),
    )
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def replica_of(primary: int, host: str = "127.0.0.1") -> int:
    """The port of the replica of the primary on ``primary`` (at ``host``)."""
    nodes = cli(primary, "cluster", "nodes", host=host).splitlines()
    me = next(line.split()[0] for line in nodes if "myself" in line)
    return next(
        int(line.split()[1].split("@")[0].rsplit(":", 1)[1])
        for line in nodes
        if line.split()[3] == me
    )


def _serves(cluster: RedisCluster, port: int, key: str) -> bool:
    """Whether the primary on ``port`` serves the slot of ``key``."""
    alive = cluster.alive()[0]
    ranges: list[tuple[int, int]] = []
    for line in cluster.cli(alive, "cluster", "nodes").splitlines():
        parts = line.split()
        if int(parts[1].split("@")[0].rsplit(":", 1)[1]) != port or "master" not in parts[2]:
            continue
        for r in parts[8:]:
            lo, _, hi = r.partition("-")
            if lo.isdigit():
                ranges.append((int(lo), int(hi or lo)))
    slot = int(cluster.cli(alive, "cluster", "keyslot", key).strip())
    return any(lo <= slot <= hi for lo, hi in ranges)


def shards_on(cluster: RedisCluster, port: int, shards: int) -> set[int]:
    """The index shards (of ``shards``) whose slot the primary on ``port`` serves."""
    from podium.domain.sharding import shard_tag

    return {n for n in range(shards) if _serves(cluster, port, shard_tag(n))}


def primary_of(cluster: RedisCluster, key: str) -> int:
    """The port of the primary that serves the slot of ``key`` (a hash tag: ``{agg}``)."""
    return next(p for p in cluster.primaries() if _serves(cluster, p, key))
