"""Kafka at both ends of podium, each beside its reference in the same run.

1. **Ingest vs the HTTP accept path.** One ``podium serve`` (every role, Postgres store,
   Redis index, the outbox as the change log; ``[[ingest]]`` on a topic of the run's own)
   records ``--matches`` finished matches (two players each, from a pool of 20,000) read
   from the topic, produced before the server starts: matches/s from the group's first
   commit to its commit of the topic's end, the process's start and group join left out.
   Then the same process takes matches over HTTP for ``--seconds`` (``--connections``
   clients back to back, the harness's raw HTTP/1.1 client): matches answered 200 per
   second. Both go through the same use case, the same store and the same roles.
2. **The updater through Kafka, in board writes/s.** ``--changes`` changes (absolute totals
   of ``--players`` players on a day and a week board, as ``benchmarks/updater_apply.py``
   makes them) produced to a topic of their own exactly as the relay produces them (the
   player's key and partition, the encoded change, its message id), outside the timing, and
   drained by the real ``podium.workers.updater.Updater`` on a consumer-only ``KafkaLog``
   (``fetch``, ban check, index write, ``ack`` with its commit), ``step`` back to back.
   Beside it, in the same repeat: Kafka's own ``ProducerPerformance`` and
   ``ConsumerPerformance`` (``kafka-producer-perf-test`` / ``kafka-consumer-perf-test``,
   from the jars ``scripts/kafka libs`` names; ``benchmarks/kafka_clients.py``) on as many
   64-byte records, and raw redis-py ``ZADD GT`` of the same entries, pipelined a batch at a
   time (the index write's floor).

Medians [min-max] over ``--repeat`` repeats, and ratios of the medians. Topics, groups, the
database and the keys are removed afterwards.

    python benchmarks/kafka_ingest.py [--matches 3000] [--seconds 10] [--connections 32]
        [--changes 20000] [--players 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

import redis.asyncio as aioredis
from confluent_kafka import Consumer, Producer, TopicPartition

import updater_apply as ua
from _harness import (
    REDIS_URL,
    Env,
    closed_loop,
    create_key,
    http_client,
    make_env,
    match_body,
    num_spread,
    player_id,
    podium_server,
)
from kafka_clients import BOOTSTRAP, own_topic, reference
from podium import bootstrap
from podium.config.settings import parse
from podium.log.events import encode, message_id, partition_of, source_of
from podium.log.kafka.log import KafkaLog
from podium.ports import SystemClock

PARTITIONS = 4
POOL = 20_000  # players the matches are drawn from


Record = tuple[bytes, bytes, int | None, list[Any]]  # key, value, partition (None: by key), headers


def produce(topic: str, records: list[Record]) -> None:
    """Records (key, value, partition or None, headers) produced and acknowledged."""
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})  # fmt: skip
    for key, value, part, headers in records:
        while True:
            try:
                if part is None:
                    p.produce(topic, value, key, headers=headers)
                else:
                    p.produce(topic, value, key, part, headers=headers)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(60):
        raise SystemExit(f"{topic}: records not acknowledged")


def committed(topic: str, group: str) -> int:
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return sum(max(0, tp.offset) for tp in got)
    finally:
        c.close()


# -- 1. ingest beside the HTTP accept path ------------------------------------------------------


async def ingest_and_http(env: Env, args: argparse.Namespace, topic: str) -> tuple[float, float]:
    group = f"{topic}-ingest"
    rng = random.Random(len(topic))
    records: list[Record] = []
    for i in range(args.matches):
        a, b = rng.sample(range(POOL), 2)
        body = match_body([player_id(a), player_id(b)], rng)
        records.append((f"k-{topic}-{i}".encode(), body, None, []))
    produce(topic, records)
    env.config_path.write_text(
        env.config_path.read_text().split("[[ingest]]")[0]
        + f'[[ingest]]\ntopic = "{topic}"\ngroup = "{group}"\nkey = "bench"\n'
        + f'brokers = "kafka://{BOOTSTRAP}"\n'
    )
    with contextlib.ExitStack() as own:
        server = podium_server(own, env)
        await server.wait_ready()
        # From the first commit to the commit of the end: the group's join is left out.
        first_n, first_t = 0, 0.0
        deadline = time.monotonic() + 600
        while True:
            n = await asyncio.to_thread(committed, topic, group)
            now = time.perf_counter()
            if n and not first_n:
                first_n, first_t = n, now
            if n >= args.matches:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"ingest stalled at {n} of {args.matches}:\n{server.log_tail()}")
            await asyncio.sleep(0.05)
        ingest_rate = (args.matches - first_n) / (now - first_t)

        client = http_client(server.url, args.connections)
        headers = {"Authorization": f"Bearer {env.key}", "Content-Type": "application/json"}
        seq = iter(range(10**9))

        async def post() -> str:
            i = next(seq)
            a, b = rng.sample(range(POOL), 2)
            body = match_body([player_id(a), player_id(b)], rng)
            r = await client.post(f"/v1/matches/h-{topic}-{i}/results", body, headers)
            return str(r.status_code)

        async with client:
            res = await closed_loop(args.connections, args.seconds, post)
        bad = {k: v for k, v in res.statuses.items() if k != "200"}
        if bad:
            print(f"  HTTP answers other than 200: {bad}", file=sys.stderr)
        return ingest_rate, len(res.latencies) / res.wall


# -- 2. the updater through Kafka, beside Kafka's perf tools and raw ZADD GT --------------------


def changes_settings(db_url: str, prefix: str) -> Any:
    return parse(
        {
            "store": {"url": db_url},
            "index": {"url": REDIS_URL, "prefix": prefix},
            "log": {"url": f"kafka://{BOOTSTRAP}", "partitions": PARTITIONS},
            "boards": [{"name": "day", "window": "day"}, {"name": "week", "window": "week"}],
        }
    )


async def updater_via_kafka(bench: ua.Bench, topic: str) -> float:
    source = bench.source
    log = KafkaLog.from_url(
        f"kafka://{BOOTSTRAP}", SystemClock(), topic=topic, events_topic=f"{topic}-events",
        group=f"{topic}-updaters", partitions=PARTITIONS, lease_s=30.0, replication=1,
    )  # fmt: skip
    try:
        await log.ping()  # the topics and the consumer made before the timing
        records: list[Record] = []
        for row, c in enumerate(bench.changes, start=1):
            payload = encode(c, source, row)
            headers = [("podium-message-id", message_id(payload, source, row))]
            part = partition_of(c.player_id, PARTITIONS)
            records.append((c.player_id.encode(), payload, part, headers))
        await asyncio.to_thread(produce, topic, records)
        await ua.clear_keys(bench.redis, bench.settings.index.prefix)
        updater = ua.make_updater(bench.backends, log)
        try:
            rate = await ua.drain([updater.step], len(bench.changes))
        finally:
            await updater.close()  # the batch it fetched ahead, given back
        await ua.check_boards(bench)
        return rate
    finally:
        await log.close()


async def run(args: argparse.Namespace, env: Env) -> None:
    prefix = f"{env.prefix}-u"
    settings = changes_settings(env.store_url, prefix)
    backends = bootstrap.build(settings)
    redis = aioredis.Redis.from_url(REDIS_URL)
    results: dict[str, list[float]] = defaultdict(list)
    try:
        await backends.start()
        changes = ua.make_changes(settings, args.changes, args.players, time.time())
        entries = ua.index_entries(settings, changes)
        per_board: dict[str, set[str]] = defaultdict(set)
        for key, member, _ in entries:
            per_board[key].add(member)
        bench = ua.Bench(
            settings, backends, changes, entries, {k: len(v) for k, v in per_board.items()},
            source_of(env.store_url), redis, env.store_url,
        )  # fmt: skip
        print(
            f"{args.matches} matches through a topic, HTTP for {args.seconds:.0f} s with "
            f"{args.connections} clients; {len(changes)} changes of {args.players} players "
            f"on 2 boards through Kafka, {PARTITIONS} partitions, batch {settings.workers.batch}"
        )
        for r in range(args.repeat):
            with contextlib.ExitStack() as topics:
                ingest_topic = topics.enter_context(own_topic(PARTITIONS))
                ingest, http = await ingest_and_http(env, args, ingest_topic)
                results[INGEST].append(ingest)
                results[HTTP].append(http)
                changes_topic = topics.enter_context(own_topic(PARTITIONS))
                results[UPDATER].append(await updater_via_kafka(bench, changes_topic))
                ref_topic = topics.enter_context(own_topic(PARTITIONS))
                figures = await asyncio.to_thread(reference, ref_topic, args.changes)
                results[PRODUCER_PERF].append(figures.produce_per_s)
                results[CONSUMER_PERF].append(figures.consume_per_s)
                results[ZADD].append(await ua.raw_zadd(bench))
                await ua.clear_keys(redis, prefix)
            await delete_topic_now(f"{changes_topic}-events")
            print(f"  repeat {r + 1} done; load average {ua.loadavg()}", flush=True)
        print("per second, median [min-max]:")
        for name, rates in results.items():
            print(f"  {name:52} {num_spread(rates):>24}")
        med = {name: statistics.median(v) for name, v in results.items()}
        print("ratios of the medians:")
        for a, b in (
            (INGEST, HTTP),
            (UPDATER, CONSUMER_PERF),
            (UPDATER, PRODUCER_PERF),
            (UPDATER, ZADD),
        ):
            name = f"{a.split(':')[0].split(' (')[0]} / {b.split(':')[0].split(' (')[0]}"
            print(f"  {name:52} {med[a] / med[b]:8.3f}")
    finally:
        n = await ua.clear_keys(redis, prefix)
        print(f"[cleanup] deleted {n} redis keys under {prefix}", file=sys.stderr)
        await redis.aclose()
        await backends.close()


async def delete_topic_now(name: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.delete_topics([name]).values():
        with contextlib.suppress(Exception):  # never made
            await asyncio.to_thread(future.result, 30)


INGEST = "ingest: matches recorded from a topic (matches/s)"
HTTP = "HTTP accept path: matches answered 200 (matches/s)"
UPDATER = "updater via KafkaLog (board writes/s)"
PRODUCER_PERF = "kafka-producer-perf-test (records/s)"
CONSUMER_PERF = "kafka-consumer-perf-test (records/s)"
ZADD = "raw redis-py ZADD GT, pipelined (writes/s)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matches", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--changes", type=int, default=20_000)
    ap.add_argument("--players", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        env = make_env(stack, "production")  # a database and a key prefix of the run's own
        subprocess.run(
            [sys.executable, "-m", "podium", "migrate", "--config", str(env.config_path)],
            check=True, capture_output=True,
        )  # fmt: skip
        create_key(env)  # "bench", mode "default": the key the topic's matches are held to
        asyncio.run(run(args, env))


if __name__ == "__main__":
    main()
