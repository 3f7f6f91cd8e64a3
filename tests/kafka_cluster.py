"""Kafka for the tests: the machine's broker, and private three-node KRaft clusters started here.

The machine's broker (``PODIUM_TEST_KAFKA``, default 127.0.0.1:9092, started by
``scripts/kafka up``) is shared: a test takes a topic of its own and deletes it afterwards
(``own_topic``). Anything destructive runs on a cluster of its own (``Cluster``): Kafka
nodes, each broker and controller in one JVM, from the jars ``scripts/kafka libs`` fetched,
each with its own storage directory and free loopback ports, replication factor 3 and
``min.insync.replicas=2``, killed with SIGKILL on demand, restarted on the same data, and
stopped afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.conftest import REQUIRE, need
from tests.ports import free_ports

KAFKA = os.environ.get("PODIUM_TEST_KAFKA", "127.0.0.1:9092")
ROOT = Path(__file__).resolve().parent.parent
# A fixed cluster id for the private clusters (base64 of the 16 bytes "podium-test-kraf").
CLUSTER_ID = "cG9kaXVtLXRlc3Qta3JhZg"
# A node's JVM: a small heap, and the client compiler only: three of them start on a loaded
# 2-core machine, where warming up the optimizing compiler costs more than it brings.
JVM = ["java", "-Xms64m", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]
START_TIMEOUT_S = 180.0

# librdkafka's own log (a node it cannot reach, ...) through Python's logging: pytest shows it
# with a failure, instead of on every run's standard error.
CLIENT_LOG = logging.getLogger("tests.kafka")

_libs: Path | None = None


def _unavailable(message: str) -> None:
    if REQUIRE:
        pytest.fail(f"{message} and PODIUM_REQUIRE_SERVICES=1")
    pytest.skip(message)


def need_kafka() -> str:
    """The machine's broker (bootstrap servers), or a skip (a laptop) / failure (CI)."""
    need(f"kafka://{KAFKA}", "Kafka")
    return KAFKA


def kafka_libs() -> Path:
    """The directory of Kafka's jars (``scripts/kafka libs``: fetched with Maven once), or a
    skip (a laptop without Java or Maven) / failure (CI)."""
    global _libs
    if _libs is None:
        out = subprocess.run(
            [str(ROOT / "scripts" / "kafka"), "libs"], capture_output=True, text=True
        )
        if out.returncode != 0:
            _unavailable(f"no Kafka jars (scripts/kafka libs): {out.stderr.strip()[-500:]}")
        _libs = Path(out.stdout.strip())
    return _libs


def client_config(bootstrap: str, **more: Any) -> dict[str, Any]:
    """A client's settings: its bootstrap servers, its log to Python's logging, and ``more``."""
    return {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG, **more}


def admin(bootstrap: str) -> AdminClient:
    return AdminClient(client_config(bootstrap))


def topic_name() -> str:
    return f"podium-test-{secrets.token_hex(4)}"


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    config: dict[str, str] | None = None,
) -> None:
    client = admin(bootstrap)  # kept: its futures fail once it is collected
    futures = client.create_topics(
        [NewTopic(name, partitions, replication, config=config or {})], operation_timeout=30
    )
    for future in futures.values():
        future.result(60)
    # Until every partition has a leader that every client's metadata can find.
    wait_for(lambda: _has_leaders(client, name, partitions), f"the leaders of topic {name}", 60)


def read_partition(bootstrap: str, topic: str, partition: int) -> list[Any]:
    """Every record of one partition of ``topic``, from its start to its end as it is now,
    in their order there."""
    c = Consumer(client_config(bootstrap, **{"group.id": f"{topic}-check"}))
    try:
        tp = TopicPartition(topic, partition)
        _, high = c.get_watermark_offsets(tp, timeout=10, cached=False)
        c.assign([TopicPartition(topic, partition, 0)])
        got: list[Any] = []
        while len(got) < high:
            more = c.consume(high - len(got), timeout=10)
            assert more, f"{topic}[{partition}]: {len(got)} of {high} read"
            got += [m for m in more if not m.error()]
        return got
    finally:
        c.close()


