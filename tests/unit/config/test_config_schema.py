"""The JSON Schema of podium.toml: the committed file is the generated one, the CLI prints
it, and what podium accepts (its defaults, the README's example) the schema accepts too."""

from __future__ import annotations

import json
import re
import tomllib
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from podium.cli.main import app
from podium.config import settings as config
from podium.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def generated() -> str:
    return json.dumps(config.schema(), indent=2) + "\n"


def readme_example() -> dict[str, Any]:
    """The TOML block of the README's "Configuration" section."""
    section = (ROOT / "README.md").read_text().split("\n## Configuration\n", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    assert block is not None, "the README's Configuration section has no TOML example"
    return tomllib.loads(block.group(1))


def defaults() -> dict[str, Any]:
    """Every default, written out as a file would hold it (TOML has no null)."""
    return config._File().model_dump(mode="json", exclude_none=True)


def as_json(document: dict[str, Any]) -> Any:
    """A TOML document as an editor checks it: date-times as RFC 3339 strings."""

    def text(value: Any) -> str:
        if isinstance(value, datetime | date | time):
            return value.isoformat().replace("+00:00", "Z")
        raise TypeError(value)

    return json.loads(json.dumps(document, default=text))


def test_the_committed_schema_is_the_generated_one() -> None:
    committed = (ROOT / "podium.schema.json").read_text()
    assert committed == generated(), (
        "podium.schema.json is stale: podium config schema > podium.schema.json"
    )


def test_podium_config_schema_prints_it() -> None:
    result = CliRunner().invoke(app, ["config", "schema"])
    assert result.exit_code == 0, result.output
    assert result.stdout == generated()


def test_the_defaults_and_the_readme_example_are_settings() -> None:
    assert config.parse(defaults()) == config.parse({})
    example = config.parse(readme_example())
    assert example.mode("ranked-duo") is not None and example.board("week") is not None


def test_the_defaults_and_the_readme_example_validate() -> None:
    import jsonschema  # a test dependency (pyproject.toml)

    schema = config.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate({})
    validator.validate(as_json(defaults()))
    validator.validate(as_json(readme_example()))


@pytest.mark.parametrize(
    "document",
    [
        {"sever": {"port": 1}},
        {"server": {"prot": 1}},
        {"server": {"port": 70000}},
        {"server": {"api": "reads"}},
        {"store": {"url": "mysql://db/podium"}},
        {"modes": [{"min_points": 1}]},
        {"boards": [{"name": "b", "window": "fortnight"}]},
        {"boards": [{"name": "UPPER"}]},
        {"boards": [{"name": "b", "season_weeks": 53}]},
    ],
)
def test_the_schema_refuses_what_podium_refuses(document: dict[str, Any]) -> None:
    import jsonschema  # a test dependency (pyproject.toml)

    assert not jsonschema.Draft202012Validator(config.schema()).is_valid(document)
    with pytest.raises(ConfigError):
        config.parse(document)
