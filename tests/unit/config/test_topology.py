"""``bootstrap.topology``: what the settings' URLs make of a deployment, read once, and the
rule that needs the whole of it (a process for reads or writes only shares its index)."""

from __future__ import annotations

import pytest

from podium.bootstrap import topology
from podium.config.settings import parse
from podium.config.topology import SentinelAddress, Topology, sentinel_address
from podium.errors import ConfigError

PG = "postgresql://podium@db0.invalid/podium"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, Topology("sqlite", "memory", 1, "outbox")),
        ({"index": {"shards": 4}}, Topology("sqlite", "memory", 4, "outbox")),
        (
            {"store": {"url": PG}, "index": {"url": "redis://r:6379"}, "log": {"url": "nats://n"}},
            Topology("postgres", "redis", 1, "nats"),
        ),
        (
            {"store": {"url": PG, "shards": [PG]}, "index": {"url": "redis+cluster://r:7000"}},
            Topology("split", "cluster", 1, "outbox"),
        ),
        (  # the same over TLS
            {"store": {"url": PG}, "index": {"url": "rediss+cluster://r:7000"}},
            Topology("postgres", "cluster", 1, "outbox"),
        ),
        (
            {"store": {"url": PG}, "index": {"url": "rediss://r:6380"}},
            Topology("postgres", "redis", 1, "outbox"),
        ),
        (
            {"store": {"url": PG}, "index": {"url": "redis+sentinel://s1,s2/mymaster"}},
            Topology("postgres", "sentinel", 1, "outbox"),
        ),
    ],
)
def test_the_urls_decide_each_part(raw: dict[str, dict[str, object]], expected: Topology) -> None:
    assert topology(parse(raw)) == expected


def test_what_callers_ask() -> None:
    embedded = topology(parse({}))
    assert embedded.in_process_index and not embedded.split_store and not embedded.aggregated
    split = topology(parse({"store": {"url": PG, "shards": [PG]}, "index": {"shards": 16}}))
    assert split.split_store and split.aggregated
    # a cluster is split into shards, but one shard is the whole board: nothing to aggregate
    assert not topology(parse({"index": {"url": "redis+cluster://r:7000"}})).aggregated


def test_a_process_for_reads_or_writes_only_needs_a_shared_index() -> None:
    for api in ("read", "write"):
        with pytest.raises(ConfigError, match=r"^server\.api: .* redis://"):
            topology(parse({"server": {"api": api}}))
    assert not topology(
        parse({"server": {"api": "read"}, "index": {"url": "redis://r"}})
    ).in_process_index


def test_a_split_store_needs_a_postgres_home() -> None:
    with pytest.raises(ConfigError, match="postgresql"):
        topology(parse({"store": {"url": "sqlite:///x.db", "shards": [PG]}}))


@pytest.mark.parametrize("args", [["serve"], ["keys", "list"]])
def test_the_command_line_says_it_as_a_configuration_error(args: list[str]) -> None:
    from typer.testing import CliRunner

    from podium.cli.main import app

    out = CliRunner().invoke(app, args, env={"PODIUM_SERVER_API": "read"})
    assert out.exit_code == 2
    assert "podium: configuration error: server.api: " in out.output


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "redis+sentinel://s1:26379,s2:26380/mymaster",
            SentinelAddress((("s1", 26379), ("s2", 26380)), "mymaster"),
        ),
        # Sentinel's own port where none is given; IPv6 in brackets, or bare without a port
        (
            "redis+sentinel://s1,[::1]:5000,::2/m",
            SentinelAddress((("s1", 26379), ("::1", 5000), ("::2", 26379)), "m"),
        ),
        (
            "redis+sentinel://:s%40cret@s1/m?db=3",
            SentinelAddress((("s1", 26379),), "m", 3, None, "s@cret"),
        ),
        (
            "redis+sentinel://user:pw@s1/m?sentinel_password=sp",
            SentinelAddress((("s1", 26379),), "m", 0, "user", "pw", "sp"),
        ),
    ],
)
def test_a_sentinel_url_names_the_sentinels_the_service_and_the_credentials(
    url: str, expected: SentinelAddress
) -> None:
    assert sentinel_address(url) == expected


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis+sentinel://s1/", "the path must be the service's name alone"),
        ("redis+sentinel://s1", "the path must be the service's name alone"),
        ("redis+sentinel://s1/m/0", "the path must be the service's name alone"),
        ("redis+sentinel:///m", "'' is not a Sentinel's HOST:PORT"),
        ("redis+sentinel://s1,/m", "'' is not a Sentinel's HOST:PORT"),
        ("redis+sentinel://s1:x/m", "'s1:x' is not a Sentinel's HOST:PORT"),
        ("redis+sentinel://s1:70000/m", "'s1:70000' is not a Sentinel's HOST:PORT"),
        ("redis+sentinel://s1:/m", "'s1:' is not a Sentinel's HOST:PORT"),
        ("redis+sentinel://[::1/m", "not a URL"),
        ("redis+sentinel://s1/m?db=one", "?db=: expected a database number (0 or more)"),
        ("redis+sentinel://s1/m?db", "the query is not name=value"),
        ("redis+sentinel://s1/m?db=1&db=2", "an option is given twice"),
        ("redis+sentinel://s1/m?ssl=1", "unknown option 'ssl' (known: db, sentinel_password)"),
    ],
)
def test_a_bad_sentinel_url_is_a_config_error_naming_the_field(url: str, said: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse({"index": {"url": url}})
    assert str(e.value).startswith("index.url: ")
    assert said in str(e.value)


def test_a_bad_sentinel_url_is_refused_without_echoing_its_password() -> None:
    with pytest.raises(ConfigError) as e:
        parse({"index": {"url": "redis+sentinel://:hunter2@s1/m?db=x&sentinel_password=pw2"}})
    assert "hunter2" not in str(e.value) and "pw2" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^index\.url: "):  # from the environment alike
        parse({}, {"PODIUM_INDEX_URL": "redis+sentinel://s1"})
