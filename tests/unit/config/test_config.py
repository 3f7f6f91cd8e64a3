"""Settings (docs/architecture.md §3.1): defaults, the TOML file, environment overrides, and
clear errors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from pydantic import AwareDatetime

from podium.config import settings as config
from podium.config.settings import DEFAULT_SEASON_START, Settings, load, parse
from podium.domain.boards import Aggregate, Order, Ties
from podium.domain.models import Mode
from podium.domain.windows import WEEK, WindowKind
from podium.errors import ConfigError

SEPT_7_2026 = 1_788_739_200  # 2026-09-07T00:00:00Z
JAN_5_2026 = 1_767_571_200  # 2026-01-05T00:00:00Z

FULL_TOML = """
[server]
host = "0.0.0.0"
port = 8080

[store]
url = "postgresql://podium@db:5432/podium"
shards = ["postgresql://a/podium", "postgresql://b/podium"]

[index]
url = "redis://cache:6379/0"
shards = 16

[log]
url = "nats://bus:4222"

[[modes]]
name = "ranked-duo"
min_points = 0
max_points = 500
min_duration_s = 60
max_duration_s = 3600
max_results_per_player_per_hour = 30

[[modes]]
name = "casual"

[[boards]]
name = "week"
window = "week"
aggregate = "sum"
order = "desc"
ties = "first"
exact_top = 10000
freeze_after_s = 600
modes = ["ranked-duo"]

[[boards]]
name = "season"
window = "season"
season_start = "2026-09-07T00:00:00Z"
season_weeks = 13

[[boards]]
name = "speedrun"
window = "all"
aggregate = "best"
order = "asc"
ties = "shared"
exact_top = 500

