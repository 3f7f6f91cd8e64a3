"""The Kafka log on a private three-node cluster (replication 3, ``min.insync.replicas=2``):
results keep coming over HTTP while the node leading partition 0 of the changes topic is
killed with SIGKILL; the relay and the updaters go on through the two nodes left, and at the
end every acknowledged result is on the board exactly once (each player's points the sum of
their acknowledged results: nothing lost, nothing counted twice), the store says the same,
and the updaters' consumer group has committed every partition to its end (its lag is 0:
an offset is committed only once the board writes it covers are done)."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from podium.serve.app import create_app
from tests.integration.conftest import Api, settings_for
from tests.kafka_cluster import client_config, cluster, topic_name, wait_for

PLAYERS = [f"p{i:02d}" for i in range(24)]
PARTITIONS = 4
BEFORE_KILL = 120  # acknowledged matches before the kill
MATCHES = 360


def _lag(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """Each partition's high watermark less the group's committed offset."""
    c = Consumer(client_config(bootstrap, **{"group.id": group}))
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = {tp.partition: tp.offset for tp in c.committed(parts, timeout=30)}
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
            for p in range(PARTITIONS)
        }
    finally:
        c.close()
    return {p: ends[p] - max(0, committed[p]) for p in range(PARTITIONS)}


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_partition_leader_killed_mid_stream_loses_and_doubles_no_result(
    tmp_path: Path, sqlite_url: str
) -> None:
    with cluster(tmp_path / "kafka") as kafka:
        topic = topic_name()
        group = f"{topic}-updaters"
        settings = settings_for(
            "embedded",
            sqlite_url,
            None,
            None,
            log={
                "url": f"kafka://{kafka.bootstrap}",
                "partitions": PARTITIONS,
                "kafka": {
                    "topic": topic,
                    "events_topic": f"{topic}-events",
                    "group": group,
                    "replication": 3,
                },
            },
            workers={"idle_sleep_s": 0.005, "lease_s": 3.0},
            boards=[{"name": "all", "window": "all"}],
        )
        app = create_app(settings)
        ctx = app.router.lifespan_context(app)
        await ctx.__aenter__()
        try:
            podium = app.state.podium
            _, game = await podium.keys.create("gs", ["default"], False)
            _, admin = await podium.keys.create("admin", [], True)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://podium") as c:
                api = Api(c, app.state.backends, game, admin)
                await _scenario(api, kafka, topic, group)
        finally:
            await ctx.__aexit__(None, None, None)


async def _scenario(api: Api, kafka: object, topic: str, group: str) -> None:
    from tests.kafka_cluster import Cluster

    assert isinstance(kafka, Cluster)
    rng = random.Random(7)
    expected: dict[str, int] = {}
    acked = [0]

    async def send() -> None:
        for i in range(MATCHES):
            a, b = rng.sample(PLAYERS, 2)
            results = [(a, rng.randint(1, 50)), (b, rng.randint(1, 50))]
            while True:  # a 5xx is sent again, same id and content, as a game server does
                r = await api.submit(f"m{i}", results)
                if r.status_code == 200:
                    break
                assert r.status_code >= 500, r.text
                await asyncio.sleep(0.05)
            for p, pts in results:
                expected[p] = expected.get(p, 0) + pts
            acked[0] += 1
            await asyncio.sleep(0.01)  # a stream, not a burst

    sending = asyncio.create_task(send())
    try:
        deadline = time.monotonic() + 300
        while acked[0] < BEFORE_KILL:  # results flowing through the log first
            assert time.monotonic() < deadline, f"only {acked[0]} matches acknowledged"
            assert not sending.done(), sending
            await asyncio.sleep(0.05)
        victim = await asyncio.to_thread(kafka.leader, topic, 0)
        kafka.kill(victim)
        killed_at = acked[0]
        await asyncio.to_thread(
            wait_for,
            lambda: kafka.leader(topic, 0) != victim,
            "partition 0 led by another node",
            120,
        )
        await asyncio.wait_for(sending, timeout=600)
    finally:
        sending.cancel()
    assert acked[0] == MATCHES and killed_at < MATCHES

    async def on_board() -> dict[str, int]:
        page = await api.page("all", limit=100)
        return {e["playerId"]: e["points"] for e in page["entries"]}

    async def complete() -> bool:
        return await on_board() == expected

    # Generous: the updaters and the relay may be in their backoff after the failover.
    assert await api.until(complete, timeout=240), (
        f"board {await on_board()} != acknowledged {expected}"
    )
    window = (await api.page("all", limit=1))["window"]
    stored: dict[str, int] = {}
    async for batch in api.backends.store.standings("all", window):
        stored |= {s.player_id: s.tally.total for s in batch}
    assert stored == expected  # nothing counted twice in the store either

    # Every offset committed once its board write was done: the group's lag drains to 0.
    lag: dict[int, int] = {}

    def drained() -> bool:
        lag.update(_lag(kafka.bootstrap, topic, group))
        return all(v == 0 for v in lag.values())

    await asyncio.to_thread(wait_for, drained, f"the group's lag at 0 (now {lag})", 120)
    ends = await asyncio.to_thread(_lag, kafka.bootstrap, topic, f"{topic}-nobody")
    assert sum(ends.values()) >= MATCHES * 2  # every change went through the topic
