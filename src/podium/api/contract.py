"""What the OpenAPI document says beyond the models: the rules that come from the settings (the
configured modes and each mode's points and duration) and the name and avatar rules of
``domain/validation.py``, written as JSON Schema so that a request the document calls valid is
one the service accepts, and one it calls invalid is refused.

Applied once, when the document is first built (``app._openapi``); the models themselves stay
static, and the service checks every rule again whoever calls it.
"""

from __future__ import annotations

from typing import Any

from podium.api.problems import MEANINGS, PROBLEM
from podium.config.settings import Settings
from podium.domain import validation as v
from podium.domain.boards import EXACT_TOP

Schema = dict[str, Any]


def publish(schema: Schema, settings: Settings) -> None:
    """Put the configured and the domain's rules into ``schema``'s components, in place."""
    _body_limit(schema)
    _offsets(schema, settings)
    models: dict[str, Schema] = schema.get("components", {}).get("schemas", {})
    if "MatchIn" in models:
        _match(models["MatchIn"], models.get("ResultIn", {}), settings)
    if "KeyIn" in models:
        _key(models["KeyIn"], settings)
    if "TournamentIn" in models:  # its modes are configured ones, each once; its title a name
        props = models["TournamentIn"]["properties"]
        props["modes"]["items"] = {"type": "string", "enum": [m.name for m in settings.modes]}
        props["modes"]["uniqueItems"] = True
        props["title"]["pattern"] = v.name_pattern()
    if "ProfileIn" in models:
        props = models["ProfileIn"]["properties"]
        _string_of(props["name"])["pattern"] = v.name_pattern()
        _string_of(props["avatar"])["pattern"] = v.avatar_pattern()


def _body_limit(schema: Schema) -> None:
    """Every operation may answer 413: ``problems.BodyLimit`` refuses a body over
    ``server.max_body_bytes`` before any route is chosen, on a GET as on a POST."""
    too_large = {
        "description": MEANINGS[413],
        "content": {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    for operations in schema.get("paths", {}).values():
        for op in operations.values():
            op.setdefault("responses", {}).setdefault("413", too_large)


def _offsets(schema: Schema, settings: Settings) -> None:
    """A page's offset stays above the board's exact top (below it, a player is looked up by
    id): the deepest configured board's on a board's page, which each board's own
    ``exactTop`` may make shallower, and a tournament board's own on a tournament's."""
    tops = {
        "/v1/boards/{board}": max(b.exact_top for b in settings.boards),
        "/v1/tournaments/{tournamentId}/board": EXACT_TOP,
    }
    for path, top in tops.items():
        for param in schema.get("paths", {}).get(path, {}).get("get", {}).get("parameters", []):
            if param.get("in") == "query" and param.get("name") == "offset":
                param["schema"]["maximum"] = top - 1
                param["description"] = param["schema"]["description"] = (
                    f"rows to skip: below the board's exact top ({top:,} at most; a board's "
                    "own is its exactTop), past which a player is looked up by id"
                )


def _match(match: Schema, result: Schema, settings: Settings) -> None:
    """A match's mode is one of the configured ones; its points and duration are within that
    mode's ranges: the widest of them on the fields themselves, and with several modes, one
    branch per mode (``oneOf``, told apart by ``mode``) holding each mode's own."""
    modes = settings.modes
    props = match["properties"]
    props["mode"] = {"type": "string", "enum": [m.name for m in modes], "title": "Mode"}
    duration = props["durationSeconds"]
    duration["minimum"] = min(m.min_duration_s for m in modes)
    duration["maximum"] = max(m.max_duration_s for m in modes)
    points = result.get("properties", {}).get("points")
    if points is not None:
        points["minimum"] = min(m.min_points for m in modes)
        points["maximum"] = max(m.max_points for m in modes)
    if len(modes) > 1:
        match["oneOf"] = [
            {
                "properties": {
                    "mode": {"const": m.name},
                    "durationSeconds": {
                        "minimum": m.min_duration_s,
                        "maximum": m.max_duration_s,
                    },
                    "results": {
                        "items": {
                            "properties": {
                                "points": {"minimum": m.min_points, "maximum": m.max_points}
                            }
                        }
                    },
                }
            }
            for m in modes
        ]


def _key(key: Schema, settings: Settings) -> None:
    """A key's name follows the name rules; a game server's key names one or more of the
    configured modes, an admin's or an ops key none."""
    props = key["properties"]
    props["name"]["pattern"] = v.name_pattern()
    props["modes"]["items"] = {"type": "string", "enum": [m.name for m in settings.modes]}
    key["oneOf"] = [
        {
            "properties": {"scope": {"const": "game"}, "modes": {"minItems": 1}},
            "required": ["modes"],
        },
        {"properties": {"scope": {"enum": ["admin", "ops"]}, "modes": {"maxItems": 0}}},
    ]


def _string_of(prop: Schema) -> Schema:
    """The string branch of an optional field (``anyOf`` string or null), or the field."""
    for branch in prop.get("anyOf", []):
        if branch.get("type") == "string":
            return branch  # type: ignore[no-any-return]
    return prop
