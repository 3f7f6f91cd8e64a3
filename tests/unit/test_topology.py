"""``bootstrap.topology``: what the settings' URLs make of a deployment, read once, and the
rule that needs the whole of it (a process for reads or writes only shares its index)."""

from __future__ import annotations

import pytest

from podium.bootstrap import topology
from podium.config import parse
from podium.errors import ConfigError
from podium.topology import Topology

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

    from podium.cli import app

    out = CliRunner().invoke(app, args, env={"PODIUM_SERVER_API": "read"})
    assert out.exit_code == 2
    assert "podium: configuration error: server.api: " in out.output
