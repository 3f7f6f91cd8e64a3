"""The ingest role on the machine's broker: finished matches read from a topic are recorded
as the HTTP route records them, each once however often it comes; refused records land in
the dead-letter topic with the problem the route would answer; a consumer that stops and
starts again (cleanly, or killed with -9 mid-stream) loses nothing and doubles nothing.

Each test has a topic and a group of its own (deleted after it), and waits on conditions
(the group's committed offsets at the end of the topic, the records in the dead letter)
with generous deadlines, never on a guess of how long the machine takes.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from podium import metrics
from podium.config.settings import parse
from tests.integration.conftest import Api, close_all, started_api
from tests.kafka_cluster import client_config, create_topic, delete_topic, need_kafka, topic_name
from tests.ports import free_port

DEADLINE_S = 90.0  # a wait for a condition; long, since the machine may be busy
GROUP = "ingest"


@pytest.fixture
def topic() -> Iterator[tuple[str, str]]:
    """(bootstrap, topic): a topic of two partitions nobody else uses, deleted afterwards
    with its dead letter and its groups (named ``<topic>-...``)."""
    bootstrap = need_kafka()
    name = topic_name()
    create_topic(bootstrap, name, partitions=2)
    try:
        yield bootstrap, name
    finally:
        for t in (name, f"{name}.rejected"):
            delete_topic(bootstrap, t)


def _settings(tmp_path: Path, bootstrap: str, topic: str, **store: Any) -> Any:
    return parse(
        {
            "server": {"read_rate_per_s": 0},
            "store": {"url": f"sqlite:///{tmp_path}/podium.db", **store},
            "workers": {"idle_sleep_s": 0.005},
            "modes": [
                {"name": "default", "min_points": 0, "max_points": 500},
                {"name": "capped", "max_results_per_player_per_hour": 2},
                {"name": "other"},
            ],
            "ingest": [
                {
                    "topic": topic,
                    "group": f"{topic}-{GROUP}",
                    "key": "gs-ingest",
                    "brokers": f"kafka://{bootstrap}",
                }
            ],
        }
    )


# One endedAt for every match: a record sent again says exactly what it said the first time.
ENDED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))


def _body(results: list[tuple[str, int]], mode: str = "default", **more: Any) -> dict[str, Any]:
    return {
        "mode": mode,
        "endedAt": ENDED,
        "durationSeconds": 300,
        "results": [{"playerId": p, "points": pts} for p, pts in results],
        **more,
    }


def _produce(bootstrap: str, topic: str, records: list[tuple[str | None, bytes]]) -> None:
    p = Producer(client_config(bootstrap, **{"enable.idempotence": True, "acks": "all"}))
    for key, value in records:
        p.produce(topic, value, key, headers=[("trace", b"t-1")])
    assert p.flush(30) == 0


def _committed_at_end(bootstrap: str, topic: str, group: str) -> bool:
    """Whether ``group`` committed every partition of ``topic`` up to its end."""
    c = Consumer(client_config(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        tps = [TopicPartition(topic, p) for p in parts]
        committed = {tp.partition: tp.offset for tp in c.committed(tps, timeout=10)}
        for tp in tps:
            _, high = c.get_watermark_offsets(tp, timeout=10)
            if high > 0 and committed[tp.partition] < high:
                return False
        return True
    finally:
        c.close()


def _committed(bootstrap: str, topic: str, group: str) -> int:
    c = Consumer(client_config(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        got = c.committed([TopicPartition(topic, p) for p in parts], timeout=10)
        return sum(max(0, tp.offset) for tp in got)
    finally:
        c.close()


def _read_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    """``count`` records of ``topic`` from its start (failing if they do not come)."""
    c = Consumer(
        client_config(
            bootstrap,
            **{"group.id": f"{topic}-reader", "auto.offset.reset": "earliest"},
        )
    )
    c.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m)
        # Nothing more than expected: a little longer, for a record that should not be there.
        extra_until = time.monotonic() + 2
        while time.monotonic() < extra_until:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m)
    finally:
        c.close()
    assert len(out) == count, f"{len(out)} records in {topic}, expected {count}"
    return out


async def _until_done(bootstrap: str, topic: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not await asyncio.to_thread(_committed_at_end, bootstrap, topic, f"{topic}-{GROUP}"):
        assert time.monotonic() < deadline, "the ingest did not reach the end of its topic"
        await asyncio.sleep(0.2)


async def _points(api: Api, player: str) -> int | None:
    api.podium.reads.clear_cache()
    r = await api.client.get(f"/v1/boards/season/players/{player}")
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    return int(r.json()["points"])


async def _until_points(api: Api, expected: dict[str, int]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = {p: await _points(api, p) for p in expected}
        if got == expected or time.monotonic() > deadline:
            assert got == expected
            return
        await asyncio.sleep(0.1)


async def test_duplicates_count_once_and_poison_records_land_in_the_dead_letter(
    tmp_path: Path, topic: tuple[str, str]
) -> None:
    bootstrap, name = topic
    stack: list[Any] = []
    api = await started_api(_settings(tmp_path, bootstrap, name), stack)
    try:
        # The ingest's key: the modes "default" and "capped" (not "other").
        _, secret = await api.podium.keys.create("gs-ingest", ["default", "capped"], False)
        # A match the HTTP route recorded for another game server.
        _, other = await api.podium.keys.create("gs-other", ["default"], False)
        assert (await api.submit("m-taken", [("p-x", 1)], key=other)).status_code == 200
        before = {
            s: metrics.INGEST_REJECTED.labels(name, s)._value.get()
            for s in ("422", "403", "409", "429")
        }
        good = {f"m-{i}": [(f"p-{i}", 10 + i), (f"p-{i + 100}", i)] for i in range(20)}
        records: list[tuple[str | None, bytes]] = [
            (m, json.dumps(_body(r)).encode()) for m, r in good.items()
        ]
        # Each of the first five again, as a producer's retry or a redelivery would.
        records += [(m, json.dumps(_body(good[m])).encode()) for m in list(good)[:5]]
        poison: dict[str, tuple[bytes, int]] = {
            "bad-json": (b'{"mode": "default", ', 422),
            "unknown-mode": (json.dumps(_body([("p-u", 1)], mode="nope")).encode(), 422),
            "over-max": (json.dumps(_body([("p-o", 501)])).encode(), 422),
            "extra-field": (json.dumps(_body([("p-e", 1)], colour="red")).encode(), 422),
            "twice-key": (b'{"mode": "default", "mode": "default"}', 422),
            "wrong-modes": (json.dumps(_body([("p-w", 1)], mode="other")).encode(), 403),
            "m-taken": (json.dumps(_body([("p-x", 1)])).encode(), 403),
            "m-0": (json.dumps(_body([("p-0", 11), ("p-100", 0)])).encode(), 409),
        }
        # A player over the capped mode's 2 results an hour: the third is refused.
        cap = [
            (f"m-cap-{i}", json.dumps(_body([("p-cap", 5)], mode="capped")).encode())
            for i in range(3)
        ]
        records += [(m, body) for m, (body, _) in poison.items()]
        records += [(None, json.dumps(_body([("p-n", 1)])).encode())]  # no match id
        records += list(cap)
        random.Random(7).shuffle(records[20:])  # duplicates and poison among the tail
        await asyncio.to_thread(_produce, bootstrap, name, records)

        await _until_done(bootstrap, name)
        expected = {p: pts for rs in good.values() for p, pts in rs}
        expected["p-cap"] = 10
        await _until_points(api, expected)
        for p in ("p-u", "p-o", "p-e", "p-w", "p-n"):
            assert await _points(api, p) is None, p
        assert await _points(api, "p-x") == 1  # the other server's record, untouched

        refused = await asyncio.to_thread(_read_all, bootstrap, f"{name}.rejected", len(poison) + 2)
        by_key = {m.key().decode() if m.key() else None: m for m in refused}
        for m, (body, status) in poison.items():
            got = by_key[m]
            headers = dict(got.headers())
            problem = json.loads(headers["podium-problem"])
            assert problem["status"] == status, (m, problem)
            assert problem["type"] == "about:blank" and problem["detail"]
            assert got.value() == body  # the record as it was, its headers kept
            assert headers["trace"] == b"t-1"
            assert headers["podium-topic"] == name.encode()
        assert json.loads(dict(by_key[None].headers())["podium-problem"])["status"] == 422
        over = [m for k, m in by_key.items() if k and k.startswith("m-cap-")]
        assert len(over) == 1
        assert json.loads(dict(over[0].headers())["podium-problem"])["status"] == 429
        after = {s: metrics.INGEST_REJECTED.labels(name, s)._value.get() for s in before}
        # 422: five bodies and the record without a key; 403: the key's modes, the match
        # of another server; 409: a match said otherwise; 429: the hourly cap.
        assert {s: after[s] - before[s] for s in before} == {"422": 6, "403": 2, "409": 1, "429": 1}

        # The same bodies over HTTP get the very same problem (a fresh match id each).
        for m in (
            "bad-json",
            "unknown-mode",
            "over-max",
            "extra-field",
            "twice-key",
            "wrong-modes",
        ):
            body, status = poison[m]
            r = await api.client.post(
                f"/v1/matches/http-{m}/results",
                content=body,
                headers={"Content-Type": "application/json", **api.auth(secret)},
            )
            assert r.status_code == status, (m, r.text)
            problem = json.loads(dict(by_key[m].headers())["podium-problem"])
            assert problem == r.json(), m
    finally:
        await close_all(stack)


def _stream(count: int, seed: int) -> tuple[list[tuple[str | None, bytes]], dict[str, int]]:
    """``count`` matches of two players each from a pool of forty, every tenth sent twice;
    and each player's total, each match counted once."""
    rng = random.Random(seed)
    records: list[tuple[str | None, bytes]] = []
    totals: dict[str, int] = {}
    for i in range(count):
        a, b = rng.sample(range(40), 2)
        results = [(f"p-{a}", rng.randint(0, 500)), (f"p-{b}", rng.randint(0, 500))]
        for p, pts in results:
            totals[p] = totals.get(p, 0) + pts
        body = json.dumps(_body(results)).encode()
        records.append((f"m-{seed}-{i}", body))
        if i % 10 == 0:
            records.append((f"m-{seed}-{i}", body))
    return records, totals


