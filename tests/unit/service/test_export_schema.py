"""``schemas/player-export.v1.json``, the schema of a player's export (docs/export.md): it
refuses what the format is not (so that the integration tests' check of real exports can
fail), and it names the columns the code writes, the ones docs/export.md lists and the
sections the route's OpenAPI description names: one list of columns, checked where it is
written four times."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from podium.api.erasure import EXPORT_SCHEMA
from podium.archive.results import COLUMNS as ARCHIVE_COLUMNS
from podium.domain.erasure import EXPORT_SECTIONS
from podium.service.erasure import _camel
from podium.store.erasure import EXPORT

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "schemas" / "player-export.v1.json").read_text())
EXAMPLE = json.loads((ROOT / "schemas" / "player-export.v1.example.json").read_text())
VALID = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
SECTIONS = [*EXPORT_SECTIONS, "archivedResults"]


def _columns(section: str) -> list[str]:
    """The section's columns as the schema names them, in its order."""
    return list(SCHEMA["properties"][section]["items"]["properties"])


def test_the_schema_is_a_valid_schema_and_the_example_is_valid() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert list(VALID.iter_errors(EXAMPLE)) == []
    assert all(EXAMPLE[s] for s in SECTIONS), "the example shows a row of every section"


def test_every_section_is_required_and_nothing_else_is_allowed() -> None:
    assert SCHEMA["required"] == ["format", "playerId", "exportedAt", "erased", *SECTIONS]
    assert list(SCHEMA["properties"]) == SCHEMA["required"]
    assert SCHEMA["additionalProperties"] is False
    for s in SECTIONS:
        row = SCHEMA["properties"][s]["items"]
        assert row["additionalProperties"] is False and row["required"] == _columns(s), s


def _refused(doc: dict[str, Any]) -> list[str]:
    return [e.message for e in VALID.iter_errors(doc)]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d.update(rewards=[]), "Additional properties"),  # an unknown section
        (lambda d: d.pop("leftOut"), "'leftOut' is a required property"),
        (lambda d: d["results"][0].update(points="90"), "'90' is not of type 'integer'"),
        (lambda d: d["results"][0].update(metadata='{"a":1}'), "is not of type 'object', 'null'"),
        (lambda d: d["tallies"][0].update(score=1), "Additional properties"),  # a column
        (lambda d: d["ban"][0].pop("bannedAt"), "'bannedAt' is a required property"),
        (lambda d: d["profile"][0].update(version=None), "None is not of type 'integer'"),
        (lambda d: d.update(format="podium.player-export/2"), "was expected"),
        (lambda d: d.update(exportedAt="yesterday"), "does not match"),
        (lambda d: d["leagueTiers"][0].update(moved="sideways"), "is not one of"),
    ],
)
def test_the_schema_refuses_what_the_format_is_not(change: Any, why: str) -> None:
    doc = copy.deepcopy(EXAMPLE)
    change(doc)
    refused = _refused(doc)
    assert any(why in m for m in refused), refused


def test_the_schema_names_the_columns_the_store_reads_and_the_archive_keeps() -> None:
    for section in EXPORT_SECTIONS:
        cols = EXPORT[section][1].split(", ")
        # without a joined table's alias (m.match_id): the export writes the bare name
        assert _columns(section) == [_camel(c.split(".")[-1]) for c in cols], section
    assert _columns("archivedResults") == [_camel(c) for c in ARCHIVE_COLUMNS]


def test_docs_export_md_lists_the_schemas_sections_and_columns() -> None:
    text = (ROOT / "docs" / "export.md").read_text()
    assert "schemas/player-export.v1.json" in text
    listed = {}
    for line in text.splitlines():
        # | `section` | what it holds | `col`, `col`, ... |
        if m := re.fullmatch(r"\| `(\w+)` \|.*\|([^|]*)\|", line):
            listed[m.group(1)] = re.findall(r"`(\w+)`", m.group(2))
    assert {k: v for k, v in listed.items() if v} == {s: _columns(s) for s in SECTIONS}
    assert set(listed) == set(SCHEMA["required"])


def test_the_openapi_description_names_the_schema_and_its_sections() -> None:
    assert EXPORT_SCHEMA["required"] == SCHEMA["required"]
    assert list(EXPORT_SCHEMA["properties"]) == list(SCHEMA["properties"])
    assert "schemas/player-export.v1.json" in EXPORT_SCHEMA["description"]
    assert EXPORT_SCHEMA["properties"]["format"] == SCHEMA["properties"]["format"]
