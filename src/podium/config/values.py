"""How the settings' values are checked, and what is said of a bad one: the types the
sections (``sections.py``) and the file's tables (``settings.py``) are made of, each saying
what it expects in the file's words rather than Python's (``store.url: expected a string,
got 5``), and never a URL's password.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Any

from annotated_types import Ge, Le
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Strict,
    StrictStr,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from podium.config.topology import address_problem, is_sentinel_url, sentinel_address
from podium.util.redact import redact_url

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")

# A value of the right kind that breaks one of these (a bound, a length, a pattern) is told
# the field's rule; any other failure, the kind of value the field expects.
_RULES = {
    "greater_than_equal",
    "less_than_equal",
    "string_too_short",
    "string_pattern_mismatch",
    "too_short",
}

# The kinds of value, in the file's words rather than Python's (a TOML file has no "int").
WHOLE = "expected a whole number"
NUMBER = "expected a number"
STRING = "expected a string"
STRINGS = "expected a list of strings"
FLAG = "expected true or false"


def as_shown(value: Any) -> Any:
    """``value`` as a message may repeat it: any URL in it (a mistyped store URL, a list of
    them) without its password or secret query values (``redact.py``)."""
    if isinstance(value, str):
        return redact_url(value) if "://" in value else value
    if isinstance(value, list | tuple):
        return type(value)(as_shown(v) for v in value)
    if isinstance(value, dict):
        return {k: as_shown(v) for k, v in value.items()}
    return value


def says(expected: str, rule: str | None = None) -> WrapValidator:
    """Whatever pydantic finds wrong with a value, say ``<expected>, got <value>`` (or, for a
    value of the right kind out of bounds, ``<rule>, got <value>``): the messages stay ours,
    whatever pydantic's own wording."""

    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as e:
            only_rules = rule and all(err["type"] in _RULES for err in e.errors())
            said = rule if only_rules else expected
            raise ValueError(f"{said}, got {as_shown(value)!r}") from None

    return WrapValidator(check)


def one_of(kind: type[StrEnum]) -> WrapValidator:
    return says(f"expected {' | '.join(kind)}")


# Environment values arrive as strings: numbers are parsed, lists split at commas. Numbers
# are strict otherwise, since TOML's true is not a number.
as_int = BeforeValidator(lambda v: int(v) if isinstance(v, str) else v)
as_float = BeforeValidator(lambda v: float(v) if isinstance(v, str) else v)
as_list = BeforeValidator(
    lambda v: [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v
)

Count = Annotated[int, Strict(), Ge(0), as_int, says(WHOLE, "expected 0 or more")]
Amount = Annotated[float, Strict(), Ge(0), as_float, says(NUMBER, "expected 0 or more")]
Text = Annotated[
    str, StringConstraints(strict=True, min_length=1), says(STRING, "must not be empty")
]
Texts = Annotated[tuple[StrictStr, ...], as_list, says(STRINGS)]
Flag = Annotated[bool, says(FLAG)]  # as text (the environment) also 1/0, yes/no, on/off
AtLeastOne = Annotated[int, Strict(), Ge(1), as_int, says(WHOLE, "must be at least 1")]
Port = Annotated[int, Strict(), Ge(1), Le(65535), as_int, says(WHOLE, "expected 1 to 65535")]


def _networks(v: tuple[str, ...]) -> tuple[str, ...]:
    for n in v:
        ipaddress.ip_network(n, strict=False)  # ValueError: said by says below
    return v


Networks = Annotated[
    tuple[StrictStr, ...],
    as_list,
    AfterValidator(_networks),
    says("expected a list of addresses or networks, e.g. 10.0.0.0/8"),
]


def _servers(url: str) -> str:
    """A URL's hosts and ports read now (config/topology.py), as its adapter will read them: a
    malformed one stops the start naming the field and the bad part, not a driver's
    traceback at the first connection."""
    if problem := address_problem(url):
        raise ValueError(f"{problem}, in {redact_url(url)}")
    return url


StoreUrl = Annotated[
    str,
    StringConstraints(strict=True, pattern=r"^(sqlite:///|postgres(ql)?://)"),
    says(STRING, "expected sqlite:///PATH or postgresql://..."),
    AfterValidator(_servers),
]
# Each database of a split store; its checks apart from the list's, so that a bad one is
# named by its place (store.shards[1]).
ShardUrl = Annotated[
    str,
    StringConstraints(strict=True, pattern=r"^postgres(ql)?://"),
    says(STRING, "expected postgresql://..."),
    AfterValidator(_servers),
]


def _a_list(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected a list of postgresql:// URLs, got {as_shown(value)!r}")
    return value


ShardUrls = Annotated[tuple[ShardUrl, ...], BeforeValidator(_a_list), as_list]  # as_list first


def _sentinel_url(url: str) -> str:
    """A ``redis+sentinel://`` URL is read whole now (config/topology.py), so that a bad one stops
    the start naming the field, rather than the first connection failing later."""
    if is_sentinel_url(url):
        sentinel_address(url)  # its ValueError says what is wrong, and not the password
    return url


IndexUrl = Annotated[
    str,
    StringConstraints(
        # rediss: over TLS, one Redis or a cluster (index/redis/cluster.py reads both schemes)
        strict=True,
        pattern=r"^(memory://|rediss?(\+cluster)?://|redis\+sentinel://)",
    ),
    says(
        STRING,
        "expected memory://, redis[s]://..., redis[s]+cluster://... or redis+sentinel://...",
    ),
    AfterValidator(_sentinel_url),
    AfterValidator(_servers),
]
LogUrl = Annotated[
    str,
    StringConstraints(strict=True, pattern=r"^(outbox://|nats://|kafka://)"),
    says(STRING, "expected outbox://, nats://... or kafka://..."),
    AfterValidator(_servers),
]

# The file's modes and boards take numbers from TOML only: no strings.
Integer = Annotated[int, Strict(), says(WHOLE)]
Name = Annotated[
    str,
    StringConstraints(strict=True, pattern=NAME_RE.pattern),
    says(STRING, f"must match {NAME_RE.pattern}"),
]

TABLE = ConfigDict(extra="forbid", use_attribute_docstrings=True)
