"""A finished match's report: the body of ``POST /v1/matches/{matchId}/results``, as the
HTTP route reads it (``api/schemas.py`` publishes these models in the OpenAPI document) and
as the ``ingest`` role reads a Kafka record's value (``service/ingest.py``), so that both
take and refuse exactly the same bodies, with the same problem+json.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
)

from podium.domain import validation as v
from podium.domain.metadata import METADATA_IS, canonical
from podium.domain.validation import anchored
from podium.errors import InvalidInput, PodiumError

ID = anchored(v.ID)
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def _rfc3339(value: Any) -> Any:
    """Only an RFC 3339 string with its offset: pydantic alone also takes an epoch number
    or a string of digits."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError("must be an RFC 3339 date-time with a time zone: 2026-10-28T19:04:11Z")
    return value


def _whole(value: Any) -> Any:
    """JSON Schema's integer: a number with no fraction, ``737.0`` as much as ``737`` (as
    the published document says); still no string of digits and no boolean."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Rfc3339 = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]
WholeNumber = Annotated[StrictInt, BeforeValidator(_whole)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _metadata(value: Any) -> Any:
    """Entry metadata: a JSON object, at most 512 bytes as compact UTF-8 JSON (its canonical
    form, domain/metadata.py), said so rather than pydantic's "a valid dictionary"; the
    service checks it again."""
    if value is not None:
        canonical(value)  # MetadataError is a ValueError: a 422 naming the field
    return value


Metadata = Annotated[
    dict[str, Any] | None,
    BeforeValidator(_metadata),
    Field(default=None, description=METADATA_IS),
]


class ResultIn(_In):
    playerId: str = Field(pattern=ID)
    points: WholeNumber
    metadata: Metadata = None


class MatchIn(_In):
    mode: str = Field(min_length=1, max_length=64)
    endedAt: Rfc3339 = Field(
        description="when the match ended (RFC 3339). Two rules of time no schema can state "
        "(422 when broken): no later than `[server] max_clock_skew_s` past the server's "
        "clock, and inside a window of the mode's boards that still takes results (open, or "
        "closed less than `freeze_after_s` ago)"
    )
    durationSeconds: WholeNumber = Field(ge=0)
    results: list[ResultIn] = Field(min_length=1, max_length=v.MAX_RESULTS)


# --- a report read from bytes, refused as the HTTP route refuses it ---------------------------


class Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, ``Duplicate`` where a key appears twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise Duplicate(key)
        out[key] = value
    return out


class InvalidReport(InvalidInput):
    """A body refused before the service looked at it: 422 with the fields at fault, as the
    HTTP route's request validation answers (``api/problems.py``)."""

    def __init__(self, detail: str, errors: list[dict[str, str]]) -> None:
        super().__init__(detail)
        self.errors = errors


def _body(message: str) -> InvalidReport:
    """The body as a whole at fault (the detail is the message, as ``api/protocol.py`` and
    the HTTP 400 handler say it)."""
    return InvalidReport(message, [{"field": "body", "message": message}])


def read_report(raw: bytes | None) -> MatchIn:
    """The report in ``raw`` (JSON), or ``InvalidReport`` naming what is wrong."""
    if raw is None:
        raise _body("the record has no value")
    try:
        doc = json.loads(raw, object_pairs_hook=once_each)
    except Duplicate as e:
        message = f'the key "{e.key}" appears more than once in one object'
        raise _body(message) from None
    except UnicodeDecodeError as e:
        message = f"the body cannot be read as JSON: {e}"
        raise _body(message) from None
    except json.JSONDecodeError as e:
        # As FastAPI says it: the position is the field.
        raise InvalidReport(
            f"{e.pos}: JSON decode error", [{"field": str(e.pos), "message": "JSON decode error"}]
        ) from None
    except (ValueError, RecursionError) as e:
        message = f"the body cannot be read as JSON: {type(e).__name__}"
        raise _body(message) from None
    try:
        return MatchIn.model_validate(doc)
    except ValidationError as e:
        errors = [
            {"field": ".".join(str(p) for p in err["loc"]), "message": err["msg"]}
            for err in e.errors()
        ]
        first = errors[0] if errors else {"field": "", "message": "invalid request"}
        raise InvalidReport(f"{first['field']}: {first['message']}", errors) from None


def problem_of(e: PodiumError) -> dict[str, Any]:
    """The problem+json body the HTTP route answers ``e`` with (RFC 9457)."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": e.title,
        "status": e.status,
        "detail": e.public or str(e),
    }
    if isinstance(e, InvalidReport):
        body["errors"] = e.errors
    return body