async def test_a_consumer_stopped_and_started_again_records_everything_once(
    tmp_path: Path, topic: tuple[str, str]
) -> None:
    bootstrap, name = topic
    settings = _settings(tmp_path, bootstrap, name)
    records, totals = _stream(400, seed=1)
    stack: list[Any] = []
    api = await started_api(settings, stack)
    try:
        await api.podium.keys.create("gs-ingest", ["default"], False)
        await asyncio.to_thread(_produce, bootstrap, name, records[:200])
        group = f"{name}-{GROUP}"
        deadline = time.monotonic() + DEADLINE_S
        while await asyncio.to_thread(_committed, bootstrap, name, group) == 0:
            assert time.monotonic() < deadline, "nothing was committed"
            await asyncio.sleep(0.05)
    finally:
        await close_all(stack)  # the consumer leaves its group, wherever it was
    # The rest comes while no consumer runs; a new process (the same store) takes it all.
    await asyncio.to_thread(_produce, bootstrap, name, records[200:])
    stack = []
    api = await started_api(settings, stack)
    try:
        await _until_done(bootstrap, name)
        await _until_points(api, totals)
    finally:
        await close_all(stack)


def _wait_http(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"podium serve exited:\n{log.read_text()[-3000:]}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"podium serve did not start:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_an_ingest_killed_with_9_mid_stream_loses_and_doubles_nothing(
    tmp_path: Path, topic: tuple[str, str]
) -> None:
    bootstrap, name = topic
    cfg = tmp_path / "podium.toml"
    cfg.write_text(
        f"""
[server]
read_rate_per_s = 0
[store]
url = "sqlite:///{tmp_path}/podium.db"
[[modes]]
name = "default"
min_points = 0
max_points = 500
[[ingest]]
topic = "{name}"
group = "{name}-{GROUP}"
key = "gs-ingest"
brokers = "kafka://{bootstrap}"
"""
    )

    def podium(*args: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "podium", *args, "--config", str(cfg)],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    podium("migrate")
    podium("keys", "create", "--name", "gs-ingest", "--modes", "default")
    port = free_port()

    def serve(n: int) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"serve-{n}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "podium", "serve", "--config", str(cfg),
                 "--port", str(port)],
                cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        return proc, log

    records, totals = _stream(1500, seed=2)
    group = f"{name}-{GROUP}"
    # The process is killed with -9 as soon as it has committed something and while a chunk
    # just produced waits; what was committed is read once it is dead. Where it had already
    # taken everything (a fast machine), it is started again and killed in the next chunk:
    # no condition here depends on how fast it goes, only on what it had done when it died.
    sent = 0
    killed_at: tuple[int, int] | None = None
    run = 0
    while killed_at is None and sent < len(records):
        run += 1
        proc, log = serve(run)
        try:
            _wait_http(port, proc, log)
            deadline = time.monotonic() + DEADLINE_S
            while True:
                _produce(bootstrap, name, records[sent : sent + 100])
                sent = min(len(records), sent + 100)
                if _committed(bootstrap, name, group) > 0 or sent >= len(records):
                    break
                assert time.monotonic() < deadline, "the ingest committed nothing"
            _produce(bootstrap, name, records[sent : sent + 200])  # waiting when it dies
            sent = min(len(records), sent + 200)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        done = _committed(bootstrap, name, group)
        if 0 < done < sent:
            killed_at = (done, sent)
    assert killed_at is not None, "every run had taken its whole topic when it was killed"
    _produce(bootstrap, name, records[sent:])  # the rest, while no ingest runs
    second, log = serve(run + 1)
    try:
        _wait_http(port, second, log)
        deadline = time.monotonic() + DEADLINE_S
        while not _committed_at_end(bootstrap, name, group):
            assert time.monotonic() < deadline, "the restarted ingest did not reach the end"
            time.sleep(0.2)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            got = {}
            for p in totals:
                r = httpx.get(f"http://127.0.0.1:{port}/v1/boards/season/players/{p}", timeout=10)
                got[p] = r.json().get("points") if r.status_code == 200 else None
            if got == totals or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert got == totals, f"killed after {killed_at[0]} of {killed_at[1]} committed"
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            second.wait(30)
        except subprocess.TimeoutExpired:
            second.kill()


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_broker_killed_under_http_and_topic_results_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    """A private three-node cluster (replication 3, ``min.insync.replicas=2``) carries the
    change log and a topic of matches; results come over HTTP and from the topic while the
    node leading the topic's partition 0 is killed with SIGKILL. A record whose produce was
    not acknowledged is produced again (as a game service does): the topic may hold it twice.
    At the end every acknowledged result is on the board once, and the group's lag is 0."""
    from podium.serve.app import create_app
    from tests.integration.conftest import settings_for
    from tests.kafka_cluster import cluster

    with cluster(tmp_path / "kafka") as kafka:
        name = topic_name()
        create_topic(kafka.bootstrap, name, partitions=4, replication=3,
                     config={"min.insync.replicas": "2"})  # fmt: skip
        settings = settings_for(
            "embedded",
            f"sqlite:///{tmp_path}/podium.db",
            None,
            None,
            log={
                "url": f"kafka://{kafka.bootstrap}",
                "partitions": 4,
                "kafka": {
                    "topic": f"{name}-changes",
                    "events_topic": f"{name}-events",
                    "group": f"{name}-updaters",
                    "replication": 3,
                },
            },
            workers={"idle_sleep_s": 0.005, "lease_s": 3.0},
            boards=[{"name": "all", "window": "all"}],
            ingest=[{"topic": name, "group": f"{name}-{GROUP}", "key": "gs-ingest"}],
        )
        app = create_app(settings)
        ctx = app.router.lifespan_context(app)
        await ctx.__aenter__()
        try:
            podium = app.state.podium
            _, game = await podium.keys.create("gs", ["default"], False)
            await podium.keys.create("gs-ingest", ["default"], False)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://podium") as c:
                api = Api(c, app.state.backends, game, "")
                await _broker_killed(api, kafka, name)
        finally:
            await ctx.__aexit__(None, None, None)


