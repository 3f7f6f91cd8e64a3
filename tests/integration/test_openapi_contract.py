"""The published contract tells the truth: schemathesis, with every one of its checks at its
defaults (none widened, none left out), against a running ``podium serve`` (a temp SQLite
file, on a free port), with a game-server key on the routes that write results, an admin key
on the admin routes and an ops key on the ops figures. Any 5xx, any status, header, content
type or body the OpenAPI document does not describe, any valid request refused or invalid
one accepted, fails.

The document publishes what the settings decide (the configured modes, each with its points
and duration, ``api/contract.py``) and the name rules, so a request it calls valid is one
podium accepts. Three rules of a match no JSON Schema can state are given to the generated
valid matches here, as a game server would: an ``endedAt`` in an open window (the schema is
fixed, time is not), each player once in a match (JSON Schema's ``uniqueItems`` compares
whole items, not one field of them), and entry metadata of at most 512 bytes as UTF-8 JSON
(no keyword bounds an object's encoded size; ``maxLength`` counts a string's characters).
A tournament's run is given an end an hour after its start, now (no keyword compares two
fields), and a recurring one a cron expression with runs shorter than the time between them.
These rules of time are stated in the descriptions of ``endedAt`` and ``endsAt``.

Ids drawn at random name nothing that exists, so an operation fuzzed with them alone is held
only to its 404. Before the run, podium is given a board of each kind, players with results,
tournaments (one open, one ended, one to end), a league cohort, a frozen window and a key to
revoke (``seed``); every other valid case of an operation is sent with those ids in its path
(``_with_real_ids``), and at the end every operation must have answered a 2xx at least
once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import Case
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation

from podium.domain.metadata import METADATA_MAX
from tests.integration.test_crash import _free_port

# a podium process, and a thousand requests generated from the OpenAPI document: over 30
# operations, about four minutes on a busy 2-core machine, past the default 300 s timeout
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLES = 60  # per operation, for each of the positive and negative phases
MIN_REQUESTS = 1000

CONFIG = """
[generation]
max-examples = {examples}

[checks]
enabled = true

