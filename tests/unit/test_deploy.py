"""The example fleet in ``deploy/``: every command its Procfile and systemd units run is one
the command line takes (options that exist, roles that exist), and its settings file loads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from podium import bootstrap
from podium.cli.main import app
from podium.config import settings as config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def commands() -> list[list[str]]:
    out = [
        shlex.split(line.split(":", 1)[1].replace("$PORT", "5000"))
        for line in (DEPLOY / "Procfile").read_text().splitlines()
        if re.match(r"^\w+: ", line)
    ]
    for unit in DEPLOY.glob("*.service"):
        for line in unit.read_text().splitlines():
            if line.startswith("ExecStart="):
                argv = line.removeprefix("ExecStart=").replace("%i", "8000")
                argv = argv.replace("${ROLES}", ",".join(bootstrap.ROLES))
                argv = argv.replace("$WORKER_ARGS", "--metrics-port 9464")
                out.append(shlex.split(argv))
    return out


def test_the_example_fleet_has_its_commands() -> None:
    found = commands()
    assert len(found) >= 7  # the Procfile's six kinds of process and the two units
    for argv in found:
        assert Path(argv[0]).name == "podium", argv


@pytest.mark.parametrize("argv", commands(), ids=lambda a: " ".join(a[1:4]))
def test_every_command_parses(argv: list[str]) -> None:
    # --help, eager, answers once every option before it has parsed: an option that does
    # not exist fails first.
    done = CliRunner().invoke(app, [*argv[1:], "--help"])
    assert done.exit_code == 0, done.output
    if "--roles" in argv:
        roles = argv[argv.index("--roles") + 1].split(",")
        assert set(roles) <= set(bootstrap.ROLES), roles


def test_the_example_settings_load() -> None:
    settings = config.load(str(DEPLOY / "podium.toml"))
    assert settings.store.shards and settings.log.url.startswith("nats://")
