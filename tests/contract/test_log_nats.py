"""What only the JetStream log has, beyond the ``ChangeLog`` contract: the published event
(its schema), the message ids that make a relay's re-publish harmless, the stream it makes,
replay by time, and its errors. On the machine's NATS, a stream of each test's own."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import nats
import pytest

import podium.log.nats.log
from podium.domain.boards import BoardSpec
from podium.domain.models import Change, Message, Profile, ResultRecord, Target
from podium.domain.windows import WindowKind, WindowRule
from podium.errors import ConfigError, LogUnavailable
from podium.log.events import SCHEMA_ID, EventError, decode, source_of
from podium.log.nats.log import DUPLICATE_WINDOW_S, NatsLog
from podium.store.sqlite import SqliteStore
from tests.nats_cluster import delete_stream, need_nats, stream_name
from tests.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "change-event.v1.json").read_text())
EXAMPLES = json.loads((ROOT / "schemas" / "change-event.v1.example.json").read_text())
T0 = 1_792_800_000
DAY = BoardSpec("day", WindowRule(WindowKind.DAY))
GDAY = BoardSpec("gday", WindowRule(WindowKind.DAY), group_by="country")


class Clock:
    def __init__(self) -> None:
        self.t = time.time()

    def now(self) -> float:
        return self.t


def targets(*specs: BoardSpec) -> list[tuple[Target, BoardSpec]]:
    out = []
    for spec in specs:
        w = spec.rule.window_at(T0 + 100)
        assert w is not None
        out.append((Target(spec.name, w.id, w.start), spec))
    return out


async def record(store: SqliteStore, player: str, match: str, points: int) -> None:
    r = ResultRecord(player, match, "k", "ranked", T0 + 100, 60, points)
    await store.record(r, targets(DAY, GDAY), time.time(), None)


@pytest.fixture
async def stream() -> AsyncIterator[tuple[str, str]]:
    """(the machine's NATS URL, a stream name of this test's own, deleted afterwards)."""
    url = need_nats()
    name = stream_name()
    try:
        yield url, name
    finally:
        await delete_stream([url], name)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore.from_url(f"sqlite:///{tmp_path}/a.db")
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


async def raw_messages(url: str, name: str) -> list[Any]:
    """Every message the stream holds, as a subscriber of our own reads them."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(name)
        out = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            out.append(await js.get_msg(name, seq))
        return out
    finally:
        await nc.close()


async def drain(log: NatsLog) -> list[Message]:
    out: list[Message] = []
    while batch := await log.fetch(100):
        await log.ack(batch)
        out += batch
    return out


def test_the_example_events_validate() -> None:
    assert SCHEMA["$id"] == SCHEMA_ID
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    assert {e["type"] for e in EXAMPLES} == {"total", "profile"}
    for event in EXAMPLES:
        validator.validate(event)
        assert decode(json.dumps(event).encode(), None).player_id == event["playerId"]
    # and the schema refuses what is not an event of this version
    for bad in ({**EXAMPLES[0], "version": 2}, {**EXAMPLES[1], "total": 3}, {"version": 1}):
        assert not validator.is_valid(bad)
    for unreadable in ({**EXAMPLES[0], "version": 2}, {"version": 1}, [1]):
        with pytest.raises(EventError):
            decode(json.dumps(unreadable).encode(), None)


async def test_every_published_event_validates(stream: tuple[str, str], store: SqliteStore) -> None:
    url, name = stream
    clock = Clock()
    log = NatsLog([url], name, clock, partitions=4, outbox=store, source=source_of("sqlite:///a"))
    try:
        await store.set_profile(Profile("p1", "Vex", country="FR"), time.time())
        await record(store, "p1", "m1", 10)
        await record(store, "p2", "m1", 7)
        await store.set_profile(Profile("p1", "Vex", country="DE"), time.time())  # a move
        while await log.relay(100):
            pass
        got = await drain(log)
    finally:
        await log.close()
    messages = await raw_messages(url, name)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    events = [json.loads(m.data) for m in messages]
    for e in events:
        validator.validate(e)
    assert {e["type"] for e in events} == {"total", "profile"}
    assert any(e.get("removed") for e in events)  # p1 left the FR group's board
    ids = [m.headers["Nats-Msg-Id"] for m in messages]
    assert len(set(ids)) == len(ids) == len(got)
    for m, e in zip(messages, events, strict=True):
        assert m.subject == f"{name}.changes.{_partition(e['playerId'], 4)}"