def group_name(topic: str) -> str:
    """A consumer group of the test's own, named after its topic: deleted with it."""
    return f"{topic}-{secrets.token_hex(3)}"


def delete_topic(bootstrap: str, name: str) -> None:
    """The topic, and the consumer groups named after it (``group_name``)."""
    client = admin(bootstrap)
    for future in client.delete_topics([name], operation_timeout=30).values():
        with suppress(KafkaException):  # never made, or gone already
            future.result(60)
    listed = client.list_consumer_groups(request_timeout=30).result(60)
    groups = [g.group_id for g in listed.valid if g.group_id.startswith(f"{name}-")]
    if groups:
        for future in client.delete_consumer_groups(groups, request_timeout=30).values():
            with suppress(KafkaException):  # a member still leaving: it expires by itself
                future.result(60)


async def delete_log_topics(bootstrap: str, topic: str) -> None:
    """A podium log's topics, as ``[log.kafka]`` names them: its changes' (``topic``) and its
    events' (``topic-events``), each with its consumer groups (``delete_topic``)."""
    for name in (topic, f"{topic}-events"):
        await asyncio.to_thread(delete_topic, bootstrap, name)


@contextmanager
def own_topic(
    bootstrap: str,
    partitions: int = 1,
    replication: int = 1,
    config: dict[str, str] | None = None,
) -> Iterator[str]:
    """A topic nobody else uses, made here and deleted afterwards with its groups."""
    name = topic_name()
    create_topic(bootstrap, name, partitions, replication, config)
    try:
        yield name
    finally:
        delete_topic(bootstrap, name)


