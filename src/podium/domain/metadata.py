"""Entry metadata: the small JSON object a result may carry (a car, a character, a replay
id), shown on the board entry whose score that result set.

Held everywhere past the API as one canonical string (compact, keys sorted, UTF-8), so that
a retry with the same object in another key order is the same content (invariant 2 of
docs/architecture.md), its size is measured once, and the store, the change log and the
index carry it without parsing it again. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

METADATA_MAX = 512  # bytes of the canonical form
METADATA_IS = f"a JSON object of at most {METADATA_MAX} bytes as compact UTF-8 JSON"

_canonical = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
).encode


class MetadataError(ValueError):
    """A metadata value that is not a JSON object, or too large."""


def canonical(value: Any) -> str:
    """The canonical form of a metadata object; ``MetadataError`` saying why it is refused."""
    if not isinstance(value, dict):
        raise MetadataError(f"must be a JSON object, not {type(value).__name__}")
    try:
        text = _canonical(value)
        size = len(text.encode())  # a lone surrogate has no UTF-8: a ValueError too
    except (TypeError, ValueError) as e:  # a key that is not a string, NaN, a stranger
        raise MetadataError(f"must be plain JSON: {e}") from None
    if size > METADATA_MAX:
        raise MetadataError(
            f"is {size} bytes as compact UTF-8 JSON, past the {METADATA_MAX} allowed"
        )
    return text


def metadata_problem(field: str, value: Any) -> str | None:
    """Why ``value`` cannot be the metadata named ``field``, or None."""
    try:
        canonical(value)
    except MetadataError as e:
        return f"{field} {e}"
    return None


def shown(text: str | None) -> dict[str, Any] | None:
    """The object a stored canonical string holds, as a read shows it."""
    return None if text is None else json.loads(text)
