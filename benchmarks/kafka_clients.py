"""The Python Kafka clients against the machine's broker, beside Kafka's own perf tools.

On the broker ``scripts/kafka up`` starts (``PODIUM_BENCH_KAFKA``, default 127.0.0.1:9092),
each client on a topic of its own (deleted afterwards):

1. produce ``--messages`` small keyed messages (a key of 16 players' boards, a 64-byte value)
   with ``acks=all`` and the idempotent producer, every delivery awaited: messages/s from the
   first send to the last acknowledgement;
2. consume them back in a consumer group of its own, auto-commit off, offsets committed
   (synchronously) after each batch is processed: messages/s from the first message to the
   last, and the time the group took to hand the consumer its partitions; every message is
   read back once.

The clients: confluent-kafka (librdkafka) with its plain Producer/Consumer (poll/consume from
a loop, as a thread would) and with its asyncio wrappers (``confluent_kafka.aio``), and
aiokafka (pure asyncio); each that is installed. The reference is Kafka's own
``ProducerPerformance`` and ``ConsumerPerformance`` (``kafka-producer-perf-test`` and
``kafka-consumer-perf-test``), run with ``java -cp`` from the jars ``scripts/kafka libs``
names, with the same settings (their records have no key).

    python benchmarks/kafka_clients.py [--messages 100000] [--partitions 3]

On the 2-core machine under other engineers' load (4-5), a Kafka 4.4.0 broker from
``scripts/kafka``, confluent-kafka 2.16.1, aiokafka 0.14.0; the median of three runs
(messages/s, produce / consume): Kafka's perf tools 33,378 / 119,474 (a JVM warming up over
a 3 s run); confluent-kafka 103,673 / 215,090; confluent-kafka aio 35,519 / 240,154;
aiokafka 20,534 / 156,829. Hence confluent-kafka (pyproject.toml).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import secrets
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

BOOTSTRAP = os.environ.get("PODIUM_BENCH_KAFKA", "127.0.0.1:9092")
ROOT = Path(__file__).resolve().parent.parent
VALUE = b"x" * 64
BATCH = 1000  # a consumer's batch: processed, then committed


def key(i: int) -> bytes:
    return f"board-{i % 16}".encode()


def value(i: int) -> bytes:
    return f"{i:012d}".encode() + VALUE[12:]


@dataclass
class Figures:
    client: str
    produce_per_s: float
    consume_per_s: float
    join_s: float  # from subscribe to the first message

    def row(self) -> str:
        join = "" if self.join_s != self.join_s else f"{self.join_s:8.2f}"  # NaN: not measured
        return f"{self.client:28} {self.produce_per_s:12,.0f} {self.consume_per_s:12,.0f} {join:>8}"


# -- topics -----------------------------------------------------------------------------------


@contextmanager
def own_topic(partitions: int) -> Iterator[str]:
    """A topic of the benchmark's own, deleted afterwards with its consumer groups."""
    name = f"podium-bench-{secrets.token_hex(4)}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP, "log_level": 4})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    try:
        yield name
    finally:
        for future in admin.delete_topics([name]).values():
            future.result(30)
        listed = admin.list_consumer_groups().result(30)
        groups = [g.group_id for g in listed.valid if g.group_id.startswith(f"{name}-")]
        if groups:
            for future in admin.delete_consumer_groups(groups).values():
                future.result(30)


def group(topic: str) -> str:
    """A consumer group of the run's own, deleted with its topic."""
    return f"{topic}-{secrets.token_hex(3)}"


def check(read: Counter[bytes], n: int, client: str) -> None:
    """Every message read back exactly once."""
    missing = n - len(read)
    twice = sum(1 for c in read.values() if c > 1)
    if missing or twice:
        raise SystemExit(f"{client}: {missing} messages missing, {twice} read twice")


# -- confluent-kafka ----------------------------------------------------------------------------

PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


def consumer_config(topic: str) -> dict[str, object]:
    """A group of its own from the topic's start, committing by hand after each batch."""
    return {
        "bootstrap.servers": BOOTSTRAP,
        "group.id": group(topic),
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def confluent_produce(topic: str, n: int) -> float:
    producer = Producer({"bootstrap.servers": BOOTSTRAP, **PRODUCER})
    errors: list[KafkaError] = []
    acked = 0

    def delivered(err: KafkaError | None, msg: Message) -> None:
        nonlocal acked
        if err is not None:
            errors.append(err)
        else:
            acked += 1

    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value(i), key(i), on_delivery=delivered)
                break
            except BufferError:  # librdkafka's queue is full: serve deliveries, then again
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if errors or left or acked != n:
        raise SystemExit(f"confluent-kafka: {acked} acked, {left} left, errors {errors[:3]}")
    return n / elapsed


def confluent_consume(topic: str, n: int) -> tuple[float, float]:
    consumer = Consumer(consumer_config(topic))
    read: Counter[bytes] = Counter()
    subscribed = time.perf_counter()
    first = 0.0
    deadline = subscribed + 120
    try:
        consumer.subscribe([topic])
        while sum(read.values()) < n and time.perf_counter() < deadline:
            batch = consumer.consume(BATCH, 1.0)
            for msg in batch:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                read[msg.value() or b""] += 1
            if batch:
                first = first or time.perf_counter()
                consumer.commit(asynchronous=False)
        elapsed = time.perf_counter() - first
    finally:
        consumer.close()
    check(read, n, "confluent-kafka")
    return n / elapsed, first - subscribed