async def _broker_killed(api: Api, kafka: Any, name: str) -> None:
    from tests.kafka_cluster import wait_for

    rng = random.Random(11)
    players = [f"p{i:02d}" for i in range(30)]
    expected: dict[str, int] = {}
    acked = [0, 0]  # over HTTP, through the topic
    producer = Producer(
        client_config(kafka.bootstrap, **{"enable.idempotence": True, "acks": "all",
                                          "message.timeout.ms": 20_000})
    )  # fmt: skip

    def results() -> list[tuple[str, int]]:
        a, b = rng.sample(players, 2)
        return [(a, rng.randint(1, 50)), (b, rng.randint(1, 50))]

    def count(rs: list[tuple[str, int]]) -> None:
        for p, pts in rs:
            expected[p] = expected.get(p, 0) + pts

    async def over_http() -> None:
        for i in range(200):
            rs = results()
            while True:  # a 5xx is sent again, same id and content
                r = await api.submit(f"h{i}", rs)
                if r.status_code == 200:
                    break
                assert r.status_code >= 500, r.text
                await asyncio.sleep(0.05)
            count(rs)
            acked[0] += 1
            await asyncio.sleep(0.01)

    def sent_once(key: str, value: bytes) -> bool:
        failed: list[object] = []
        producer.produce(name, value, key, on_delivery=lambda e, m: e and failed.append(e))
        producer.flush(30)
        return not failed

    async def through_topic() -> None:
        for i in range(200):
            rs = results()
            body = json.dumps(_body(rs)).encode()
            while not await asyncio.to_thread(sent_once, f"t{i}", body):
                await asyncio.sleep(0.2)  # not acknowledged: sent again, maybe twice
            count(rs)
            acked[1] += 1
            await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(over_http()), asyncio.create_task(through_topic())]
    try:
        deadline = time.monotonic() + 300
        while min(acked) < 60:
            assert time.monotonic() < deadline, f"only {acked} acknowledged"
            assert not any(t.done() and t.exception() for t in tasks), tasks
            await asyncio.sleep(0.05)
        victim = await asyncio.to_thread(kafka.leader, name, 0)
        kafka.kill(victim)
        await asyncio.to_thread(
            wait_for, lambda: kafka.leader(name, 0) != victim, "another leader", 120
        )
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=600)
    finally:
        for t in tasks:
            t.cancel()
    assert acked == [200, 200]

    async def on_board() -> dict[str, int]:
        page = await api.page("all", limit=100)
        return {e["playerId"]: e["points"] for e in page["entries"]}

    async def complete() -> bool:
        return await on_board() == expected

    assert await api.until(complete, timeout=300), f"{await on_board()} != {expected}"
    await asyncio.to_thread(
        wait_for,
        lambda: _committed_at_end(kafka.bootstrap, name, f"{name}-{GROUP}"),
        "the ingest's group committed to the topic's end",
        120,
    )