def _partition(player: str, partitions: int) -> int:
    from podium.domain.sharding import bucket_of

    return bucket_of(player) % partitions


async def test_a_relay_that_crashed_before_its_outbox_ack_publishes_nothing_twice(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    url, name = stream
    clock = Clock()

    class CrashBeforeAck:
        """The store's outbox, but the process dies between the publish acks and the
        outbox ack: nothing of the rows is acked."""

        def __getattr__(self, attr: str) -> Any:
            return getattr(store, attr)

        async def ack_changes(self, ids: Any) -> None:
            raise RuntimeError("killed")

    for i in range(5):
        await record(store, f"p{i}", "m1", 3 + i)
    crashed = NatsLog([url], name, clock, partitions=4, outbox=CrashBeforeAck(), source="db1")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        await crashed.relay(100)
    await crashed.close()
    assert len(await raw_messages(url, name)) == 10  # published: 5 players, 2 boards
    assert (await store.outbox_backlog(clock.now()))[0] == 10  # and still in the outbox
    clock.t += 60  # the crashed relay's claim ran out (within the duplicate window)
    assert DUPLICATE_WINDOW_S > 60
    log = NatsLog([url], name, clock, partitions=4, outbox=store, source="db1")
    try:
        assert await log.relay(100) == 10  # published again, and acked this time
        assert (await store.outbox_backlog(clock.now()))[0] == 0
        assert len(await raw_messages(url, name)) == 10  # the stream dropped the duplicates
        assert len(await drain(log)) == 10
    finally:
        await log.close()


async def test_row_ids_of_two_databases_are_two_messages(
    stream: tuple[str, str], store: SqliteStore, tmp_path: Path
) -> None:
    url, name = stream
    other = SqliteStore.from_url(f"sqlite:///{tmp_path}/b.db")
    await other.migrate()
    clock = Clock()
    a = NatsLog([url], name, clock, partitions=4, outbox=store, source=source_of(str(tmp_path)))
    b = NatsLog([url], name, clock, partitions=4, outbox=other, source=source_of(f"{tmp_path}b"))
    try:
        # the same rows (ids 1 and 2) in both databases, the same content but the player
        await record(store, "p1", "m1", 5)
        await record(other, "p2", "m1", 5)
        assert await a.relay(10) == 2 and await b.relay(10) == 2
        got = await drain(a)
        assert sorted((m.player_id, isinstance(m, Change)) for m in got) == [
            ("p1", True),
            ("p1", True),
            ("p2", True),
            ("p2", True),
        ]
    finally:
        await a.close()
        await b.close()
        await other.close()


async def test_the_stream_it_makes(stream: tuple[str, str], store: SqliteStore) -> None:
    url, name = stream
    log = NatsLog([url], name, Clock(), partitions=4, lease_s=7.0, retention_s=3600.0)
    try:
        assert await log.fetch(10) == []  # makes the stream and its consumers
    finally:
        await log.close()
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(name)
        assert info.config.subjects == [f"{name}.changes.>", f"{name}.events.>"]
        assert info.config.duplicate_window == DUPLICATE_WINDOW_S
        assert info.config.max_age == 3600.0
        assert info.config.num_replicas == 1  # one server: one copy
        consumers = sorted(c.name for c in await js.consumers_info(name))
        assert consumers == [f"{name}-changes-{p:02d}" for p in range(4)]
        c = await js.consumer_info(name, f"{name}-changes-02")
        assert c.config.filter_subject == f"{name}.changes.2" and c.config.ack_wait == 7.0
    finally:
        await nc.close()
    # The same stream with another partition count is not this log: refused, not mixed.
    other = NatsLog([url], name, Clock(), partitions=8)
    try:
        with pytest.raises(ConfigError, match="partitions"):
            await other.fetch(10)
    finally:
        await other.close()


async def test_a_durable_consumer_resumes_after_a_restart(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    url, name = stream
    first = NatsLog([url], name, Clock(), partitions=2, outbox=store)
    for i in range(4):
        await record(store, "p1", f"m{i}", 1)
    try:
        await first.relay(100)
        batch = await first.fetch(3)
        await first.ack(batch)
    finally:
        await first.close()
    again = NatsLog([url], name, Clock(), partitions=2)
    try:
        rest = await drain(again)
        assert len(batch) + len(rest) == 8  # each change once: the acked ones are not back
    finally:
        await again.close()


async def test_replay_delivers_again_what_was_committed_since(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    url, name = stream
    clock = Clock()
    log = NatsLog([url], name, clock, partitions=4, outbox=store)
    try:
        await record(store, "p1", "m1", 1)
        await log.relay(100)
        await asyncio.sleep(1.1)  # a clear second between before and since
        since = time.time()
        for i in range(3):
            await record(store, f"q{i}", "m2", 2)
        await log.relay(100)
        assert len(await drain(log)) == 8
        replay = await log.replay(since - 0.2)
        await record(store, "late", "m3", 3)  # after the replay began: not its business
        await log.relay(100)
        again: list[Message] = []
        while batch := await replay.fetch(4):
            await replay.ack(batch)
            again += batch
        await replay.close()
        assert sorted(m.player_id for m in again) == ["q0", "q0", "q1", "q1", "q2", "q2"]
        assert [m.player_id for m in await drain(log)] == ["late", "late"]  # the live one
    finally:
        await log.close()


async def test_an_unreachable_nats_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    # the first connection's bound, shortened from 5 s: nothing answers on the port anyway
    monkeypatch.setattr(podium.log.nats.log, "CONNECT_TIMEOUT_S", 0.5)
    [port] = free_ports(1)
    log = NatsLog([f"nats://127.0.0.1:{port}"], "nowhere", Clock(), partitions=2)
    with pytest.raises(LogUnavailable):
        await log.fetch(10)
    await log.close()


def test_urls_name_every_server() -> None:
    log = NatsLog.from_url("nats://a:4222, b:4223/", "s", Clock())
    assert log._servers == ["nats://a:4222", "nats://b:4223"]
    assert source_of("postgresql://u:secret@db:5432/podium") == source_of(
        "postgresql://u:other@db:5432/podium"
    )
    assert source_of("postgresql://db:5432/podium") != source_of("postgresql://db2:5432/podium")


async def test_what_podium_cannot_read_is_not_delivered(stream: tuple[str, str]) -> None:
    url, name = stream
    log = NatsLog([url], name, Clock(), partitions=1, lease_s=1.0)
    try:
        assert await log.fetch(10) == []  # the stream is made
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            await js.publish(f"{name}.changes.0", b"not json")
            newer = json.dumps({**EXAMPLES[0], "version": 2}).encode()
            await js.publish(f"{name}.changes.0", newer)
            await js.publish(f"{name}.changes.0", json.dumps(EXAMPLES[1]).encode())
        finally:
            await nc.close()
        [readable] = await log.fetch(10)
        assert readable.player_id == EXAMPLES[1]["playerId"]
        await log.ack([readable])
        await asyncio.sleep(1.2)  # past the lease
        # The stranger was taken off the log; the newer version is left for a newer podium:
        # delivered again once the server's timer of its lease fires (a busy machine may put
        # that off a little), and never handed out.
        nc = await nats.connect(url)
        try:
            deadline = time.monotonic() + 10
            while True:
                assert await log.fetch(10) == []
                c = await nc.jetstream().consumer_info(name, f"{name}-changes-00")
                if c.num_redelivered or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert c.num_ack_pending == 1 and c.num_redelivered == 1
        finally:
            await nc.close()
    finally:
        await log.close()


WEBHOOK_SCHEMA = json.loads((ROOT / "schemas" / "webhook-event.v1.json").read_text())


async def test_events_go_on_their_own_subjects_once_under_their_ids(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    """A ban's event and a freeze's (once its sha256 is in) on ``<stream>.events.<type>``,
    the webhook body under ``Nats-Msg-Id`` = the event id; published again after a relay
    died before it marked them, and dropped as duplicates; never delivered to the
    consumers of changes."""
    url, name = stream
    clock = Clock()
    validator = jsonschema.Draft202012Validator(WEBHOOK_SCHEMA)
    await record(store, "p1", "m1", 10)
    await store.ban("p9", "aimbot", time.time())
    day = DAY.rule.window_at(T0 + 100)
    assert day is not None
    assert await store.freeze(DAY, day, 100, time.time())

    class DiesBeforeMarking:
        def __getattr__(self, attr: str) -> Any:
            return getattr(store, attr)

        async def mark_published(self, ids: Any) -> None:
            raise RuntimeError("killed")

    crashed = NatsLog([url], name, clock, partitions=4, outbox=DiesBeforeMarking(), source="db1")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        await crashed.relay(100)
    await crashed.close()
    log = NatsLog([url], name, clock, partitions=4, outbox=store, source="db1")
    try:
        await log.relay(100)  # the ban's event again (the freeze's waits for its sha256)
        await store.set_archive(DAY.name, day.id, "day/x.csv.gz", "ab" * 32)
        assert await log.relay(100) == 1  # the freeze's, now complete
        assert await log.relay(100) == 0  # every event marked: none again
        changes = await drain(log)
    finally:
        await log.close()
    assert {m.player_id for m in changes} == {"p1"}  # the changes' consumers see no event
    got = [m for m in await raw_messages(url, name) if ".events." in m.subject]
    by_id = {m.headers["Nats-Msg-Id"]: m for m in got}
    assert len(got) == len(by_id) == 2  # the re-published ban dropped as a duplicate
    frozen = by_id[f"window.frozen:day:{day.id}"]
    assert frozen.subject == f"{name}.events.window.frozen"
    body = json.loads(frozen.data)
    validator.validate(body)
    assert body["data"]["sha256"] == "ab" * 32 and body["data"]["players"] == 1
    [(ban_id, ban)] = [(i, m) for i, m in by_id.items() if i != f"window.frozen:day:{day.id}"]
    assert ban.subject == f"{name}.events.player.banned" and ban_id.startswith("evt_")
    validator.validate(json.loads(ban.data))
    assert json.loads(ban.data)["data"]["playerId"] == "p9"


async def test_a_stream_made_before_events_is_given_their_subject(
    stream: tuple[str, str], store: SqliteStore
) -> None:
    url, name = stream
    first = NatsLog([url], name, Clock(), partitions=2, outbox=store)
    await first.relay(1)  # makes the stream
    await first.close()
    nc = await nats.connect(url)
    try:  # as a podium from before events made it: the changes' subjects alone
        js = nc.jetstream()
        info = await js.stream_info(name)
        info.config.subjects = [f"{name}.changes.>"]
        await js.update_stream(info.config)
        await store.ban("p9", "aimbot", time.time())
        again = NatsLog([url], name, Clock(), partitions=2, outbox=store)
        try:
            assert await again.relay(10) == 1
        finally:
            await again.close()
        subjects = (await js.stream_info(name)).config.subjects
        assert subjects == [f"{name}.changes.>", f"{name}.events.>"]
    finally:
        await nc.close()
