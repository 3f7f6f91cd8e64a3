"""A real Kafka, as the change log on Kafka will need it (tests/kafka_cluster.py).

On the machine's broker, each test on a topic of its own: a keyed message produced with
``acks=all`` comes back with its key on its partition; a consumer group's offsets, committed
by hand after processing, are where the group's next consumer resumes; ``offsets_for_times``
finds a message by its timestamp. On a private three-node KRaft cluster (replication 3,
``min.insync.replicas=2``): a partition's leader killed with SIGKILL under a producer's
load loses no acknowledged message and duplicates none (the idempotent producer), the two
nodes left go on serving producers and a consumer group, and the node restarted catches up.
Every wait is for a condition, with deadlines far above what a loaded 2-core machine takes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from tests.kafka_cluster import (
    client_config,
    cluster,
    group_name,
    need_kafka,
    own_topic,
    wait_for,
)

IDEMPOTENT = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


def consumer(bootstrap: str, group: str, **more: Any) -> Consumer:
    return Consumer(
        client_config(
            bootstrap,
            **{
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **more,
            },
        )
    )


def read(c: Consumer, n: int, timeout: float = 60.0) -> list[Message]:
    """``n`` messages (or fewer, at the deadline), each checked for errors."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for msg in c.consume(n - len(got), 1.0):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            got.append(msg)
    return got