[phases.stateful]
enabled = false
"""

TOML = """
[store]
url = "sqlite:///{dir}/podium.db"
[server]
read_rate_per_s = 0
[archive]
dir = "{dir}/standings"
# Two modes, so that the document's one branch per mode is held to the answers too; points
# small enough that no total outgrows a board in a thousand requests.
[[modes]]
name = "default"
max_points = 1000
[[modes]]
name = "ranked"
min_points = -50
max_points = 5000
min_duration_s = 60
max_duration_s = 3600
# The default boards, and a league, so that the cohort routes answer for a board that has
# cohorts as well as for one that has none.
[[boards]]
name = "season"
window = "season"
[[boards]]
name = "week"
window = "week"
[[boards]]
name = "day"
window = "day"
[[boards]]
name = "league"
window = "week"
cohort_size = 30
tiers = ["bronze", "silver", "gold"]
promote = 5
demote = 5
# Split by country, so that the groups route answers; and a board whose window the admin
# routes freeze (the others stay open for the matches).
[[boards]]
name = "countries"
window = "week"
group_by = "country"
[[boards]]
name = "frozen"
window = "day"
# Nothing listens there: a ban's delivery fails within a second, for the admin to retry.
[[webhooks]]
url = "http://127.0.0.1:9/nowhere"
secret = "whsec_Y29udHJhY3QtdGVzdHMtc2VjcmV0"
events = ["player.banned"]
retry_for_s = 0.5
retry_first_s = 0.05
"""


@dataclass
class Ids:
    """What exists on the served podium, by path parameter (``seed``)."""

    window: str  # the frozen board's window, frozen
    run: str  # the ended tournament's run
    cohort: str  # PLAYER's cohort on the league board
    key: str  # a key made to be revoked
    event: str  # an event whose webhook delivery failed
    erasure: str  # the receipt of ERASED's erasure


@dataclass
class Served:
    base_url: str
    game_key: str
    admin_key: str
    ops_key: str
    requests: int = 0
    ids: Ids | None = None
    # Each operation's label, and the first 2xx of each.
    operations: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    positives: Counter[str] = field(default_factory=Counter)
    substituted: Counter[str] = field(default_factory=Counter)


PLAYER = "p_seed_1"  # has results on every board, is a tournament entrant, has friends
BANNED = "p_seed_ban"  # banned and unbanned by the admin routes
HOOKED = "p_seed_hook"  # banned once, its webhook delivery failed (retried by the admin)
FLAGGED = "p_seed_flag"  # a result of theirs flagged, in match JUMP (accepted by the admin)
JUMP = "m_seed_jump"
ERASED = "p_seed_erased"  # erased by the admin (DELETE /v1/admin/players/{playerId}, again)
REJECTED = "p_seed_reject"  # a result of theirs flagged, in match LEAP (rejected by the admin)
LEAP = "m_seed_leap"
OPEN, ENDED, DOOMED = "t_seed_open", "t_seed_ended", "t_seed_doomed"


def seed(served: Served) -> Ids:
    """Players, tournaments, a cohort, a frozen window and a spare key, made through the API
    as a game server and an admin would."""
    game = {"Authorization": f"Bearer {served.game_key}"}
    admin = {"Authorization": f"Bearer {served.admin_key}"}
    now = datetime.now(UTC)
    at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    with httpx.Client(base_url=served.base_url, timeout=30) as c:

        def ok(r: httpx.Response) -> dict[str, Any]:
            assert r.is_success, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
            return r.json() if r.content else {}  # type: ignore[no-any-return]

        players = [PLAYER, "p_seed_2", "p_seed_3", BANNED]
        for p, country in zip(players, ["FR", "FR", "DE", "DE"], strict=True):
            ok(c.put(f"/v1/players/{p}/profile", json={"country": country}, headers=admin))
        ok(c.put(f"/v1/players/{PLAYER}/friends", json={"friends": players[1:3]}, headers=admin))
        for t in (OPEN, ENDED, DOOMED):
            body = {
                "id": t,
                "title": t,
                "modes": ["default", "ranked"],
                "startsAt": at,
                "endsAt": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            ok(c.post("/v1/admin/tournaments", json=body, headers=admin))
            ok(c.post(f"/v1/tournaments/{t}/entrants", json={"playerId": PLAYER}, headers=game))
        match = {
            "mode": "default",
            "endedAt": at,
            "durationSeconds": 60,
            "results": [{"playerId": p, "points": 10 * i} for i, p in enumerate(players, 1)],
        }
        ok(c.post("/v1/matches/m_seed_1/results", json=match, headers=game))
        ok(c.delete(f"/v1/admin/tournaments/{ENDED}", headers=admin))
        [run, *_] = ok(c.get(f"/v1/tournaments/{ENDED}/runs"))["windows"]
        cohort = ok(c.get(f"/v1/boards/league/players/{PLAYER}/cohort"))["cohortId"]
        [window, *_] = ok(c.get("/v1/boards/frozen/windows"))["windows"]
        ok(c.post(f"/v1/admin/boards/frozen/windows/{window['id']}/freeze", headers=admin))
        key = ok(
            c.post(
                "/v1/admin/keys",
                json={"name": "spare", "scope": "game", "modes": ["default"]},
                headers=admin,
            )
        )
        # Five steady results, then one far above them: flagged.
        for who, jump, steady in ((FLAGGED, JUMP, "m_seed_h"), (REJECTED, LEAP, "m_seed_r")):
            for i, points in enumerate([1, 1, 1, 1, 1, 1000]):
                one = {**match, "results": [{"playerId": who, "points": points}]}
                ok(
                    c.post(
                        f"/v1/matches/{jump if points > 1 else f'{steady}{i}'}/results",
                        json=one,
                        headers=game,
                    )
                )
        ok(c.post(f"/v1/admin/players/{HOOKED}/ban", json={"reason": "x"}, headers=admin))
        failed: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while not failed:
            assert time.monotonic() < deadline, "no webhook delivery failed"
            time.sleep(0.1)
            listed = c.get(
                "/v1/admin/webhooks/deliveries", params={"state": "failed"}, headers=admin
            )
            failed = ok(listed)["deliveries"]
        ok(c.put(f"/v1/players/{ERASED}/profile", json={"name": "Gone"}, headers=admin))
        erasure = ok(c.delete(f"/v1/admin/players/{ERASED}", headers=admin))["id"]
        ops = ok(c.get("/openapi.json"))["paths"]
    served.operations = {f"{m.upper()} {path}" for path, ms in ops.items() for m in ms}
    return Ids(window["id"], run["id"], cohort, key["id"], failed[0]["eventId"], erasure)


def _with_real_ids(case: Case, ids: Ids) -> None:
    """The case's path parameters, each replaced by the id of something that exists, chosen
    for what the operation does: the standings and the freeze on the frozen board, the
    cohort on the league, the groups on the board split by country, a ban on a player kept
    for it, the end of a tournament on the one kept for it, the runs on the ended one."""
    path, method = case.operation.path, case.operation.method.upper()
    params = case.path_parameters
    if params is None:
        return
    board = (
        "frozen"
        if "/windows/{window}" in path
        else "league"
        if "cohort" in path
        else "countries"
        if path.endswith("/groups")
        else "season"
    )
    tournament = ENDED if "/runs" in path else DOOMED if method == "DELETE" else OPEN
    real = {
        "board": board,
        "window": ids.window,
        "playerId": BANNED
        if path.endswith("/ban")
        else ERASED
        if (method, path) == ("DELETE", "/v1/admin/players/{playerId}")
        else PLAYER,
        "tournamentId": tournament,
        "run": ids.run,
        "cohortId": ids.cohort,
        "keyId": ids.key,
        "eventId": ids.event,
        "erasureId": ids.erasure,
    }
    if path.endswith("/accept"):  # a flagged result there is; elsewhere, ids drawn
        real |= {"playerId": FLAGGED, "matchId": JUMP}
    if path.endswith("/reject"):  # the other one
        real |= {"playerId": REJECTED, "matchId": LEAP}
    for name in params:
        if name in real:
            params[name] = real[name]
    # What the query's descriptions say and no schema can: a cursor is one podium gave, a
    # group is named on a board split by country (the only one, here, is read through its
    # groups route, which takes none), a window or a run is one of that board's kind or
    # that tournament's. The defaults (the current window, the tournament's own run, the
    # first page) stand in for them.
    query = case.query
    if query is None:
        return
    for name in ("cursor", "window", "run", "group"):
        query.pop(name, None)
    if "board" in query:
        query["board"] = "season"


def _podium(tmp: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "podium", *args, "--config", str(tmp / "podium.toml")],
        cwd=tmp,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("contract")
    (tmp / "podium.toml").write_text(TOML.format(dir=tmp))
    game = _podium(tmp, "keys", "create", "--name", "gs", "--modes", "default,ranked")
    admin = _podium(tmp, "keys", "create", "--name", "admin", "--admin")
    ops = _podium(tmp, "keys", "create", "--name", "ops", "--ops")
    port = _free_port()
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115
    argv = ["serve", "--config", str(tmp / "podium.toml"), "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "podium", *argv],
        cwd=tmp,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, (tmp / "serve.log").read_text()
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "podium serve did not become ready"
        time.sleep(0.1)
    out = Served(base, game, admin, ops)
    try:
        out.ids = seed(out)
        yield out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    print(f"schemathesis sent {out.requests} requests, {out.substituted.total()} with real ids")
    assert out.requests >= MIN_REQUESTS, f"only {out.requests} generated requests"
    # Every operation fuzzed past its 404: each answered a 2xx at least once.
    assert out.operations, "the document listed no operation"
    assert not out.operations - out.answered, sorted(out.operations - out.answered)
    assert b"Traceback" not in (tmp / "serve.log").read_bytes(), (tmp / "serve.log").read_text()


@pytest.fixture(scope="module")
def api_schema(served: Served) -> schemathesis.BaseSchema:
    config = SchemathesisConfig.from_str(CONFIG.format(examples=EXAMPLES))
    return schemathesis.openapi.from_url(f"{served.base_url}/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_every_operation_keeps_its_contract(case: Case, served: Served) -> None:
    # Admin routes take the admin key, the ops figures the ops key; the rest that need one
    # (results) a game server's.
    tags = case.operation.tags or []
    key = (
        served.admin_key
        if "admin" in tags
        else served.ops_key
        if "ops" in tags
        else served.game_key
    )
    served.requests += 1
    label = f"{case.operation.method.upper()} {case.operation.path}"
    real = False
    if case.meta is not None and case.meta.generation.mode.is_positive:
        _as_a_game_server_sends(case)
        # Every other valid case of an operation names things that exist.
        served.positives[label] += 1
        if served.ids is not None and served.positives[label] % 2:
            _with_real_ids(case, served.ids)
            served.substituted[label] += 1
            real = True
    headers = _credential(case, key)
    if real and case.operation.path.endswith("/stream"):
        status = _stream(case, served.base_url, headers)
    else:
        status = case.call_and_validate(
            base_url=served.base_url, headers=headers, timeout=10
        ).status_code
    if 200 <= status < 300:
        served.answered.add(label)


def _stream(case: Case, base_url: str, headers: dict[str, str]) -> int:
    """A live stream of something that exists never ends: its status, type and first page
    are what it promises; any other answer is a whole one, validated as every answer is."""
    with (
        httpx.Client(base_url=base_url, timeout=30) as c,
        c.stream(
            "GET",
            case.formatted_path,
            params=case.query,
            headers={**(case.headers or {}), **headers},
        ) as r,
    ):
        if r.status_code != 200:
            r.read()
            case.validate_response(r)
            return r.status_code
        assert r.headers["content-type"].startswith("text/event-stream"), r.headers
        for line in r.iter_lines():
            if line.startswith("data: "):
                page = json.loads(line.removeprefix("data: "))
                assert isinstance(page, dict) and "tickAt" in page, page
                return r.status_code
    raise AssertionError(f"{case.formatted_path}: the stream ended before its first page")


def _credential(case: Case, key: str) -> dict[str, str]:
    """The key for the route, unless the case is one whose headers schemathesis made
    invalid on purpose (the credential left out, or not a string): that case is sent as
    generated and must be refused. Putting the key back would send a request that is valid
    but for what schemathesis calls negligible (an extra query parameter, which podium
    ignores as most services do) and have its 200 judged as negative data accepted."""
    meta = case.meta
    if meta is not None and meta.generation.mode.is_negative:
        headers = meta.components.get(ParameterLocation.HEADER)
        if headers is not None and headers.mode.is_negative:
            return {}
    return {"Authorization": f"Bearer {key}"}


def _as_a_game_server_sends(case: Case) -> None:
    """A valid match as a game server sends one: ended now, each player once, metadata
    that fits."""
    body = case.body
    if case.operation.method.upper() != "POST" or not isinstance(body, dict):
        return
    if case.operation.path == "/v1/admin/tournaments":
        # A run ends after it starts, and stays inside the years a date can name.
        start = datetime.now(UTC)
        body["startsAt"] = start.strftime("%Y-%m-%dT%H:%M:%SZ")
        body["endsAt"] = (start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        if _too_large(body.get("metadata")):
            del body["metadata"]
        if body.get("schedule") is not None or body.get("durationSeconds") is not None:
            body.update(schedule="0 * * * *", durationSeconds=1800)  # a cron, runs apart
        return
    if not case.operation.path.startswith("/v1/matches/"):
        return
    if isinstance(body.get("endedAt"), str):
        body["endedAt"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    results = body.get("results")
    if isinstance(results, list):
        seen: dict[object, object] = {}
        for r in results:
            seen.setdefault(r.get("playerId") if isinstance(r, dict) else id(r), r)
        body["results"] = list(seen.values())
        for r in body["results"]:
            if isinstance(r, dict) and _too_large(r.get("metadata")):
                del r["metadata"]


def _too_large(metadata: object) -> bool:
    if not isinstance(metadata, dict):
        return False
    text = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass")) > METADATA_MAX
