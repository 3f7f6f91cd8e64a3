"""The Kafka log's start and its errors, on the machine's broker: a missing topic is made
with the configured partitions; a topic with another count, a broker that refuses to make
one, and a broker nobody answers on each stop the start with podium's error, not a
driver's; and the relay's records carry the player as key, the events their id."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from podium.domain.models import Profile
from podium.errors import ConfigError, LogUnavailable
from podium.log.events import partition_of
from podium.log.kafka.log import KafkaLog
from podium.store.sqlite import SqliteStore
from tests.kafka_cluster import (
    admin,
    client_config,
    delete_log_topics,
    delete_topic,
    need_kafka,
    own_topic,
    read_partition,
    topic_name,
)


class Clock:
    def __init__(self) -> None:
        self.t = 1_792_800_000.0  # moved by a test that needs time to pass

    def now(self) -> float:
        return self.t


def _log(bootstrap: str, topic: str, **kw: object) -> KafkaLog:
    return KafkaLog(
        bootstrap,
        Clock(),
        topic=topic,
        events_topic=f"{topic}-events",
        group=f"{topic}-{secrets.token_hex(3)}",
        lease_s=5.0,
        **kw,  # type: ignore[arg-type]
    )


async def test_a_missing_topic_is_made_with_the_configured_partitions() -> None:
    bootstrap = need_kafka()
    topic = topic_name()
    log = _log(bootstrap, topic, partitions=6)
    try:
        await log.ping()
        assert await log.fetch(10) == []
        md = admin(bootstrap).list_topics(timeout=10)
        assert len(md.topics[topic].partitions) == 6
        assert len(md.topics[f"{topic}-events"].partitions) == 6
    finally:
        await log.close()
        await delete_log_topics(bootstrap, topic)


async def test_a_topic_with_another_partition_count_is_refused() -> None:
    bootstrap = need_kafka()
    with own_topic(bootstrap, partitions=3) as topic:
        log = _log(bootstrap, topic, partitions=4)
        try:
            with pytest.raises(ConfigError, match=r"has 3 partitions, not 4"):
                await log.fetch(10)
        finally:
            await log.close()
            await asyncio.to_thread(delete_topic, bootstrap, f"{topic}-events")


async def test_a_broker_that_refuses_to_make_the_topic_stops_the_start() -> None:
    bootstrap = need_kafka()  # one broker: three copies cannot be made
    topic = topic_name()
    log = _log(bootstrap, topic, partitions=2, replication=3)
    try:
        with pytest.raises(ConfigError, match=rf"refused to create topic '{topic}.*replication 3"):
            await log.fetch(10)
    finally:
        await log.close()


async def test_no_broker_is_log_unavailable() -> None:
    log = KafkaLog(
        "127.0.0.1:1", Clock(), topic="never", client={"socket.connection.setup.timeout.ms": "1000"}
    )
    try:
        with pytest.raises(LogUnavailable, match="Kafka"):
            await log.fetch(10)
    finally:
        await log.close()


async def test_relayed_records_are_keyed_by_player_and_settle_by_offset(tmp_path: object) -> None:
    bootstrap = need_kafka()
    store = SqliteStore.from_url(f"sqlite:///{tmp_path}/k.db")
    await store.migrate()
    topic = topic_name()
    log = _log(bootstrap, topic, partitions=4, outbox=store, source="db1")
    try:
        await store.set_profile(Profile("alice", "Alice"), 1.0)
        await store.set_profile(Profile("alice", "Alice 2"), 2.0)
        assert await log.relay(100) == 2
        assert await log.relay(100) == 0  # acked in the outbox: not sent twice
        [a, b] = await log.fetch(10)
        assert a.player_id == b.player_id == "alice"
        await log.ack([b])  # ahead of an unacked one: the group's offset cannot move yet
        c = Consumer(client_config(bootstrap, **{"group.id": log.group}))
        try:
            p = a.handle.partition  # type: ignore[union-attr]
            [tp] = c.committed([TopicPartition(topic, p)], timeout=10)
            assert tp.offset == 0 and json.loads(tp.metadata)["a"] == [[1, 2]]
            await log.ack([a])
            [tp] = c.committed([TopicPartition(topic, p)], timeout=10)
            assert tp.offset == 2  # everything applied: Kafka's own lag is 0
            c.assign([TopicPartition(topic, p, 0)])
            msgs = c.consume(2, timeout=10)
            assert [m.key() for m in msgs] == [b"alice", b"alice"]
            assert all(dict(m.headers() or [])["podium-message-id"] for m in msgs)
        finally:
            c.close()
    finally:
        await log.close()
        await store.close()
        await delete_log_topics(bootstrap, topic)


async def test_a_record_outlives_the_retention_by_one_segment_at_most() -> None:
    """What an erasure counts on (docs/architecture.md §9): Kafka deletes a record only with
    its segment, once the segment's newest record is past ``retention.ms``; the topics podium
    makes roll a segment every ``retention_s`` too, so no record outlives twice that (plus
    the broker's retention check)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    bootstrap = need_kafka()
    topic = topic_name()
    log = _log(bootstrap, topic, partitions=2, retention_s=3600.0)
    try:
        await log.ping()
        client = admin(bootstrap)  # held while its futures run
        for t in (topic, f"{topic}-events"):
            resource = ConfigResource(ResourceType.TOPIC, t)
            futures = client.describe_configs([resource])
            configs = await asyncio.to_thread(futures[resource].result, 10)
            assert configs["retention.ms"].value == "3600000"
            assert configs["segment.ms"].value == "3600000"
    finally:
        await log.close()
        await delete_log_topics(bootstrap, topic)


async def test_two_relays_that_both_hold_a_database_publish_a_players_changes_in_order(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka has no compare-and-set for the relay leases (``log/kafka/lease.py``): a relay
    whose lease ran out in a long step can write it back while the next relay relays too.
    Both then claim a database's rows; the later claim must take every row of the earlier
    one, so that each player's changes first reach the topic in commit order (the earlier
    relay's copies, later, carry message ids already seen). B's step began before A's claim,
    relayed another database first, and claimed after A: B claims as of its claim, not as of
    its step's start, or it would publish p's second change ahead of A's first."""
    from podium.log.kafka import relay as kafka_relay
    from podium.log.kafka.lease import RelayLeases

    bootstrap = need_kafka()
    topic = topic_name()
    other = SqliteStore.from_url(f"sqlite:///{tmp_path}/db0.db")
    shared = SqliteStore.from_url(f"sqlite:///{tmp_path}/db1.db")
    for s in (other, shared):
        await s.migrate()
    clock = Clock()

    def log_of(dbs: dict[str, SqliteStore]) -> KafkaLog:
        async def databases() -> dict[str, SqliteStore]:
            return dbs

        return KafkaLog(
            bootstrap, clock, topic=topic, events_topic=f"{topic}-events", group=f"{topic}-g",
            partitions=4, lease_s=5.0, databases=databases,
        )  # fmt: skip

    async def held(self: RelayLeases, sources: Any) -> dict[str, float]:
        return {s: time.monotonic() + 60 for s in sources}  # each believes it holds them all

    monkeypatch.setattr(RelayLeases, "hold", held)
    a = log_of({"db1": shared})
    b = log_of({"db0": other, "db1": shared})
    gates = {a: asyncio.Event(), b: asyncio.Event()}  # each relay's first produce, held
    reached = {a: asyncio.Event(), b: asyncio.Event()}
    for log in (a, b):

        def gated(log: KafkaLog = log, run: Any = log.run) -> Any:
            async def run_gated(fn: Any, *args: Any) -> Any:
                if fn is kafka_relay.send and not gates[log].is_set():
                    reached[log].set()
                    await gates[log].wait()
                return await run(fn, *args)

            return run_gated

        monkeypatch.setattr(log, "run", gated())
    try:
        await other.set_profile(Profile("q", "Q"), clock.now())
        await shared.set_profile(Profile("p", "P 1"), clock.now())
        b_step = asyncio.create_task(b.relay(100))  # at db0's produce, held
        await asyncio.wait_for(reached[b].wait(), 30)
        clock.t += 1.0
        a_step = asyncio.create_task(a.relay(100))  # claims p's first change, held
        await asyncio.wait_for(reached[a].wait(), 30)
        await shared.set_profile(Profile("p", "P 2"), clock.now())
        gates[b].set()
        assert await b_step == 3  # q's, and p's two: the first claimed by A too
        gates[a].set()
        assert await a_step == 1  # p's first again: a copy
        versions = await asyncio.to_thread(_profile_versions, bootstrap, topic, "p")
        assert versions == [1, 2, 1]  # first B's two, in order, then A's copy of the first
    finally:
        for log in (a, b):
            await log.close()
        for s in (other, shared):
            await s.close()
        await delete_log_topics(bootstrap, topic)


def _profile_versions(bootstrap: str, topic: str, player: str) -> list[int]:
    """The profile versions of ``player``'s records on the topic, in their order there."""
    events = [
        json.loads(m.value()) for m in read_partition(bootstrap, topic, partition_of(player, 4))
    ]
    return [e["profileVersion"] for e in events if e["playerId"] == player]