def produce_acked(bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    """Every (key, value) acknowledged by the in-sync replicas, or a failure."""
    p = Producer(client_config(bootstrap, **IDEMPOTENT))
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(err)

    for key, value in messages:
        p.produce(topic, value, key, on_delivery=delivered)
    assert p.flush(60) == 0, "not every message was acknowledged within 60 s"
    assert not errors


# -- the machine's broker ----------------------------------------------------------------------


def test_keyed_message_round_trip() -> None:
    bootstrap = need_kafka()
    with own_topic(bootstrap, partitions=3) as topic:
        delivered: list[Message] = []
        p = Producer(client_config(bootstrap, **IDEMPOTENT))
        p.produce(
            topic,
            b'{"board": "b1", "player": "p1", "score": 42}',
            b"b1",
            on_delivery=lambda err, msg: delivered.append(msg) if err is None else None,
        )
        assert p.flush(60) == 0
        [acked] = delivered

        c = consumer(bootstrap, group_name(topic))
        try:
            c.subscribe([topic])
            [msg] = read(c, 1)
        finally:
            c.close()
        assert msg.key() == b"b1"
        assert msg.value() == b'{"board": "b1", "player": "p1", "score": 42}'
        assert (msg.partition(), msg.offset()) == (acked.partition(), acked.offset())


def test_group_resumes_after_committed_offset() -> None:
    """A consumer commits what it processed, by hand, and dies; the group's next consumer
    starts after it: nothing processed twice, nothing skipped."""
    bootstrap = need_kafka()
    with own_topic(bootstrap, partitions=1) as topic:
        produce_acked(bootstrap, topic, [(b"k", str(i).encode()) for i in range(10)])
        group = group_name(topic)

        first = consumer(bootstrap, group)
        try:
            first.subscribe([topic])
            processed = read(first, 4)
            assert [m.value() for m in processed] == [b"0", b"1", b"2", b"3"]
            first.commit(message=processed[-1], asynchronous=False)
            read(first, 3)  # read but never committed: the next consumer sees them again
        finally:
            first.close()

        second = consumer(bootstrap, group)
        try:
            second.subscribe([topic])
            rest = read(second, 6)
        finally:
            second.close()
        assert [m.value() for m in rest] == [str(i).encode() for i in range(4, 10)]


def test_offsets_for_times_finds_a_message_by_its_timestamp() -> None:
    bootstrap = need_kafka()
    with own_topic(bootstrap, partitions=1) as topic:
        p = Producer(client_config(bootstrap, **IDEMPOTENT))
        for i, ts in enumerate((1_000_000, 2_000_000, 3_000_000)):  # ms since the epoch
            p.produce(topic, str(i).encode(), b"k", timestamp=ts)
        assert p.flush(60) == 0

        c = consumer(bootstrap, group_name(topic))
        try:
            [at] = c.offsets_for_times([TopicPartition(topic, 0, 1_500_000)], timeout=30)
            assert at.offset == 1  # the first message at or after the time
            [late] = c.offsets_for_times([TopicPartition(topic, 0, 9_000_000)], timeout=30)
            assert late.offset == OFFSET_END  # none that late
            c.assign([at])
            [msg] = read(c, 1)
        finally:
            c.close()
        assert msg.value() == b"1"
        assert msg.timestamp()[1] == 2_000_000


# -- a private three-node cluster --------------------------------------------------------------


class Load:
    """A producer in a thread of its own sending unique keys (``k00000001``, ...) with
    ``acks=all`` and idempotence, at a bounded pace and for a bounded count, until stopped;
    the keys acknowledged, in order."""

    def __init__(self, bootstrap: str, topic: str, limit: int = 200_000) -> None:
        self.producer = Producer(
            client_config(bootstrap, **IDEMPOTENT, **{"message.timeout.ms": 180_000})
        )
        self.topic = topic
        self.limit = limit
        self.acked: list[bytes] = []
        self.errors: list[KafkaError] = []
        self.sent = 0
        self.left = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka load", daemon=True)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append(msg.key() or b"")

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < self.limit:
            key = f"k{self.sent:08d}".encode()
            try:
                self.producer.produce(
                    self.topic, key + b" " + b"x" * 48, key, on_delivery=self._delivered
                )
            except BufferError:  # its queue is full (a leader is moving): serve it first
                self.producer.poll(0.1)
                continue
            self.sent += 1
            self.producer.poll(0)
            if self.sent % 100 == 0:
                time.sleep(0.02)  # at most ~5,000 messages/s: the cluster needs the cores
        self.left = self.producer.flush(180)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(240)
        assert not self._thread.is_alive(), "the producer did not flush within 180 s"


def read_all(bootstrap: str, topic: str, group: str, timeout: float = 120.0) -> list[Message]:
    """Every message now in the topic, through a consumer group that commits by hand after
    each batch; the group's committed offsets end at the topic's end."""
    c = consumer(bootstrap, group)
    got: list[Message] = []
    try:
        meta = c.list_topics(topic, timeout=30).topics[topic]
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in meta.partitions
        }
        c.subscribe([topic])
        reached: dict[int, int] = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout
        while any(reached[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"read up to {reached} of {ends} in {timeout} s"
            batch = c.consume(1000, 1.0)
            for msg in batch:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                got.append(msg)
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                reached[partition] = max(reached[partition], offset + 1)
            if batch:
                c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in ends], timeout=30)
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        c.close()
    return got


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_leader_killed_loses_no_acknowledged_message(tmp_path: Path) -> None:
    with cluster(tmp_path) as kafka:
        bootstrap = kafka.bootstrap
        with own_topic(bootstrap, partitions=3, replication=3) as topic:
            wait_for(
                lambda: all(len(p.isrs) == 3 for p in kafka.partitions(topic).values()),
                "three in-sync replicas of every partition",
                120,
            )
            load = Load(bootstrap, topic)
            load.start()
            try:
                wait_for(lambda: len(load.acked) >= 3_000, "3,000 messages acknowledged", 120)
                victim = kafka.leader(topic, 0)
                kafka.kill(victim)
                killed, at_kill = time.monotonic(), len(load.acked)
                # The two nodes left elect a new leader and keep acknowledging with acks=all
                # (two in-sync replicas: min.insync.replicas=2).
                wait_for(
                    lambda: kafka.leader(topic, 0) != victim,
                    "partition 0 led by another node",
                    120,
                )
                moved = time.monotonic() - killed
                wait_for(
                    lambda: len(load.acked) >= at_kill + 5_000,
                    "5,000 more messages acknowledged by the two nodes left",
                    180,
                )
            finally:
                load.stop()
            assert load.left == 0
            assert not load.errors, load.errors[:5]
            assert len(set(load.acked)) == len(load.acked) == load.sent

            # Everything acknowledged is there, once (the idempotent producer's retries
            # across the failover wrote nothing twice), read by a consumer group on the two
            # nodes left, its offsets committed.
            messages = read_all(bootstrap, topic, group_name(topic))
            counts = Counter(m.key() for m in messages)
            print(  # shown with the failure, or with -s
                f"node {victim + 1} killed at {at_kill} acked, partition 0 led elsewhere "
                f"{moved:.1f} s later; {len(load.acked)} acked, {len(messages)} read"
            )
            assert not [k for k, n in counts.items() if n > 1], "keys read twice"
            assert set(load.acked) <= set(counts), "acknowledged keys missing"

            # The node killed comes back on its data and catches up: three in-sync replicas.
            kafka.start(victim)
            kafka.ready()
            wait_for(
                lambda: all(len(p.isrs) == 3 for p in kafka.partitions(topic).values()),
                "the restarted node back in every partition's in-sync replicas",
                180,
            )
