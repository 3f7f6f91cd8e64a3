"""The second probe's findings on names and on the contract (issue 22), each held here: key
names that forge a line of ``podium keys list``, modes stored twice, profile names that show
nothing or drown in combining marks, modes and name rules missing from the OpenAPI document,
a 413 it did not declare, an epoch in a 409's detail, a window not yet begun served as an
empty page, and a friends board of an unknown player answered 200 while its rank is a 404."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import jsonschema
from typer.testing import CliRunner

from podium.cli.main import app as cli
from podium.domain.windows import WindowKind, WindowRule
from tests.integration.conftest import Api

FORGED = [
    "gs\n3f9a0c1d2e4b  admin  2026-01-01T00:00:00Z  -  root",
    "gs\x1b[2K\x1b[1Aadmin",  # an escape sequence: erase the line, move up
    "evil\u202enimda",  # a bidi override: reads "admin" backwards
]
INVISIBLE = {
    "\u200d": "U+200D",  # a zero-width joiner alone
    "\u3164": "visible",  # the Hangul filler
    "\u2800": "visible",  # the braille blank
    "\U000e0041\U000e0042": "tag characters",  # tags outside a flag
    "\u3164 \u2800": "visible",
    "a" + "\u0301" * 5: "at most 4 combining marks",
    "\u0301a": "no character to sit on",
}
SHOWN = [
    "Zoë",
    "e\u0301\u0302\u0303\u0304",  # four marks on one character: the most allowed
    "Ada 👩\u200d💻",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # the flag of Scotland
    "1\ufe0f\u20e3",  # a keycap
]


def problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return r.json()  # type: ignore[no-any-return]


def admin(api: Api) -> dict[str, str]:
    return api.auth(api.admin_key)


async def test_key_names_that_would_forge_a_line_are_refused(api: Api) -> None:
    for name in FORGED:
        r = await api.client.post(
            "/v1/admin/keys", json={"name": name, "scope": "admin"}, headers=admin(api)
        )
        body = problem(r, 422)
        assert body["errors"][0]["field"] == "name", body
        assert "U+" in body["detail"], body
    names = [
        k["name"]
        for k in (await api.client.get("/v1/admin/keys", headers=admin(api))).json()["keys"]
    ]
    assert not any(n in FORGED for n in names)


async def test_key_names_follow_the_profile_name_rules(api: Api) -> None:
    for name, rule in INVISIBLE.items():
        r = await api.client.post(
            "/v1/admin/keys", json={"name": name, "scope": "ops"}, headers=admin(api)
        )
        body = problem(r, 422)
        assert body["errors"][0]["field"] == "name" and rule in body["detail"], body


async def test_a_keys_modes_are_stored_once_each(api: Api) -> None:
    r = await api.client.post(
        "/v1/admin/keys",
        json={"name": "eu-west", "scope": "game", "modes": ["default", "default"]},
        headers=admin(api),
    )
    assert r.status_code == 201, r.text
    assert r.json()["modes"] == ["default"]
    key, _ = await api.podium.keys.create("twice", ["default", "default", "default"])
    assert key.modes == ("default",)


def test_the_command_line_refuses_a_forged_key_name(tmp_path: Path) -> None:
    config = tmp_path / "podium.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/podium.db"\n')
    runner = CliRunner()
    for name in FORGED:
        out = runner.invoke(
            cli, ["keys", "create", "--name", name, "--admin", "--config", str(config)]
        )
        assert out.exit_code == 1, out.output
        assert "name: must not contain U+" in out.output
    listed = runner.invoke(cli, ["keys", "list", "--config", str(config)])
    assert listed.exit_code == 0 and listed.output.strip() == "", listed.output


async def test_profile_names_must_show_a_glyph_without_a_flood_of_marks(api: Api) -> None:
    for name, rule in INVISIBLE.items():
        r = await api.client.put("/v1/players/p1/profile", json={"name": name}, headers=admin(api))
        body = problem(r, 422)
        assert body["errors"][0]["field"] == "name" and rule in body["detail"], body
    for name in SHOWN:
        r = await api.client.put("/v1/players/p1/profile", json={"name": name}, headers=admin(api))
        assert r.status_code == 204, (name, r.text)


async def test_the_document_publishes_modes_name_rules_and_413(api: Api) -> None:
    doc = (await api.client.get("/openapi.json")).json()
    models = doc["components"]["schemas"]
    assert models["MatchIn"]["properties"]["mode"]["enum"] == ["default"]
    assert models["ResultIn"]["properties"]["points"]["maximum"] == 1_000_000
    assert models["KeyIn"]["properties"]["modes"]["items"]["enum"] == ["default"]
    match = {
        "mode": "0",
        "endedAt": "2026-10-28T19:04:11Z",
        "durationSeconds": 60,
        "results": [{"playerId": "p1", "points": 1}],
    }
    resolver = {"components": doc["components"]}

    def valid(model: str, body: dict[str, Any]) -> bool:
        schema = {**models[model], **resolver}
        return jsonschema.Draft202012Validator(schema).is_valid(body)

    assert not valid("MatchIn", match)  # what the service refuses, the schema calls invalid
    assert valid("MatchIn", {**match, "mode": "default"})
    assert not valid("KeyIn", {"name": "gs", "scope": "game", "modes": ["0"]})
    assert not valid("KeyIn", {"name": "gs", "scope": "game"})
    assert not valid("KeyIn", {"name": "ops", "scope": "ops", "modes": ["default"]})
    assert valid("KeyIn", {"name": "gs", "scope": "game", "modes": ["default"]})
    name = models["ProfileIn"]["properties"]["name"]["anyOf"][0]["pattern"]
    for bad in [*INVISIBLE, *FORGED]:
        assert not re.fullmatch(name, bad), bad
    for good in SHOWN:
        assert re.fullmatch(name, good), good
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            assert "413" in op["responses"], (method, path)


async def test_a_get_with_a_body_over_the_limit_is_the_declared_413(make_api: Any) -> None:
    api = await make_api(server={"max_body_bytes": 1024})
    r = await api.client.request("GET", "/v1/boards/week", content=b"x" * 4096)
    problem(r, 413)
    doc = (await api.client.get("/openapi.json")).json()
    assert "413" in doc["paths"]["/v1/boards/{board}"]["get"]["responses"]


async def test_a_conflicts_detail_gives_endedAt_in_rfc3339(api: Api) -> None:
    ended = time.time() - 60
    assert (await api.submit("m1", [("a", 5)], ended_at=ended)).status_code == 200
    body = problem(await api.submit("m1", [("b", 5)], ended_at=ended - 30), 409)
    was = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended))
    assert f"endedAt {was}" in body["detail"], body
    assert not re.search(r"endedAt \d{9,}", body["detail"]), body


async def test_a_window_not_yet_begun_is_a_404(api: Api) -> None:
    assert (await api.submit("m1", [("a", 5)])).status_code == 200
    await api.settle()
    now = int(time.time())
    week = WindowRule(WindowKind.WEEK)
    this = week.window_at(now)
    assert this is not None and this.end is not None
    future = week.window_at(this.end + 7 * 86_400)
    assert future is not None
    for path in (
        "/v1/boards/week",
        "/v1/boards/week/players/a",
        "/v1/boards/week/players/a/friends",
        "/v1/boards/week/distribution",
    ):
        body = problem(await api.client.get(path, params={"window": future.id}), 404)
        assert future.id in body["detail"] and "yet" in body["detail"], body
    # A window that has begun (this one) is served, and a past one nobody played in is a
    # true empty page: it existed, and no one scored.
    assert (await api.client.get("/v1/boards/week", params={"window": this.id})).status_code == 200
    past = week.window_at(this.start - 52 * 7 * 86_400)
    assert past is not None
    assert (await api.page("week", window=past.id))["entries"] == []


async def test_friends_of_an_unknown_player_are_a_404_as_their_rank_is(api: Api) -> None:
    assert (await api.submit("m1", [("a", 5), ("b", 7)])).status_code == 200
    await api.settle()
    problem(await api.client.get("/v1/boards/week/players/nobody"), 404)
    body = problem(await api.client.get("/v1/boards/week/players/nobody/friends"), 404)
    assert "nobody" in body["detail"], body
    # A player with friends and no total of their own yet sees their friends.
    r = await api.client.put(
        "/v1/players/new/friends", json={"friends": ["a", "b"]}, headers=admin(api)
    )
    assert r.status_code == 204, r.text
    r = await api.client.get("/v1/boards/week/players/new/friends")
    assert r.status_code == 200, r.text
    assert [e["playerId"] for e in r.json()["entries"]] == ["b", "a"]
    # And a player on the board with no friends sees themselves.
    r = await api.client.get("/v1/boards/week/players/a/friends")
    assert [e["playerId"] for e in r.json()["entries"]] == ["a"]