async def confluent_aio(topic_produce: str, topic_consume: str, n: int) -> Figures:
    from confluent_kafka.aio import AIOConsumer, AIOProducer

    producer = AIOProducer({"bootstrap.servers": BOOTSTRAP, **PRODUCER})
    try:
        start = time.perf_counter()
        deliveries = [await producer.produce(topic_produce, value(i), key(i)) for i in range(n)]
        await producer.flush(120)
        await asyncio.gather(*deliveries)
        produce_per_s = n / (time.perf_counter() - start)
    finally:
        await producer.close()

    consumer = AIOConsumer(consumer_config(topic_consume))
    read: Counter[bytes] = Counter()
    subscribed = time.perf_counter()
    first = 0.0
    deadline = subscribed + 120
    try:
        await consumer.subscribe([topic_consume])
        while sum(read.values()) < n and time.perf_counter() < deadline:
            batch = await consumer.consume(BATCH, 1.0)
            for msg in batch:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                read[msg.value() or b""] += 1
            if batch:
                first = first or time.perf_counter()
                await consumer.commit(asynchronous=False)
        consume_per_s = n / (time.perf_counter() - first)
    finally:
        await consumer.close()
    check(read, n, "confluent-kafka aio")
    return Figures("confluent-kafka (aio)", produce_per_s, consume_per_s, first - subscribed)


# -- aiokafka ----------------------------------------------------------------------------------


async def aiokafka_run(topic_produce: str, topic_consume: str, n: int) -> Figures:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=BOOTSTRAP, acks="all", enable_idempotence=True, linger_ms=5
    )
    await producer.start()
    try:
        start = time.perf_counter()
        deliveries = [await producer.send(topic_produce, value(i), key=key(i)) for i in range(n)]
        await asyncio.gather(*deliveries)
        produce_per_s = n / (time.perf_counter() - start)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic_consume,
        bootstrap_servers=BOOTSTRAP,
        group_id=group(topic_consume),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    read: Counter[bytes] = Counter()
    subscribed = time.perf_counter()
    first = 0.0
    deadline = subscribed + 120
    await consumer.start()
    try:
        while sum(read.values()) < n and time.perf_counter() < deadline:
            batches = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
            for records in batches.values():
                for record in records:
                    read[record.value or b""] += 1
            if batches:
                first = first or time.perf_counter()
                await consumer.commit()
        consume_per_s = n / (time.perf_counter() - first)
    finally:
        await consumer.stop()
    check(read, n, "aiokafka")
    return Figures("aiokafka", produce_per_s, consume_per_s, first - subscribed)


# -- Kafka's own tools -------------------------------------------------------------------------


def kafka_libs() -> Path:
    out = subprocess.run(
        [str(ROOT / "scripts" / "kafka"), "libs"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def java(main: str, *args: str) -> str:
    command = ["java", "-Xmx256m", "-cp", f"{kafka_libs()}/*", main, *args]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"{main} exited with {out.returncode}:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def reference(topic: str, n: int) -> Figures:
    out = java(
        "org.apache.kafka.tools.ProducerPerformance",
        *("--topic", topic, "--num-records", str(n), "--record-size", str(len(VALUE))),
        *("--throughput", "-1", "--producer-props", f"bootstrap.servers={BOOTSTRAP}"),
        *("acks=all", "enable.idempotence=true", "linger.ms=5"),
    )
    # "100000 records sent, 98765.4 records/sec (6.03 MB/sec), ..." last
    produced = re.findall(r"records sent, ([\d.]+) records/sec", out)
    out = java(
        "org.apache.kafka.tools.ConsumerPerformance",
        *("--bootstrap-server", BOOTSTRAP, "--topic", topic, "--messages", str(n)),
        *("--group", group(topic)),
    )
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
    return Figures(
        "Kafka's perf tools (Java)", float(produced[-1]), float(fields[9]), float(fields[6]) / 1000
    )


# -- the run -----------------------------------------------------------------------------------


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    n = args.messages

    runs: list[tuple[str, Callable[[str], Figures]]] = [
        ("Kafka's perf tools (Java)", lambda t: reference(t, n)),
        (
            "confluent-kafka",
            lambda t: Figures("confluent-kafka", confluent_produce(t, n), *confluent_consume(t, n)),
        ),
        ("confluent-kafka (aio)", lambda t: asyncio.run(confluent_aio(t, t, n))),
    ]
    if installed("aiokafka"):
        runs.append(("aiokafka", lambda t: asyncio.run(aiokafka_run(t, t, n))))
    else:
        print("aiokafka is not installed: left out", file=sys.stderr)

    print(f"{n:,} messages, {args.partitions} partitions, acks=all, idempotent, {BOOTSTRAP}")
    print(f"{'client':28} {'produce/s':>12} {'consume/s':>12} {'join s':>8}")
    for _, run in runs:
        with own_topic(args.partitions) as topic:
            figures: Any = run(topic)
        print(figures.row(), flush=True)


if __name__ == "__main__":
    main()
