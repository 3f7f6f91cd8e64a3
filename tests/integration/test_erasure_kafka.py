"""How long Kafka keeps a record naming an erased player, measured (docs/architecture.md §9):
Kafka cannot delete one record, so an erasure counts on the topic's retention. On a private
broker that checks retention every second, with `[log] retention_s = 10`, the records naming
the player are gone within twice the retention and the check, while the topic stays busy
with other players' changes (a quiet partition's segment goes once it is past retention)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.integration.test_erasure import GONE, erasure_done
from tests.kafka_cluster import Cluster, client_config, kafka_libs, topic_name

RETENTION_S = 10
CHECK_S = 1


class QuickRetention(Cluster):
    """One node that looks for segments past their retention every second (the broker's
    default is every 5 minutes)."""

    def _config(self, i: int) -> Path:
        path = super()._config(i)
        with path.open("a") as f:
            f.write(f"log.retention.check.interval.ms={CHECK_S * 1000}\n")
            # the first check a second after start, not 30; a segment deleted is unlinked at
            # once, not a minute later: what is measured is the bytes on the broker's disk
            f.write("log.initial.task.delay.ms=1000\nlog.segment.delete.delay.ms=0\n")
        return path


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the broker's address, its data directory)."""
    cluster = QuickRetention(kafka_libs(), tmp_path / "kafka", 1)
    cluster.format()
    cluster.start(0)
    try:
        cluster.ready()
        yield cluster.bootstrap, tmp_path / "kafka" / "n0" / "data"
    finally:
        cluster.stop()


def _on_disk(data: Path, needle: bytes) -> list[str]:
    """The broker's files (every topic's segments and indexes, the groups' offsets and
    their metadata) that hold ``needle``."""
    hits = []
    for f in data.rglob("*"):
        try:
            if f.is_file() and needle in f.read_bytes():
                hits.append(str(f.relative_to(data)))
        except FileNotFoundError:
            continue  # deleted while we looked
    return hits


def _naming(bootstrap: str, topics: list[str], needle: bytes) -> int:
    """How many records of these topics, from each partition's first kept offset to its
    last, hold ``needle``; -1 when a partition could not be read (its leader not elected
    yet): not known."""
    try:
        return _count(bootstrap, topics, needle)
    except KafkaException:
        return -1


def _count(bootstrap: str, topics: list[str], needle: bytes) -> int:
    consumer = Consumer(
        client_config(bootstrap, **{"group.id": topic_name(), "enable.auto.commit": False})
    )
    found = 0
    try:
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if low >= high:
                    continue
                consumer.assign([TopicPartition(topic, p, low)])
                at = low
                deadline = time.monotonic() + 10
                while at < high and time.monotonic() < deadline:
                    msg = consumer.poll(0.5)
                    if msg is None or msg.error():
                        continue
                    at = msg.offset() + 1
                    found += needle in (msg.value() or b"")
    finally:
        consumer.close()
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("config_kind", ["embedded"])
async def test_a_record_naming_an_erased_player_is_gone_within_twice_the_retention(
    make_api: Any, broker: tuple[str, Path]
) -> None:
    bootstrap, data = broker
    topic = topic_name()
    topics = [topic, f"{topic}-events"]
    api = await make_api(
        log={
            "url": f"kafka://{bootstrap}",
            "partitions": 2,
            "retention_s": RETENTION_S,
            "kafka": {"topic": topic, "events_topic": f"{topic}-events", "group": f"{topic}-u"},
        },
        workers={"idle_sleep_s": 0.005, "erasure_settle_s": 0.3},
    )
    needle = f'"playerId":"{GONE}"'.encode()
    assert (await api.submit("m0", [(GONE, 30), ("a", 20), ("b", 3)])).status_code == 200

    async def on_disk() -> bool:
        return bool(await asyncio.to_thread(_on_disk, data, GONE.encode()))

    assert await api.until(on_disk, timeout=60), "the player's changes never reached the broker"
    admin = api.auth(api.admin_key)
    r = await api.client.delete(f"/v1/admin/players/{GONE}", headers=admin)
    assert await erasure_done(api, admin, r.json()["id"], timeout=30)
    erased_at = time.monotonic()  # the store's step is done: nothing of them is produced since
    n = 0
    while True:
        n += 1  # other players keep the partitions busy, as a live game does
        await api.submit(f"o{n}", [("a", n), ("b", n + 1)])
        left = await asyncio.to_thread(_on_disk, data, GONE.encode())
        took = time.monotonic() - erased_at
        if not left:
            break
        assert took < 2 * RETENTION_S + CHECK_S + 20, f"{left} records still name them"
        await asyncio.sleep(0.5)
    print(f"no byte of the erased player's id on the broker's disk {took:.1f} s after the erasure")
    assert await asyncio.to_thread(_naming, bootstrap, topics, needle) == 0  # nor to a reader
    assert took <= 2 * RETENTION_S + CHECK_S + 20