[archive]
dir = "/var/lib/podium/standings"
"""


def errors(raw: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(raw, env or {})
    return str(info.value)


# --- defaults ------------------------------------------------------------------------------


def test_defaults_with_no_file() -> None:
    s = load(None, env={})
    assert s.modes == (Mode("default", 0, 1_000_000),)
    assert s.mode("default") == Mode("default", min_points=0, max_points=1_000_000)
    assert [b.name for b in s.boards] == ["season", "week", "day"]
    assert [b.rule.kind for b in s.boards] == [WindowKind.SEASON, WindowKind.WEEK, WindowKind.DAY]
    for b in s.boards:
        assert (b.aggregate, b.order, b.ties) == (Aggregate.SUM, Order.DESC, Ties.FIRST)
        assert b.modes is None and b.counts("default")
    season = s.board("season")
    assert season is not None
    assert season.rule.season_start == JAN_5_2026
    assert DEFAULT_SEASON_START == "2026-01-05T00:00:00Z"
    assert season.rule.season_weeks == 13
    assert s.store.url.startswith("sqlite:///")
    assert s.index.url == "memory://"
    assert s.log.url == "outbox://"
    assert (s.server.host, s.server.port) == ("127.0.0.1", 8000)
    assert s.archive.dir == "standings"


def test_parse_of_nothing_equals_load_of_nothing() -> None:
    assert parse({}) == load(None, env={}) == parse({}, {})


def test_settings_are_frozen() -> None:
    s = parse({})
    with pytest.raises(AttributeError):
        s.server.port = 1  # type: ignore[misc]


def test_podium_config_env_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "podium.toml"
    path.write_text("[server]\nport = 8123\n")
    assert load(env={"PODIUM_CONFIG": str(path)}).server.port == 8123


# --- a full file ---------------------------------------------------------------------------


def test_full_file(tmp_path: Path) -> None:
    path = tmp_path / "podium.toml"
    path.write_text(FULL_TOML)
    s = load(path, env={})
    assert (s.server.host, s.server.port) == ("0.0.0.0", 8080)
    assert s.store.url == "postgresql://podium@db:5432/podium"
    assert s.store.shards == ("postgresql://a/podium", "postgresql://b/podium")
    assert (s.index.url, s.index.shards) == ("redis://cache:6379/0", 16)
    assert s.log.url == "nats://bus:4222"
    assert s.archive.dir == "/var/lib/podium/standings"

    assert s.mode("ranked-duo") == Mode("ranked-duo", 0, 500, 60, 3600, 30)
    assert s.mode("casual") == Mode("casual")
    assert s.mode("default") is None  # a file's modes replace the default one

    week = s.board("week")
    assert week is not None
    assert week.rule.kind is WindowKind.WEEK
    assert (week.aggregate, week.order, week.ties) == (Aggregate.SUM, Order.DESC, Ties.FIRST)
    assert (week.exact_top, week.freeze_after_s) == (10_000, 600)
    assert week.modes == ("ranked-duo",)
    assert week.counts("ranked-duo") and not week.counts("casual")

    season = s.board("season")
    assert season is not None
    assert season.rule.season_start == SEPT_7_2026
    assert season.rule.max_length == 13 * WEEK
    assert season.rule.window_at(SEPT_7_2026) is not None
    assert season.rule.window_at(SEPT_7_2026 - 1) is None

    speedrun = s.board("speedrun")
    assert speedrun is not None
    assert (speedrun.aggregate, speedrun.order, speedrun.ties) == (
        Aggregate.BEST,
        Order.ASC,
        Ties.SHARED,
    )
    assert speedrun.exact_top == 500
    assert speedrun.codec.time_bits == 0
    assert s.board("nope") is None


def test_season_start_as_a_toml_datetime(tmp_path: Path) -> None:
    path = tmp_path / "podium.toml"
    path.write_text(
        '[[boards]]\nname = "s"\nwindow = "season"\nseason_start = 2026-09-07T00:00:00Z\n'
    )
    board = load(path, env={}).board("s")
    assert board is not None and board.rule.season_start == SEPT_7_2026


def test_a_section_left_out_keeps_its_default() -> None:
    s = parse({"server": {"port": 9001}})
    default = Settings()
    assert s.server.port == 9001
    assert s.server.host == default.server.host  # the rest of the section too
    assert s.store == default.store
    assert s.index == default.index
    assert s.log == default.log
    assert s.archive == default.archive
    assert [b.name for b in s.boards] == ["season", "week", "day"]
    assert [m.name for m in s.modes] == ["default"]


# --- the environment -----------------------------------------------------------------------


def test_environment_overrides_with_type_coercion() -> None:
    s = parse(
        {"server": {"port": 8080}},
        {
            "PODIUM_SERVER_PORT": "9000",
            "PODIUM_INDEX_URL": "redis://cache:6379/1",
            "PODIUM_INDEX_SHARDS": "4",
            "PODIUM_SERVER_READ_RATE_PER_S": "2.5",
            "PODIUM_STORE_SHARDS": "postgresql://a/p, postgresql://b/p",
        },
    )
    assert s.server.port == 9000 and isinstance(s.server.port, int)
    assert s.index.url == "redis://cache:6379/1"
    assert s.index.shards == 4
    assert s.server.read_rate_per_s == 2.5 and isinstance(s.server.read_rate_per_s, float)
    assert s.store.shards == ("postgresql://a/p", "postgresql://b/p")


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "podium.toml"
    path.write_text(FULL_TOML)
    s = load(path, env={"PODIUM_SERVER_PORT": "9000", "PODIUM_LOG_URL": "outbox://"})
    assert s.server.port == 9000
    assert s.log.url == "outbox://"
    assert s.server.host == "0.0.0.0"  # untouched values still come from the file


def test_unrelated_environment_is_ignored() -> None:
    s = parse({}, {"PODIUM_NOPE_PORT": "1", "HOME": "/root", "PODIUM_SERVER": "x"})
    assert s == parse({})


def test_bad_environment_value_names_the_setting() -> None:
    message = errors({}, {"PODIUM_SERVER_PORT": "eighty"})
    assert "server.port" in message and "eighty" in message


def test_environment_names_in_any_case_flags_and_a_file_that_is_not_a_table() -> None:
    s = parse(
        {"index": {"prefix": "pfx"}},
        {"podium_server_port": "9001", "PODIUM_INDEX_READ_FROM_REPLICAS": "true"},
    )
    assert s.server.port == 9001
    assert s.index.read_from_replicas is True and s.index.prefix == "pfx"
    for no in ("false", "0", "no"):
        assert not parse({}, {"PODIUM_INDEX_READ_FROM_REPLICAS": no}).index.read_from_replicas
    # The environment's section stands in for a file's value that is not a table at all.
    assert parse({"server": "x"}, {"PODIUM_SERVER_PORT": "9000"}).server.port == 9000


# --- errors that name the field ------------------------------------------------------------


def test_unknown_section() -> None:
    message = errors({"sever": {"port": 1}})
    assert "sever" in message and "unknown section" in message


def test_unknown_key_in_a_section() -> None:
    message = errors({"server": {"prot": 1}})
    assert "server.prot" in message and "unknown setting" in message


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"server": {"port": "x"}}, "server.port"),
        ({"server": {"port": -1}}, "server.port"),
        ({"server": {"port": 80.5}}, "server.port"),
        ({"server": {"port": True}}, "server.port"),
        ({"server": {"port": [8000]}}, "server.port"),
        ({"server": {"read_rate_per_s": {"a": 1}}}, "server.read_rate_per_s"),
        ({"server": {"host": 5}}, "server.host"),
        ({"server": {"host": ""}}, "server.host"),
        ({"store": {"shards": 5}}, "store.shards"),
        ({"server": "8000"}, "server"),
    ],
)
def test_wrong_type_names_the_field(raw: dict[str, Any], field: str) -> None:
    assert errors(raw).startswith(f"{field}:")


# --- every setting, given a value of the wrong kind ------------------------------------------


def _kind(hint: Any) -> Any:
    """The type a setting holds, without its ``Annotated`` checks and its ``None``."""
    while True:
        if get_origin(hint) is Annotated:
            hint = get_args(hint)[0]
        elif get_origin(hint) in (Union, UnionType):
            hint = next(a for a in get_args(hint) if a is not type(None))
        else:
            return hint


def _wrong(hint: Any) -> tuple[Any, str]:
    """A value of the wrong kind for a setting of type ``hint``, and what its message must
    say is expected, in the file's words rather than Python's."""
    kind = _kind(hint)
    if kind is bool:
        return "maybe", "expected true or false"
    if kind is int:
        return "many", "expected a whole number"
    if kind is float:
        return "lots", "expected a number"
    if kind is str:
        return 5, "expected a string"
    if kind in (datetime, AwareDatetime):
        return 5, "expected an RFC 3339 UTC time"
    if get_origin(kind) is tuple:
        return 5, "expected a list of"
    if get_origin(kind) is Literal:
        return 5, "expected " + " | ".join(get_args(kind))
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        return 5, "expected " + " | ".join(kind)
    raise AssertionError(f"{hint!r}: a kind of setting this test does not know yet")


Document = Callable[[Any], dict[str, Any]]

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
# What a row of each array of tables needs besides the setting under test (most: a name).
ROW_NEEDS: dict[str, dict[str, Any]] = {
    "webhooks": {"url": "http://127.0.0.1:9/hook", "secret": SECRET, "events": ["window.frozen"]},
    "ingest": {"topic": "matches", "key": "gs"},
}


def _settings() -> Iterator[tuple[str, Document, Any]]:
    """Every setting of the file, read from the model that reads it (so a new one is walked
    too): its name as a message says it, the document that gives it a value, and its type.
    A section or an array of tables is itself a setting, whose wrong value is a number."""

    def section_of(name: str) -> Document:
        return lambda v: {name: v}

    def in_section(name: str, key: str) -> Document:
        return lambda v: {name: {key: v}}

    def in_row(name: str, key: str) -> Document:
        return lambda v: {name: [{**ROW_NEEDS.get(name, {"name": "t"}), key: v}]}

    for name, info in config._File.model_fields.items():
        table = info.annotation
        yield name, section_of(name), table
        if dataclasses.is_dataclass(table):
            rows, at, key_of = table, f"{name}.", in_section
        else:
            assert get_origin(table) is tuple, f"{name}: neither a section nor rows"
            rows, at, key_of = get_args(table)[0], f"{name}[0].", in_row
            required = {
                f.name
                for f in dataclasses.fields(rows)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            }
            needs = set(ROW_NEEDS.get(name, {"name": "t"}))
            assert required == needs, f"{name}: rows need {required}; fill them in ROW_NEEDS"
        assert isinstance(rows, type) and dataclasses.is_dataclass(rows)
        hints = get_type_hints(rows, include_extras=True)
        for f in dataclasses.fields(rows):
            yield at + f.name, key_of(name, f.name), hints[f.name]


SETTINGS = list(_settings())


@pytest.mark.parametrize(("where", "document", "hint"), SETTINGS, ids=[w for w, _, _ in SETTINGS])
def test_every_setting_of_the_wrong_kind_says_what_it_expects(
    where: str, document: Document, hint: Any
) -> None:
    if dataclasses.is_dataclass(hint):
        value, expected = 5, "expected a table"
    elif get_origin(hint) is tuple and dataclasses.is_dataclass(get_args(hint)[0]):
        value, expected = 5, "expected an array of tables"
    else:
        value, expected = _wrong(hint)
    message = errors(document(value))
    assert message.startswith(f"{where}: {expected}"), message
    assert message.endswith(f", got {value!r}"), message
    assert "\n" not in message, message  # that one mistake, said once


def test_the_walk_sees_every_section_and_table() -> None:
    walked = {w for w, _, _ in SETTINGS}
    assert {"store.url", "index.read_from_replicas", "server.trusted_proxies"} <= walked
    assert {"modes[0].max_points", "boards[0].season_start", "boards[0].group_by"} <= walked
    sections = {f.name for f in dataclasses.fields(Settings)}
    assert sections <= walked


SECTION_NUMBERS = [
    (w, h) for w, _, h in SETTINGS if "." in w and "[" not in w and _kind(h) in (int, float, bool)
]


@pytest.mark.parametrize(("where", "hint"), SECTION_NUMBERS, ids=[w for w, _ in SECTION_NUMBERS])
def test_a_number_or_flag_the_environment_gives_wrongly_says_the_same(
    where: str, hint: Any
) -> None:
    """Every value from the environment is a string: one that is not a number (or a flag)
    for a setting that wants one gets the file's message, under the setting's name."""
    value, expected = _wrong(hint)
    env = {"PODIUM_" + where.replace(".", "_").upper(): value}
    assert errors({}, env) == f"{where}: {expected}, got {value!r}"


def test_bad_board_window_kind() -> None:
    message = errors({"boards": [{"name": "b", "window": "fortnight"}]})
    assert "boards[0].window" in message and "fortnight" in message
    assert "week" in message  # and says what would have been allowed


@pytest.mark.parametrize("key", ["aggregate", "order", "ties"])
def test_bad_board_enum(key: str) -> None:
    message = errors({"boards": [{"name": "ok"}, {"name": "b", key: "sideways"}]})
    assert f"boards[1].{key}" in message


def test_unknown_board_key() -> None:
    assert "boards[0].windw" in errors({"boards": [{"name": "b", "windw": "week"}]})


def test_board_referencing_an_unknown_mode() -> None:
    raw = {"modes": [{"name": "ranked-duo"}], "boards": [{"name": "b", "modes": ["casual"]}]}
    message = errors(raw)
    assert "boards[0].modes" in message and "casual" in message


def test_duplicate_board_names() -> None:
    message = errors({"boards": [{"name": "week", "window": "week"}, {"name": "week"}]})
    assert "boards" in message and "'week'" in message and "twice" in message


def test_duplicate_mode_names() -> None:
    assert "twice" in errors({"modes": [{"name": "a"}, {"name": "a"}]})


@pytest.mark.parametrize("start", ["next tuesday", "2026-13-01T00:00:00Z", "2026-09-07T00:00:00"])
def test_bad_season_start(start: str) -> None:
    message = errors({"boards": [{"name": "s", "window": "season", "season_start": start}]})
    assert "boards[0].season_start" in message


def test_bad_season_weeks() -> None:
    assert "boards[0].season_weeks" in errors({"boards": [{"name": "s", "season_weeks": 0}]})


@pytest.mark.parametrize(
    ("section", "url"),
    [("store", "mysql://db/podium"), ("index", "memcached://x"), ("log", "amqp://x")],
)
def test_bad_urls(section: str, url: str) -> None:
    message = errors({section: {"url": url}})
    assert message.startswith(f"{section}.url:") and url in message


def test_min_points_above_max_points() -> None:
    message = errors({"modes": [{"name": "m", "min_points": 10, "max_points": 5}]})
    assert "modes[0]" in message and "min_points" in message


def test_bad_mode_name() -> None:
    assert "modes[0].name" in errors({"modes": [{"name": "Has Spaces"}]})


def test_bad_board_name() -> None:
    assert "boards[0].name" in errors({"boards": [{"name": "UPPER"}]})


def test_missing_config_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match="not found") as info:
        load(path, env={})
    assert str(path) in str(info.value)


def test_invalid_toml(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[server\nport = 1\n")
    with pytest.raises(ConfigError, match=str(path)):
        load(path, env={})


def test_out_of_range_port_and_boolean_numbers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server\.port"):
        parse({"server": {"port": 70000}})
    with pytest.raises(ConfigError, match=r"boards\[0\]\.exact_top"):
        parse({"boards": [{"name": "w", "window": "week", "exact_top": True}]})
    with pytest.raises(ConfigError, match=r"boards\[0\]\.season_weeks"):
        parse({"boards": [{"name": "s", "window": "season", "season_weeks": True}]})
    with pytest.raises(ConfigError, match="config file"):
        load(tmp_path, env={})  # a directory, not a file


def test_server_api_is_all_read_or_write() -> None:
    assert parse({}).server.api == "all"
    shared = {"PODIUM_INDEX_URL": "redis://127.0.0.1:6379/0"}
    assert load(None, env={"PODIUM_SERVER_API": "read", **shared}).server.api == "read"
    with pytest.raises(ConfigError, match=r"server\.api: expected all \| read \| write"):
        parse({"server": {"api": "reads"}})


def test_webhooks_name_an_unknown_event() -> None:
    row = {**ROW_NEEDS["webhooks"], "events": ["window.frozen", "window.closed"]}
    assert errors({"webhooks": [row]}) == (
        "webhooks[0].events: unknown event 'window.closed' (known: window.frozen, "
        "tournament.ended, cohort.frozen, player.flagged, player.banned)"
    )


@pytest.mark.parametrize("secret", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!", "whsec_YWJj"])
def test_webhooks_secret_is_standard_webhooks_and_never_echoed(secret: str) -> None:
    message = errors({"webhooks": [{**ROW_NEEDS["webhooks"], "secret": secret}]})
    assert message == "webhooks[0].secret: expected whsec_ and at least 16 bytes in base64"


def test_webhooks_url_and_uniqueness() -> None:
    row = ROW_NEEDS["webhooks"]
    assert errors({"webhooks": [{**row, "url": "ftp://x"}]}) == (
        "webhooks[0].url: expected http://... or https://..., got 'ftp://x'"
    )
    assert errors({"webhooks": [row, row]}) == (
        "webhooks: 'http://127.0.0.1:9/hook' is defined twice"
    )
    settings = config.parse({"webhooks": [{**row, "timeout_s": 2}]})
    (hook,) = settings.webhooks
    assert (hook.timeout_s, hook.retry_first_s, hook.retry_for_s) == (2.0, 5.0, 86_400.0)
    assert SECRET not in repr(settings)  # a settings dump in a log shows no secret


def test_webhooks_messages_and_settings_never_show_a_urls_credentials() -> None:
    """A url's password and token are in no message about a mistyped table, and in no
    dump of the settings; the settings keep them, to send with every delivery."""
    url = "https://hooker:pw-s3cret@prizes.example/p?token=tok-s3cret&x=1"
    shown = "'https://hooker:***@prizes.example/p?token=***&x=1'"
    row = {**ROW_NEEDS["webhooks"], "url": url}
    assert errors({"webhooks": [{**row, "url": url.replace("https", "ftp")}]}) == (
        f"webhooks[0].url: expected http://... or https://..., got {shown.replace('https', 'ftp')}"
    )
    assert errors({"webhooks": [row, row]}) == f"webhooks: {shown} is defined twice"
    # [webhooks] for [[webhooks]]: named, not echoed (it holds the url and the secret)
    assert errors({"webhooks": row}) == (
        "webhooks: expected an array of tables ([[webhooks]]), got a table"
    )
    assert errors({"webhooks": [row, [row]]}) == (
        "webhooks: expected an array of tables ([[webhooks]]), got an array at [1]"
    )
    assert errors({"webhooks": url}) == (
        f"webhooks: expected an array of tables ([[webhooks]]), got {shown}"
    )
    settings = config.parse({"webhooks": [row]})
    assert settings.webhooks[0].url == url
    dumped = repr(settings)
    assert shown in dumped
    assert "s3cret" not in dumped and SECRET not in dumped
