"""What a value from outside must look like: ids, countries, the names players see, and the
capacities of a match, a friends list and a board's score.

Written once here, pure: the API's schemas publish these rules (as JSON Schema patterns and
bounds, in the OpenAPI document) and the use cases check them again, so that a caller other
than the HTTP API (the command line, the demo, a test) is held to the very same rules. Each
``*_problem`` function says why a value is refused, or None when it is fine; the caller
raises the error of its own layer.
"""

from __future__ import annotations

import re
import unicodedata

from podium.domain.codec import MAX_BITS, ScoreCodec

# A player's or a match's id. Checked with fullmatch: "$" would let "p_1\n" through.
ID = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}"
ID_RE = re.compile(ID)
ID_IS = "1 to 64 of letters, digits, _.:-"

# A country: ISO 3166-1 alpha-2. A profile's country, and a group of a board split by it.
COUNTRY = r"[A-Z]{2}"
COUNTRY_RE = re.compile(COUNTRY)

# A name a player sees, and an avatar: a URL the game chose.
NAME_MAX = 32
AVATAR_MAX = 512
AVATAR = r"https://\S+"
# A key's name: printable, not only spaces (the admin reads it in lists of keys).
KEY_NAME = r"[^\x00-\x1f\x7f]*[^\x00-\x20\x7f][^\x00-\x1f\x7f]*"
KEY_NAME_MAX = 64

# Capacities. One request carries at most MAX_RESULTS players (``server.max_results_per_match``
# may allow fewer); a player lists at most MAX_FRIENDS friends, the most a friends page ranks.
MAX_RESULTS = 100
MAX_FRIENDS = 1000

# Controls, format characters (the bidi overrides and isolates, zero-width spaces, BOM),
# lone surrogates, line and paragraph separators...
_UNPRINTABLE = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# ...but the joiners and tags that emoji sequences and some scripts are written with.
_JOINERS = {0x200C, 0x200D, *range(0xE0020, 0xE0080)}


def anchored(pattern: str) -> str:
    """A pattern as JSON Schema (ECMA 262) publishes it: matched anywhere unless anchored.
    pydantic's regex engine has no "$ before a final newline", so ``$`` is the end."""
    return f"^{pattern}$"


def id_problem(field: str, value: str) -> str | None:
    return None if ID_RE.fullmatch(value) else f"{field} {value!r} must match {ID}"


def country_problem(value: str) -> str | None:
    if COUNTRY_RE.fullmatch(value):
        return None
    return f"country {value!r} must be an ISO 3166-1 alpha-2 code"


def text_problem(value: str) -> str | None:
    """Why a name shown to players is refused: one with only spaces, or with a character
    that is not printable (NUL, U+202E and the other bidi controls)."""
    if not value.strip():
        return "must not be empty or only spaces"
    for ch in value:
        if unicodedata.category(ch) in _UNPRINTABLE and ord(ch) not in _JOINERS:
            return f"must not contain U+{ord(ch):04X} ({unicodedata.name(ch, 'a control')})"
    return None


def friends_problem(count: int) -> str | None:
    return None if count <= MAX_FRIENDS else f"at most {MAX_FRIENDS} friends, got {count}"


def results_problem(count: int, limit: int) -> str | None:
    """A match's players: at least one, at most ``limit`` (``server.max_results_per_match``)."""
    if count == 0:
        return "results must list at least one player"
    if count > limit:
        return f"a match has at most {limit} players, got {count}"
    return None


def capacity(codec: ScoreCodec, what: str = "total") -> str:
    """What a board's score holds, said where a total or a mode's points would not fit:
    ``|total| <= 9007199254740991: 53 bits, the other 0 hold the time``."""
    return (
        f"|{what}| <= {codec.points_limit - 1}: {MAX_BITS - codec.time_bits} bits, "
        f"the other {codec.time_bits} hold the time"
    )