def _has_leaders(client: AdminClient, name: str, partitions: int) -> bool:
    topic = client.list_topics(name, timeout=10).topics.get(name)
    return (
        topic is not None
        and topic.error is None
        and len(topic.partitions) == partitions
        and all(p.leader >= 0 for p in topic.partitions.values())
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float) -> None:
    """Until ``condition()`` holds (a condition that raises is taken as not yet)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except KafkaException as e:
            last = e
        time.sleep(0.25)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last error: {last!r})")


class Cluster:
    """``size`` Kafka nodes in one KRaft cluster on loopback, each a broker and a controller
    (the controllers' quorum is every node), node ids 1..size; node ``i`` (0-based) has id
    ``i + 1``."""

    def __init__(self, libs: Path, root: Path, size: int = 3) -> None:
        self.libs = libs
        self.root = root
        self.size = size
        ports = free_ports(2 * size)
        self.broker_ports, self.controller_ports = ports[:size], ports[size:]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * size
        self._admin: AdminClient | None = None
        root.mkdir(parents=True, exist_ok=True)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.broker_ports)

    def alive(self) -> list[int]:
        return [i for i, p in enumerate(self.procs) if p is not None and p.poll() is None]

    def _java(self, *args: str) -> list[str]:
        log4j = self.root / "log4j2.properties"
        if not log4j.exists():
            log4j.write_text(
                "appender.out.type = Console\nappender.out.name = STDOUT\n"
                "appender.out.layout.type = PatternLayout\n"
                "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
                "rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = STDOUT\n"
            )
        return [*JVM, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{self.libs}/*", *args]

    def _config(self, i: int) -> Path:
        voters = ",".join(f"{n + 1}@127.0.0.1:{p}" for n, p in enumerate(self.controller_ports))
        replicas = min(3, self.size)
        path = self.root / f"n{i}.properties"
        path.write_text(
            "process.roles=broker,controller\n"
            f"node.id={i + 1}\n"
            f"controller.quorum.voters={voters}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker_ports[i]},"
            f"CONTROLLER://127.0.0.1:{self.controller_ports[i]}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.broker_ports[i]}\n"
            "controller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            f"log.dirs={self.root / f'n{i}' / 'data'}\n"
            f"default.replication.factor={replicas}\n"
            f"min.insync.replicas={min(2, replicas)}\n"
            f"offsets.topic.replication.factor={replicas}\n"
            f"transaction.state.log.replication.factor={replicas}\n"
            f"transaction.state.log.min.isr={min(2, replicas)}\n"
            f"share.coordinator.state.topic.replication.factor={replicas}\n"
            f"share.coordinator.state.topic.min.isr={min(2, replicas)}\n"
            "unclean.leader.election.enable=false\n"
            "auto.create.topics.enable=false\n"
            "group.initial.rebalance.delay.ms=0\n"
            # A node killed is fenced (its partitions led elsewhere) after 6 s without a
            # heartbeat, not 9.
            "broker.heartbeat.interval.ms=1000\n"
            "broker.session.timeout.ms=6000\n"
            "num.network.threads=2\nnum.io.threads=2\nbackground.threads=2\n"
            "num.replica.fetchers=1\nlog.cleaner.threads=1\n"
        )
        return path

    def format(self) -> None:
        """Each node's storage directory, formatted for the cluster (once: a node whose
        directory was formatted keeps its data)."""
        procs = []
        for i in range(self.size):
            config = self._config(i)
            if (self.root / f"n{i}" / "data" / "meta.properties").exists():
                continue
            log = (self.root / f"n{i}.format.log").open("wb")
            command = self._java("kafka.tools.StorageTool", "format", "-t", CLUSTER_ID)
            procs.append(
                (
                    i,
                    subprocess.Popen(
                        [*command, "-c", str(config)],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=self.root,
                    ),
                )
            )
            log.close()
        for i, proc in procs:
            if proc.wait(120) != 0:
                log_text = (self.root / f"n{i}.format.log").read_text()[-2000:]
                raise RuntimeError(f"formatting node {i + 1} failed:\n{log_text}")

    def start(self, i: int) -> None:
        """Node ``i`` (again: a restart keeps its data)."""
        log = (self.root / f"n{i}.log").open("ab")
        self.procs[i] = subprocess.Popen(
            self._java("kafka.Kafka", str(self._config(i))),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # The JVM will not start in a directory it cannot name: its own, never the caller's.
            cwd=self.root,
        )
        log.close()

    def kill(self, i: int) -> None:
        """SIGKILL: no controlled shutdown, nothing flushed, no goodbye to its peers."""
        proc = self.procs[i]
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            self.procs[i] = None

    def restart(self, i: int) -> None:
        self.kill(i)
        self.start(i)

    def stop(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for i, proc in enumerate(self.procs):
            if proc is not None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(30)
                self.procs[i] = None

    def log_tail(self, i: int, lines: int = 30) -> str:
        path = self.root / f"n{i}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def admin(self) -> AdminClient:
        """The cluster's admin client (one, for the cluster's life: it finds the live nodes
        among all)."""
        if self._admin is None:
            self._admin = admin(self.bootstrap)
        return self._admin

    def brokers(self) -> set[int]:
        """The node ids of the brokers registered and not fenced, as the cluster says."""
        return {b.id for b in self.admin().list_topics(timeout=5).brokers.values()}

    def _listening(self, i: int) -> bool:
        with suppress(OSError), socket.create_connection(("127.0.0.1", self.broker_ports[i]), 1):
            return True
        return False

    def ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until every live node listens and is a registered broker (and none has exited)."""

        def up() -> bool:
            for i, proc in enumerate(self.procs):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"Kafka node {i + 1} exited:\n{self.log_tail(i)}")
            live = self.alive()
            return all(self._listening(i) for i in live) and self.brokers() == {i + 1 for i in live}

        wait_for(up, f"the Kafka cluster on {self.bootstrap}", timeout)

    def partitions(self, topic: str) -> dict[int, Any]:
        """The topic's partitions by number, as metadata says now (``.leader``, ``.isrs``)."""
        meta = self.admin().list_topics(topic, timeout=10).topics[topic]
        return dict(meta.partitions)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The index (0-based) of the node leading the partition."""
        node_id: int = self.partitions(topic)[partition].leader
        if node_id < 0:
            raise RuntimeError(f"{topic}[{partition}] has no leader")
        return node_id - 1


@contextmanager
def cluster(root: Path, size: int = 3) -> Iterator[Cluster]:
    """A running cluster of ``size`` nodes, stopped afterwards (its data stays in ``root``,
    a test's tmp_path)."""
    c = Cluster(kafka_libs(), root, size)
    try:
        c.format()
        for i in range(size):
            c.start(i)
        c.ready()
        yield c
    finally:
        c.stop()
