"""Reward and moderation events delivered to a real HTTP receiver on every configuration:
signed as Standard Webhooks sign (the receiver verifies each with standardwebhooks), retried
through a 500, a timeout and a late answer under one event id, each body valid against
``schemas/webhook-event.v1.json``, one window.frozen event however often the window is
frozen, a league's frozen cohort received as a signed cohort.frozen, and no event from a ban
that did not commit. With NATS as the log, every event type on the stream's subjects too."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from podium.domain import events
from podium.domain.windows import WindowKind, WindowRule, to_rfc3339
from podium.service.tournaments import freeze_due
from podium.workers import webhooks
from tests.integration.conftest import KINDS_WITH_SPLIT, Api
from tests.nats_cluster import delete_stream, need_nats, stream_messages, stream_name
from tests.ports import free_port

CONFIG_KINDS = KINDS_WITH_SPLIT
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "webhook-event.v1.json").read_text())
EXAMPLES = json.loads((ROOT / "schemas" / "webhook-event.v1.example.json").read_text())
VALID = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TIMEOUT_S = 3.0  # the endpoint's timeout_s
LATE_S = 0.3  # a late answer: well within the timeout
# The first event the receiver sees is answered 500, then not within the timeout, then late
# (but within it); every other attempt at once.
PLAN = ("500", "timeout", "late")


@dataclass
class Receiver:
    """A webhook endpoint on a free loopback port, in a thread of the test process."""

    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    # (webhook-id, webhook-timestamp, body, what it answered) of every request, in order
    requests: list[tuple[str, str, str, str]] = field(default_factory=list)
    bad_signatures: list[str] = field(default_factory=list)
    planned: str | None = None  # the event id the plan applies to

    def answer(self, event_id: str) -> str:
        with self.lock:
            if self.planned is None:
                self.planned = event_id
            if event_id != self.planned:
                return "ok"
            tried = sum(1 for r in self.requests if r[0] == event_id)
            return PLAN[tried] if tried < len(PLAN) else "ok"

    def delivered(self) -> dict[str, dict[str, Any]]:
        """Each event answered 2xx, by id: its body, parsed."""
        with self.lock:
            return {i: json.loads(b) for i, _, b, how in self.requests if how in ("ok", "late")}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rx = Receiver()
    verifier = Webhook(SECRET)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"])).decode()
            headers = {k: v for k, v in self.headers.items()}
            try:
                verifier.verify(body, headers)
            except WebhookVerificationError as e:
                rx.bad_signatures.append(str(e))
                self.send_response(400)
                self.end_headers()
                return
            event_id = self.headers["webhook-id"]
            how = rx.answer(event_id)
            with rx.lock:
                rx.requests.append((event_id, self.headers["webhook-timestamp"], body, how))
            if how == "timeout":
                time.sleep(TIMEOUT_S + 1)  # the sender has given up by now
            elif how == "late":
                time.sleep(LATE_S)
            try:
                self.send_response(500 if how == "500" else 204)
                self.end_headers()
            except OSError:
                pass  # the sender hung up: it timed out

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    rx.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/podium"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield rx
    server.shutdown()
    server.server_close()


def hook(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "url": url,
        "secret": SECRET,
        "events": ["window.frozen", "player.banned", "player.flagged"],
        "timeout_s": TIMEOUT_S,
        "retry_first_s": 0.1,  # so the retries come within a second or two, not minutes
        **extra,
    }


async def wait_for(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Poll until ``check`` is truthy, with a generous deadline (retries, a timeout)."""
    deadline = time.monotonic() + timeout
    while not (out := await check()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return out


async def all_deliveries(api: Api, **params: Any) -> list[dict[str, Any]]:
    """Every delivery the admin route lists, a page of one at a time (the cursor walked)."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": 1, **params, **({"cursor": cursor} if cursor else {})}
        r = await api.client.get(
            "/v1/admin/webhooks/deliveries", params=query, headers=api.auth(api.admin_key)
        )
        assert r.status_code == 200, r.text
        out += r.json()["deliveries"]
        cursor = r.json().get("next")
        if cursor is None:
            return out


async def _cup(api: Api, now: float, **more: Any) -> str:
    """A live tournament "cup" of mode default, from two minutes ago for an hour, made
    through the admin API (``more``: any other fields); its open run's id."""
    body = {
        "id": "cup",
        "title": "The Cup",
        "modes": ["default"],
        "startsAt": to_rfc3339(now - 120),
        "endsAt": to_rfc3339(now + 3600),
        **more,
    }
    made = await api.client.post(
        "/v1/admin/tournaments", json=body, headers=api.auth(api.admin_key)
    )
    assert made.status_code == 201, made.text
    return str(made.json()["run"])


def test_every_example_is_valid() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for example in EXAMPLES:
        VALID.validate(example)
    assert {e["type"] for e in EXAMPLES} == {
        "window.frozen",
        "tournament.ended",
        "cohort.frozen",
        "player.banned",
        "player.flagged",
    }


@pytest.mark.slow
async def test_events_are_delivered_signed_and_retried_under_one_id(
    make_api: Callable[..., Any], receiver: Receiver, tmp_path: Path
) -> None:
    api: Api = await make_api(
        webhooks=[hook(receiver.url)], archive={"dir": str(tmp_path / "standings")}
    )
    now = time.time()
    day = WindowRule(WindowKind.DAY).window_at(int(now))
    assert day is not None
    # A jump far above the player's last five results: accepted, and flagged.
    for i in range(5):
        r = await api.submit(f"m{i}", [("steady", 10), ("other", 20 + i)], ended_at=now)
        assert r.status_code == 200, r.text
    r = await api.submit("m-jump", [("steady", 400_000), ("other", 1)], ended_at=now)
    assert r.status_code == 200, r.text
    admin = api.auth(api.admin_key)
    r = await api.client.post(
        "/v1/admin/players/cheat/ban", json={"reason": "aimbot"}, headers=admin
    )
    assert r.status_code == 204, r.text
    # Banned again while banned: the reason changes, no second event.
    r = await api.client.post(
        "/v1/admin/players/cheat/ban", json={"reason": "again"}, headers=admin
    )
    assert r.status_code == 204, r.text
    # Frozen three times over, two through the API and once by the store itself: one event.
    freeze = f"/v1/admin/boards/day/windows/{day.id}/freeze"
    assert (await api.client.post(freeze, headers=admin)).status_code == 200
    assert (await api.client.post(freeze, headers=admin)).status_code == 200
    spec = api.podium.settings.board("day")
    assert spec is not None
    assert not await api.backends.store.freeze(spec, day, spec.exact_top, time.time())

    async def three() -> dict[str, dict[str, Any]] | None:
        got = receiver.delivered()
        return got if len(got) == 3 else None

    got = await wait_for(three)
    assert got, f"not every event was delivered: {receiver.requests}"
    assert not receiver.bad_signatures
    by_type = {body["type"]: (event_id, body) for event_id, body in got.items()}
    assert set(by_type) == {"window.frozen", "player.banned", "player.flagged"}
    for body in got.values():
        VALID.validate(body)

    frozen_id, frozen = by_type["window.frozen"]
    assert frozen_id == events.window_frozen_id("day", day.id)
    info = (await api.podium.lifecycle.frozen("day"))[day.id]
    data = frozen["data"]
    assert data["sha256"] == info.checksum and data["players"] == 2
    assert data["standings"] == f"/v1/boards/day/windows/{day.id}/standings"
    assert [(e["rank"], e["playerId"], e["points"]) for e in data["top"]] == [
        (1, "steady", 400_050),
        (2, "other", 111),
    ]
    _, flagged = by_type["player.flagged"]
    assert flagged["data"]["playerId"] == "steady" and flagged["data"]["matchId"] == "m-jump"
    assert flagged["data"]["reason"].startswith("jump")
    _, banned = by_type["player.banned"]
    assert banned["data"]["playerId"] == "cheat" and banned["data"]["reason"] == "aimbot"

    # The planned event: a 500, a timeout, a late answer, all under one id and one body.
    with receiver.lock:
        tries = [r for r in receiver.requests if r[0] == receiver.planned]
    assert [how for *_, how in tries] == list(PLAN)
    assert len({body for _, _, body, _ in tries}) == 1

    async def settled() -> list[dict[str, Any]] | None:
        listed = await all_deliveries(api)
        return listed if all(d["state"] == "delivered" for d in listed) else None

    listed = await wait_for(settled, timeout=30)
    assert listed, "a delivery the receiver answered 2xx is not marked delivered"
    assert len(listed) == 3  # one event per change, one delivery per event and endpoint
    attempts = {d["eventId"]: d["attempts"] for d in listed}
    assert attempts.pop(receiver.planned) == 3
    assert set(attempts.values()) == {1}
    for d in listed:
        assert d["endpoint"] == receiver.url and d["lastStatus"] == 204
        assert "nextAttemptAt" not in d and "deliveredAt" in d
    assert await all_deliveries(api, state="pending") == []
    assert len(await all_deliveries(api, state="delivered")) == 3


async def test_a_tournament_run_ends_in_one_tournament_ended_event(
    make_api: Callable[..., Any], receiver: Receiver, tmp_path: Path
) -> None:
    """Ended early by the admin, frozen again by the admin, the freezer's pass and the store
    itself: one tournament.ended, valid against the schema, carrying the tournament, its
    run, the top of its final standings with ranks, and the standings file's sha256."""
    receiver.planned = "none"  # every attempt answered at once: retries are tested above
    api: Api = await make_api(
        webhooks=[hook(receiver.url, events=["tournament.ended", "window.frozen"])],
        archive={"dir": str(tmp_path / "standings")},
    )
    admin = api.auth(api.admin_key)
    now = time.time()
    run = await _cup(api, now, ties="shared", category="weekly", metadata={"prizes": [100, 50]})
    r = await api.submit("m1", [("a", 30), ("b", 30), ("c", 10)], ended_at=now - 60)
    assert r.status_code == 200, r.text
    assert r.json()["players"][0]["tournaments"] == {"cup": {"points": 30}}

    ended = await api.client.delete("/v1/admin/tournaments/cup", headers=admin)
    assert ended.status_code == 200, ended.text
    again = await api.client.delete("/v1/admin/tournaments/cup", headers=admin)
    assert again.status_code == 200, again.text
    t = await api.podium.tournaments.get("cup")
    spec = t.spec()
    w = spec.rule.parse(run)
    froze, info = await api.podium.lifecycle.freeze(spec, w)
    assert not froze
    assert await freeze_due(api.backends.store, api.podium.lifecycle, api.podium.clock) == 0
    assert not await api.backends.store.freeze(spec, w, spec.exact_top, time.time())

    async def one() -> dict[str, dict[str, Any]] | None:
        return receiver.delivered() or None

    got = await wait_for(one)
    assert got, f"no event was delivered: {receiver.requests}"
    await asyncio.sleep(1.0)  # time for a second event, if one were (wrongly) written
    got = receiver.delivered()
    assert list(got) == [events.tournament_ended_id("cup", run)], got
    [(body_id, body)] = got.items()
    VALID.validate(body)
    assert body["type"] == "tournament.ended" and not receiver.bad_signatures
    data = body["data"]
    assert (data["tournament"], data["run"], data["title"]) == ("cup", run, "The Cup")
    assert (data["category"], data["metadata"]) == ("weekly", {"prizes": [100, 50]})
    assert data["players"] == 3 and data["sha256"] == info.checksum
    assert data["standings"] == f"/v1/tournaments/cup/runs/{run}/standings"
    # shared ranks on equal points; equal scores in the board's order of ids (invariant 4)
    assert [(e["position"], e["rank"], e["playerId"], e["points"]) for e in data["top"]] == [
        (1, 1, "b", 30),
        (2, 1, "a", 30),
        (3, 3, "c", 10),
    ]
    listed = await all_deliveries(api)
    assert [(d["type"], d["eventId"]) for d in listed] == [("tournament.ended", body_id)]
    # the link is the run's standings file, the very bytes the sha256 is of
    headers = {"Accept-Encoding": "gzip"}
    async with api.client.stream("GET", data["standings"], headers=headers) as file:
        assert file.status_code == 200 and file.headers["content-encoding"] == "gzip"
        raw = b"".join([chunk async for chunk in file.aiter_raw()])
    assert hashlib.sha256(raw).hexdigest() == data["sha256"]


@pytest.fixture
async def nats_stream() -> AsyncIterator[tuple[str, str]]:
    """(the machine's NATS URL, a stream name of this test's own, deleted afterwards)."""
    url = need_nats()
    name = stream_name()
    try:
        yield url, name
    finally:
        await delete_stream([url], name)


async def stream_events(url: str, name: str) -> list[Any]:
    """Every message on the stream's events subjects, as a subscriber of our own reads them."""
    messages = await stream_messages(url, name, missing_ok=True)  # none before it is made
    return [m for m in messages if m.subject.startswith(f"{name}.events.")]


async def test_events_go_on_the_nats_stream_when_it_is_the_log(
    nats_stream: tuple[str, str], make_api: Callable[..., Any], tmp_path: Path
) -> None:
    """With NATS as the log the relay puts each event on ``<stream>.events.<type>`` too,
    from the database it was written on (a freeze's on the home of a split store, a ban's
    on the player's), the webhook body under the event's id, and no webhook configured."""
    url, name = nats_stream
    api: Api = await make_api(
        log={"url": url, "stream": name}, archive={"dir": str(tmp_path / "standings")}
    )
    now = time.time()
    day = WindowRule(WindowKind.DAY).window_at(int(now))
    assert day is not None
    r = await api.submit("m1", [("a", 10), ("b", 20)], ended_at=now)
    assert r.status_code == 200, r.text
    admin = api.auth(api.admin_key)
    r = await api.client.post("/v1/admin/players/c/ban", json={"reason": "aimbot"}, headers=admin)
    assert r.status_code == 204, r.text
    freeze = f"/v1/admin/boards/day/windows/{day.id}/freeze"
    assert (await api.client.post(freeze, headers=admin)).status_code == 200

    async def both() -> list[Any] | None:
        got = await stream_events(url, name)
        return got if len(got) >= 2 else None

    got = await wait_for(both)
    assert got, "the events did not reach the stream"
    by_type = {m.subject.removeprefix(f"{name}.events."): m for m in got}
    assert len(got) == 2 and set(by_type) == {"window.frozen", "player.banned"}
    for m in got:
        VALID.validate(json.loads(m.data))
    frozen = by_type["window.frozen"]
    assert frozen.headers["Nats-Msg-Id"] == events.window_frozen_id("day", day.id)
    data = json.loads(frozen.data)["data"]
    info = (await api.podium.lifecycle.frozen("day"))[day.id]
    assert data["sha256"] == info.checksum and data["players"] == 2
    assert json.loads(by_type["player.banned"].data)["data"]["playerId"] == "c"


class Ahead:
    """The real time, ``by`` seconds ahead: a clock past a window's end and late time."""

    def __init__(self, by: float) -> None:
        self.by = by

    def now(self) -> float:
        return time.time() + self.by


LEAGUE = {
    "name": "league",
    "window": "day",
    "cohort_size": 3,
    "tiers": ["bronze", "silver"],
    "promote": 1,
    "demote": 1,
    "freeze_after_s": 60,
}


async def test_tournament_cohort_and_flag_events_go_on_the_nats_stream(
    nats_stream: tuple[str, str],
    make_api: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other three event types on a real JetStream stream, each on its own subject
    (``<stream>.events.<type>``) under its event id, each valid against the schema: a
    tournament ended by the admin, a league's cohorts frozen with their tier moves, a
    result flagged as a jump."""
    url, name = nats_stream
    api: Api = await make_api(
        log={"url": url, "stream": name},
        archive={"dir": str(tmp_path / "standings")},
        boards=[{"name": "day", "window": "day"}, LEAGUE],
    )
    admin = api.auth(api.admin_key)
    now = time.time()
    run = await _cup(api, now)
    # A jump far above the player's last five results: accepted, and flagged.
    for i in range(5):
        r = await api.submit(f"m{i}", [("steady", 10), ("other", 20 + i)], ended_at=now - 60)
        assert r.status_code == 200, r.text
    r = await api.submit("m-jump", [("steady", 400_000), ("other", 1)], ended_at=now - 60)
    assert r.status_code == 200, r.text
    ended = await api.client.delete("/v1/admin/tournaments/cup", headers=admin)
    assert ended.status_code == 200, ended.text
    # The league's day closed and past its late time: its cohorts freeze (the freezer's
    # pass, on a clock two days ahead; the roles of this app keep the real one).
    window = WindowRule(WindowKind.DAY).window_at(int(now - 60))
    assert window is not None
    # A cohort's live members are read off the board, which takes the results from the
    # stream a moment after they are stored: wait until it shows everyone the store
    # placed in this player's cohort.
    seats = await api.podium.leagues.store.placements("league", window.id, ["steady", "other"])
    seated_with = {p for p, c in seats.items() if c == seats["steady"]}

    async def seated() -> Any:
        c = await api.podium.leagues.of_player("league", "steady", window.id)
        return c if {m.player_id for m in c.members} == seated_with else None

    placed = await wait_for(seated)
    assert placed, "the board never showed the player in their cohort"
    monkeypatch.setattr(api.podium.leagues, "clock", Ahead(2 * 86_400))
    froze = await api.podium.leagues.freeze_due()
    assert froze >= 1  # "steady" and "other": one cohort, or two on two lock stripes

    async def every() -> list[Any] | None:
        got = await stream_events(url, name)
        return got if len(got) >= 2 + froze else None

    got = await wait_for(every)
    assert got, f"the events did not reach the stream: {await stream_events(url, name)}"
    assert len(got) == 2 + froze, [m.subject for m in got]
    by_type: dict[str, dict[str, dict[str, Any]]] = {}  # by type, by event id (Nats-Msg-Id)
    for m in got:
        body = json.loads(m.data)
        VALID.validate(body)
        assert m.subject == f"{name}.events.{body['type']}"
        by_type.setdefault(body["type"], {})[m.headers["Nats-Msg-Id"]] = body
    assert sorted(by_type) == ["cohort.frozen", "player.flagged", "tournament.ended"]
    [(cup_id, cup)] = by_type["tournament.ended"].items()
    assert cup_id == events.tournament_ended_id("cup", run)
    assert (cup["data"]["tournament"], cup["data"]["run"], cup["data"]["players"]) == (
        "cup",
        run,
        2,
    )
    [flagged] = by_type["player.flagged"].values()
    assert flagged["data"]["playerId"] == "steady" and flagged["data"]["matchId"] == "m-jump"
    frozen = {b["data"]["cohort"]: (i, b) for i, b in by_type["cohort.frozen"].items()}
    assert len(frozen) == froze and placed.id in frozen
    mine_id, mine = frozen[placed.id]
    assert mine_id == events.cohort_frozen_id("league", placed.id)
    assert (mine["data"]["board"], mine["data"]["window"]) == ("league", window.id)
    assert {m["playerId"] for m in mine["data"]["members"]} == {m.player_id for m in placed.members}


async def test_a_frozen_cohort_is_delivered_to_the_receiver_signed(
    make_api: Callable[..., Any],
    receiver: Receiver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A league's cohort frozen by the freezer's pass reaches a real HTTP endpoint as one
    cohort.frozen, signed (the receiver verifies it with standardwebhooks), under the
    cohort's event id, valid against the schema, with every member's place and next tier."""
    receiver.planned = "none"  # every attempt answered at once: retries are tested above
    api: Api = await make_api(
        webhooks=[hook(receiver.url, events=["cohort.frozen"])],
        archive={"dir": str(tmp_path / "standings")},
        boards=[{"name": "day", "window": "day"}, LEAGUE],
    )
    now = time.time()
    window = WindowRule(WindowKind.DAY).window_at(int(now - 60))
    assert window is not None
    r = await api.submit("m1", [("a", 30), ("b", 20), ("c", 10)], ended_at=now - 60)
    assert r.status_code == 200, r.text
    cohorts = {
        p: await api.podium.leagues.of_player("league", p, window.id) for p in ("a", "b", "c")
    }
    monkeypatch.setattr(api.podium.leagues, "clock", Ahead(2 * 86_400))
    froze = await api.podium.leagues.freeze_due()
    assert froze == len({c.id for c in cohorts.values()}) >= 1  # one, or one a lock stripe

    async def every() -> dict[str, dict[str, Any]] | None:
        got = receiver.delivered()
        return got if len(got) >= froze else None

    got = await wait_for(every)
    assert got, f"not every event was delivered: {receiver.requests}"
    assert not receiver.bad_signatures
    assert set(got) == {events.cohort_frozen_id("league", c.id) for c in cohorts.values()}
    for body in got.values():
        VALID.validate(body)
        assert body["type"] == "cohort.frozen"
    mine = got[events.cohort_frozen_id("league", cohorts["a"].id)]["data"]
    assert (mine["board"], mine["window"], mine["cohort"], mine["tier"]) == (
        "league",
        window.id,
        cohorts["a"].id,
        "bronze",
    )
    assert mine["members"][0]["playerId"] == "a" and mine["members"][0]["points"] == 30
    assert mine["members"][0]["move"] == "up" and mine["members"][0]["nextTier"] == "silver"

    async def delivered() -> list[dict[str, Any]] | None:
        listed = await all_deliveries(api)
        return listed if all(d["state"] == "delivered" for d in listed) else None

    listed = await wait_for(delivered, timeout=30)
    assert listed and {d["type"] for d in listed} == {"cohort.frozen"}, listed
    assert len(listed) == froze


@pytest.mark.slow
async def test_an_endpoint_that_never_answers_is_given_up_on(
    make_api: Callable[..., Any], tmp_path: Path
) -> None:
    """Retried with backoff while its horizon lasts (here eight seconds: on a busy machine
    the first attempt alone came more than a second after the ban), then failed."""
    port = free_port()  # nothing listens there: every attempt is refused
    url = f"http://127.0.0.1:{port}/nowhere"
    api: Api = await make_api(webhooks=[hook(url, retry_for_s=8.0, retry_first_s=0.05)])
    r = await api.client.post(
        "/v1/admin/players/p1/ban", json={"reason": "spam"}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204, r.text

    async def failed() -> list[dict[str, Any]]:
        return await all_deliveries(api, state="failed")

    [d] = await wait_for(failed, timeout=30)
    assert d["type"] == "player.banned" and d["attempts"] >= 2
    assert "lastStatus" not in d and d["lastError"]


@pytest.mark.parametrize("config_kind", ["embedded", "production"], indirect=True)
async def test_a_ban_that_does_not_commit_writes_no_event(api: Api) -> None:
    """The event is part of the ban's own insert: rolled back with it."""
    store: Any = api.backends.store

    def count_sqlite(c: Any) -> int:
        return int(c.execute("SELECT count(*) FROM webhook_events").fetchone()[0])

    class Abort(Exception):
        pass

    if hasattr(store, "run"):  # Postgres

        async def failing(c: Any) -> None:
            await c.execute("INSERT INTO bans VALUES ('p9', 'x', 1.0)")
            assert await c.fetchval("SELECT count(*) FROM webhook_events") == 1
            raise Abort

        with pytest.raises(Abort):
            await store.run(failing)
        counted = await store.run(lambda c: c.fetchval("SELECT count(*) FROM webhook_events"))
    else:  # SQLite: inside the one writer's transaction

        def failing_sqlite(c: Any) -> None:
            c.execute("INSERT INTO bans VALUES ('p9', 'x', 1.0)")
            assert count_sqlite(c) == 1
            raise Abort

        with pytest.raises(Abort):
            await store._write(failing_sqlite)
        counted = await store._read(count_sqlite)
    assert counted == 0
    assert await api.backends.store.banned(["p9"]) == set()


# --- endpoints that misbehave (issue 33) ---------------------------------------------------

HUGE = 100 * 2**20  # an answer's body, declared and sent: far more than is ever kept
TRICKLE_S = 0.2  # a byte of the answer every so often, each read well within any timeout
STALL_CAP_S = 45.0  # a trickle ends by then, so a sender that never gives up fails its test


@dataclass
class Conn:
    """One request a ``RawEndpoint`` answered: its head, its webhook-id, its body, and how
    the connection ended."""

    head: str
    fields: dict[str, str]  # its headers, by lower-case name
    event_id: str
    body: dict[str, Any]
    read_at: float  # monotonic, when the request had been read whole
    sent: int = 0  # bytes of the answer written
    hung_up_at: float | None = None  # when the sender closed the connection, if it did


Answer = Callable[[Conn, asyncio.StreamWriter, asyncio.Event], Any]


class RawEndpoint:
    """A webhook endpoint on a loopback port, served by a raw asyncio server in the test's
    loop, so that it can answer as no well-behaved server would: a header or a body
    trickled a byte at a time, a body of 100 MB. It notes when the sender hangs up (its end
    of the connection read to EOF)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.conns: list[Conn] = []
        self.url = ""
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[Any]] = set()

    async def start(self, path: str = "/hook") -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", free_port())
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}{path}"

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def open(self) -> list[Conn]:
        """The requests whose sender has not hung up yet."""
        return [c for c in self.conns if c.hung_up_at is None]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            fields = dict(line.split(": ", 1) for line in head.split("\r\n")[1:] if ": " in line)
            fields = {k.lower(): v for k, v in fields.items()}
            body = await reader.readexactly(int(fields["content-length"]))
            conn = Conn(head, fields, fields["webhook-id"], json.loads(body), time.monotonic())
            self.conns.append(conn)
            hung_up = asyncio.Event()

            async def watch() -> None:
                try:
                    while await reader.read(65536):
                        pass
                except ConnectionError:
                    pass  # reset: hung up with data unread
                conn.hung_up_at = time.monotonic()
                hung_up.set()

            watcher = asyncio.create_task(watch())
            with contextlib.suppress(ConnectionError, OSError):  # the sender hung up
                await self.answer(conn, writer, hung_up)
            if conn.sent:  # an answer cut short: the sender's hang-up noted, then closed
                await asyncio.wait([watcher], timeout=STALL_CAP_S)
            watcher.cancel()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.tasks.discard(task)


async def trickle(
    conn: Conn, writer: asyncio.StreamWriter, hung_up: asyncio.Event, data: bytes
) -> None:
    """``data`` a byte at a time, one every TRICKLE_S, until the sender hangs up (or the cap)."""
    deadline = time.monotonic() + STALL_CAP_S
    i = 0
    while not hung_up.is_set() and time.monotonic() < deadline:
        writer.write(data[i % len(data) : i % len(data) + 1])
        await writer.drain()
        conn.sent += 1
        i += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hung_up.wait(), TRICKLE_S)


async def trickled_head(conn: Conn, writer: asyncio.StreamWriter, hung_up: asyncio.Event) -> None:
    """A status line and headers that never end."""
    await trickle(conn, writer, hung_up, b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 10_000)


async def trickled_body(conn: Conn, writer: asyncio.StreamWriter, hung_up: asyncio.Event) -> None:
    """A 500 at once, then its body a byte at a time."""
    writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 100000\r\n\r\n")
    await trickle(conn, writer, hung_up, b"slow error ")


def huge(status: str) -> Answer:
    async def answer(conn: Conn, writer: asyncio.StreamWriter, hung_up: asyncio.Event) -> None:
        writer.write(f"HTTP/1.1 {status}\r\nContent-Length: {HUGE}\r\n\r\n".encode())
        chunk = b"x" * 65536
        while conn.sent < HUGE and not hung_up.is_set():
            writer.write(chunk)
            await writer.drain()  # waits while the sender reads nothing more
            conn.sent += len(chunk)

    return answer


async def no_content(conn: Conn, writer: asyncio.StreamWriter, hung_up: asyncio.Event) -> None:
    writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    await writer.drain()


@pytest.fixture
async def endpoints() -> AsyncIterator[Callable[[Answer], Awaitable[RawEndpoint]]]:
    """A factory of started ``RawEndpoint``s, each closed after the test."""
    made: list[RawEndpoint] = []

    async def make(answer: Answer, path: str = "/hook") -> RawEndpoint:
        e = RawEndpoint(answer)
        await e.start(path)
        made.append(e)
        return e

    yield make
    for e in made:
        await e.close()


async def ban(api: Api, player: str) -> None:
    r = await api.client.post(
        f"/v1/admin/players/{player}/ban", json={"reason": "x"}, headers=api.auth(api.admin_key)
    )
    assert r.status_code == 204, r.text


def banned(e: RawEndpoint) -> list[str]:
    """The players whose ban event reached ``e``, in the order they came."""
    return [c.body["data"]["playerId"] for c in e.conns]


async def test_of_a_huge_answer_only_a_bounded_prefix_is_read(
    make_api: Callable[..., Any], endpoints: Callable[[Answer], Awaitable[RawEndpoint]]
) -> None:
    """A 100 MB answer, a 500 or a 2xx: the sender keeps a few hundred characters of the
    failure's body, hangs up, and the endpoint never gets to send the rest."""
    failing = await endpoints(huge("500 Internal Server Error"))
    fine = await endpoints(huge("200 OK"))
    api: Api = await make_api(
        webhooks=[hook(failing.url, retry_first_s=3600), hook(fine.url, retry_first_s=3600)]
    )
    await ban(api, "p1")

    async def both_hung_up() -> bool:
        return all(e.conns and e.conns[0].hung_up_at for e in (failing, fine))

    assert await wait_for(both_hung_up), [(e.url, e.conns) for e in (failing, fine)]
    for e in (failing, fine):
        assert e.conns[0].sent < HUGE  # hung up before the end: the rest was never read

    async def settled() -> list[dict[str, Any]] | None:
        listed = await all_deliveries(api)
        return listed if all(d["attempts"] == 1 and "lastStatus" in d for d in listed) else None

    listed = {d["endpoint"]: d for d in await wait_for(settled, timeout=30)}
    assert listed[fine.url]["state"] == "delivered" and listed[fine.url]["lastStatus"] == 200
    failed = listed[failing.url]
    assert failed["state"] == "pending" and failed["lastStatus"] == 500
    assert failed["lastError"].startswith("answered 500: xxxx")
    assert len(failed["lastError"]) <= webhooks.ERROR_CHARS


async def test_timeout_s_is_a_deadline_for_the_whole_attempt(
    make_api: Callable[..., Any], endpoints: Callable[[Answer], Awaitable[RawEndpoint]]
) -> None:
    """An answer trickled a byte at a time, each byte well within ``timeout_s`` of the last,
    is given up at ``timeout_s`` after the attempt began: its head (no answer) or its body
    (the status and what came of the body)."""
    head = await endpoints(trickled_head)
    body = await endpoints(trickled_body)
    api: Api = await make_api(
        webhooks=[
            hook(head.url, timeout_s=1, retry_first_s=3600),
            hook(body.url, timeout_s=1, retry_first_s=3600),
        ]
    )
    await ban(api, "p1")

    async def both_hung_up() -> bool:
        return all(e.conns and e.conns[0].hung_up_at for e in (head, body))

    assert await wait_for(both_hung_up), "the sender still reads a trickled answer"
    for e in (head, body):
        conn = e.conns[0]
        assert conn.hung_up_at is not None
        # given up at 1 s; 10 s is a generous bound on a loaded machine, far below the
        # 45 s the trickle lasts
        assert conn.hung_up_at - conn.read_at < 10, conn.hung_up_at - conn.read_at

    async def settled() -> dict[str, dict[str, Any]] | None:
        listed = {d["endpoint"]: d for d in await all_deliveries(api)}
        return listed if all("lastError" in d for d in listed.values()) else None

    listed = await wait_for(settled, timeout=30)
    assert listed and listed[head.url]["lastError"] == "no answer within 1 s"
    assert "lastStatus" not in listed[head.url]
    assert listed[body.url]["lastStatus"] == 500
    assert listed[body.url]["lastError"].startswith("answered 500: slow")
    assert all(d["state"] == "pending" and d["attempts"] == 1 for d in listed.values())


async def test_a_stalled_endpoint_delays_only_its_own_events(
    make_api: Callable[..., Any], endpoints: Callable[[Answer], Awaitable[RawEndpoint]]
) -> None:
    """While one endpoint holds an attempt (it trickles its answer, within its long
    timeout), another endpoint gets the events that come after, at once."""
    slow = await endpoints(trickled_head)
    fast = await endpoints(no_content)
    api: Api = await make_api(
        webhooks=[hook(slow.url, timeout_s=120), hook(fast.url, timeout_s=120)]
    )
    await ban(api, "p1")

    async def first() -> bool:
        return bool(slow.conns) and banned(fast) == ["p1"]

    assert await wait_for(first), (banned(slow), banned(fast))
    await ban(api, "p2")

    async def second() -> bool:
        return banned(fast) == ["p1", "p2"]

    assert await wait_for(second, timeout=30), "the second event waits on the slow endpoint"
    # ... and it came while the slow endpoint still held its first attempt, which the sender
    # has not given up: the slow endpoint's own next event waits behind it.
    assert banned(slow) == ["p1"] and slow.open() == slow.conns


async def test_an_endpoints_credentials_are_used_but_never_shown_nor_logged(
    make_api: Callable[..., Any],
    endpoints: Callable[..., Awaitable[RawEndpoint]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A url's password and token are sent to the endpoint, and are in none of the admin's
    list (the endpoint, the error that echoed them, the cursor), nor in any log line."""
    caplog.set_level(logging.INFO)
    password, token = "pw-s3cret-value", "tok-s3cret-value"

    async def refuse(conn: Conn, writer: asyncio.StreamWriter, hung_up: asyncio.Event) -> None:
        said = conn.head.split("\r\n")[0].encode()  # the request line, its query in it
        writer.write(
            b"HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
            % len(said)
        )
        writer.write(said)
        await writer.drain()

    plain = await endpoints(no_content)
    guarded = await endpoints(refuse, f"/hook?token={token}&x=1")
    url = guarded.url.replace("http://", f"http://hooker:{password}@")
    shown = guarded.url.replace("http://", "http://hooker:***@").replace(token, "***")
    api: Api = await make_api(
        webhooks=[
            hook(url, retry_first_s=0.05, retry_for_s=0.5),
            # a second delivery of the same event, so that a page of one has a cursor
            hook(plain.url),
        ]
    )
    await ban(api, "p1")

    async def failed() -> list[dict[str, Any]]:
        return await all_deliveries(api, state="failed")

    assert await wait_for(failed), "the guarded endpoint's delivery was not given up"
    # The endpoint was sent the credentials of its url.
    conn = guarded.conns[0]
    secret = base64.b64encode(f"hooker:{password}".encode()).decode()
    assert conn.fields["authorization"] == f"Basic {secret}"
    assert f"?token={token}&x=1 " in conn.head

    pages = []
    cursor = None
    while True:
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        r = await api.client.get(
            "/v1/admin/webhooks/deliveries", params=params, headers=api.auth(api.admin_key)
        )
        assert r.status_code == 200, r.text
        pages.append(r.text)
        cursor = r.json().get("next")
        if cursor is None:
            break
    listed = [d for p in pages for d in json.loads(p)["deliveries"]]
    assert sorted(d["endpoint"] for d in listed) == sorted([shown, plain.url])
    [mine] = [d for d in listed if d["endpoint"] == shown]
    assert mine["state"] == "failed" and mine["lastStatus"] == 401
    assert mine["lastError"] == "answered 401: POST /hook?token=***&x=1 HTTP/1.1"
    for secret_text in (password, token):
        for page in pages:
            assert secret_text not in page and secret_text.encode().hex() not in page
        for record in caplog.records:
            assert secret_text not in record.getMessage(), record.getMessage()
    assert any(shown in r.getMessage() for r in caplog.records)  # named, redacted
