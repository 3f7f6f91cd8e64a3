"""The role registry is the one list of background roles: ``podium serve`` starts every role
in it, ``podium worker --roles`` starts any of them and refuses a name it does not hold,
naming the ones it does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from podium import bootstrap
from podium.cli import common
from podium.cli import main as cli
from podium.config.settings import Settings, parse
from podium.errors import ConfigError
from podium.serve import gcpolicy
from podium.workers import roles
from podium.workers.runner import Needs, Runner

# The runners each role starts: its own first, then any that run beside it.
RUNNERS = {
    "relay": ["relay", "marker"],  # the board marks beside the relay (workers/marker.py)
    "updater": ["updater", "backlog", "profiles"],
    "aggregator": ["aggregator"],
    "freezer": ["freezer", "tournament-freezer"],  # boards' windows, tournaments' runs
    "reconciler": ["reconciler"],
    "pruner": ["pruner", "event-pruner"],  # results past retention, old events
    "webhooks": ["webhooks", "webhook-delivery"],  # events into deliveries, one endpoint's
    "ingest": ["ingest", "ingest"],  # one runner per [[ingest]] topic
    "eraser": ["eraser"],  # players' erasures carried out
}
# Two topics of matches; their consumers connect at their first poll, never here.
INGEST = [{"topic": t, "key": "gs", "brokers": "kafka://127.0.0.1:9"} for t in ("matches", "more")]
HOOK = {
    "url": "http://127.0.0.1:9/hook",
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "events": ["window.frozen"],
}
# A shared index, so that `podium worker` accepts the settings; nothing connects to it here.
WORKER_ENV = {"PODIUM_INDEX_URL": "redis://127.0.0.1:6379/0"}


def _needs(tmp_path: Path, shards: int) -> Needs:
    """What bootstrap gives the roles, built without touching a backend."""
    raw = {
        "store": {"url": f"sqlite:///{tmp_path}/roles.db"},
        "index": {"shards": shards},
        "webhooks": [HOOK],  # the webhooks role starts only with an endpoint to send to
        "ingest": INGEST,  # and the ingest role with a topic to read
    }
    return bootstrap.build(parse(raw)).needs()


class _Started(Exception):
    """The worker got as far as starting its roles."""


def _worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str]) -> Any:
    """``podium worker`` with its backends stood in for: returns (the CLI's result, the
    runners its ``start_roles`` made, or None if it never got there)."""
    needs = _needs(tmp_path, shards=2)
    made: list[list[Runner]] = []

    class Backends:
        def start_roles(self, names: list[str]) -> None:
            made.append(roles.runners(names, needs))
            raise _Started

    def run(settings: Settings, fn: Callable[[Any], Awaitable[None]], *, wait_s: float) -> None:
        assert wait_s > 0  # a worker waits for a store that does not answer at start
        with pytest.raises(_Started):
            asyncio.run(fn(Backends()))

    monkeypatch.setattr(common, "run", run)
    monkeypatch.setattr(gcpolicy, "settle", lambda: None)  # it would freeze this process's gc
    done = CliRunner().invoke(cli.app, ["worker", *argv], env=WORKER_ENV)
    return done, made[0] if made else None


def test_the_role_names_are_the_registry() -> None:
    assert tuple(r.name for r in roles.REGISTRY) == bootstrap.ROLES
    assert len(set(bootstrap.ROLES)) == len(bootstrap.ROLES)
    assert set(RUNNERS) == set(bootstrap.ROLES)


@pytest.mark.parametrize("name", roles.NAMES)
def test_every_registered_role_starts_through_worker_roles(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    done, runners = _worker(monkeypatch, tmp_path, ["--roles", name])
    assert done.exit_code == 0, done.output
    assert runners is not None, done.output
    # and last, the process's heartbeats of them, written to the store (podium status)
    assert [r.role for r in runners] == [*RUNNERS[name], "heartbeat"]


def test_an_unknown_role_is_refused_with_the_list(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    done, runners = _worker(monkeypatch, tmp_path, ["--roles", "relay,judge"])
    assert done.exit_code == 2
    assert runners is None  # refused before any backend was built
    assert f"unknown role 'judge' (available: {', '.join(roles.NAMES)})" in done.output
    with pytest.raises(ConfigError, match="available: relay, updater"):
        roles.runners(["judge"], _needs(tmp_path, shards=1))


def test_serve_starts_every_role(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from podium.serve import app

    given: list[tuple[str, ...]] = []

    def create_app(settings: Settings, *, roles: tuple[str, ...], demo: bool) -> object:
        given.append(roles)
        return object()

    monkeypatch.setattr(app, "create_app", create_app)

    def run(server: uvicorn.Server, *args: object) -> None:
        server.started = True  # and serves nothing

    monkeypatch.setattr(uvicorn.Server, "run", run)
    for argv, expected in ([], bootstrap.ROLES), (["--no-workers"], ()):
        done = CliRunner().invoke(cli.app, ["serve", *argv], env=WORKER_ENV)
        assert done.exit_code == 0, done.output
        assert given.pop() == expected


def test_the_aggregator_is_not_started_on_an_index_in_one_part(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="podium"):
        assert roles.runners(["aggregator"], _needs(tmp_path, shards=1)) == []
    assert "aggregator: the index is not split across shards; not started" in caplog.text
    assert [r.role for r in roles.runners(["aggregator"], _needs(tmp_path, shards=2))] == [
        "aggregator",
        "heartbeat",
    ]


def test_the_ingest_is_not_started_without_a_topic(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    needs = bootstrap.build(parse({"store": {"url": f"sqlite:///{tmp_path}/r.db"}})).needs()
    with caplog.at_level(logging.INFO, logger="podium"):
        assert roles.runners(["ingest"], needs) == []
    assert "ingest: no [[ingest]] topic in the settings; not started" in caplog.text
