"""What a value from outside must look like: ids, countries, the names players see, and the
capacities of a match, a friends list and a board's score.

Written once here, pure: the API's schemas publish these rules (as JSON Schema patterns and
bounds, in the OpenAPI document) and the use cases check them again, so that a caller other
than the HTTP API (the command line, the demo, a test) is held to the very same rules. Each
``*_problem`` function says why a value is refused, or None when it is fine; the caller
raises the error of its own layer.
"""

from __future__ import annotations

import functools
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
# A key's name follows the rules of a player's name (the admin reads it in lists of keys, and
# ``podium keys list`` prints it on a terminal), with room for more.
KEY_NAME_MAX = 64
# Combining marks one character carries at most: Vietnamese stacks two, the heaviest scripts
# in use four; a flood of them ("zalgo") runs over the lines above and below.
MARKS_PER_BASE = 4

# Capacities. One request carries at most MAX_RESULTS players (``server.max_results_per_match``
# may allow fewer); a player lists at most MAX_FRIENDS friends, the most a friends page ranks.
MAX_RESULTS = 100
MAX_FRIENDS = 1000

# Controls, format characters (the bidi overrides and isolates, zero-width spaces, BOM),
# lone surrogates, line and paragraph separators...
_UNPRINTABLE = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# ...but the joiners that emoji sequences and some scripts are written with (between two
# characters), and the tags that spell a subdivision's flag (after U+1F3F4, ended by U+E007F).
ZWNJ, ZWJ = 0x200C, 0x200D
_JOINERS = {ZWNJ, ZWJ}
FLAG, TAGS, CANCEL_TAG = 0x1F3F4, range(0xE0020, 0xE007F), 0xE007F
# Combining marks that do not take a space of their own: they sit on the character before.
_MARKS = {"Mn", "Me"}
# Characters that show nothing: spaces, and these letters and symbols, which draw nothing
# (the Hangul fillers, the braille blank, a musical null notehead). Every other character
# left (letters, digits, punctuation, symbols, spacing marks, and private-use and unassigned
# code points, which draw at least a box) shows a glyph.
_SPACES = "Zs"
BLANKS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x1D159})


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
    """Why a name shown to players (or an admin's key name) is refused, None when it is fine.

    The rules, in the order they are checked: not empty or only spaces; no character that
    is not printable (NUL, a newline, ESC, U+202E and the other bidi controls, zero-width
    spaces); a joiner (U+200C, U+200D) only between two characters; tag characters only in
    a flag's sequence; a combining mark only on a character, and at most ``MARKS_PER_BASE``
    on one; and at least one character that shows a glyph (not only U+3164, U+2800, spaces
    and marks). ``name_pattern()`` is the same rule as a regular expression."""
    if not value.strip():
        return "must not be empty or only spaces"
    for ch in value:
        cp = ord(ch)
        if unicodedata.category(ch) in _UNPRINTABLE and cp not in _JOINERS and not _sequenced(cp):
            return f"must not contain {_named(ch)}"
    marks = -1  # marks on the character before; -1: there is none to sit on
    visible = False
    i, n = 0, len(value)
    while i < n:
        cp = ord(value[i])
        cat = unicodedata.category(value[i])
        if cp in _JOINERS:
            if i == 0 or i == n - 1 or ord(value[i + 1]) in _JOINERS:
                return f"{_named(value[i])} may only stand between two characters"
            marks = -1  # what follows a joiner is a new character, not a mark of the last
        elif _sequenced(cp):
            return f"tag characters ({_named(value[i])}) may only spell a flag after U+1F3F4"
        elif cat in _MARKS:
            if marks < 0:
                return f"combining mark {_named(value[i])} has no character to sit on"
            marks += 1
            if marks > MARKS_PER_BASE:
                return f"at most {MARKS_PER_BASE} combining marks on one character"
        else:
            marks = 0
            visible = visible or (cat != _SPACES and cp not in BLANKS)
            if cp == FLAG:
                i = _flag_end(value, i + 1)
                continue
        i += 1
    if not visible:
        return "must show a visible character, not only blanks such as U+3164 or U+2800"
    return None


def _sequenced(cp: int) -> bool:
    """A tag character: printable only inside a flag's sequence."""
    return cp in TAGS or cp == CANCEL_TAG


def _flag_end(value: str, i: int) -> int:
    """Past a flag's tag sequence starting at ``i`` (tag letters, then the cancel tag), or
    ``i`` itself when none starts there."""
    j = i
    while j < len(value) and ord(value[j]) in TAGS:
        j += 1
    if j > i and j < len(value) and ord(value[j]) == CANCEL_TAG:
        return j + 1
    return i


def _named(ch: str) -> str:
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'a control')})"


def name_problem(field: str, value: str, limit: int = NAME_MAX) -> str | None:
    """A name's problem, with its field: a player's name, or a key's (``KEY_NAME_MAX``)."""
    if len(value) > limit:
        return f"{field}: at most {limit} characters, got {len(value)}"
    why = text_problem(value)
    return None if why is None else f"{field}: {why}"


def avatar_problem(value: str) -> str | None:
    """An avatar: a URL of printable characters, no spaces, at most AVATAR_MAX (the API also
    asks for ``https://``, ``AVATAR``; the demo's own are paths on this origin)."""
    if len(value) > AVATAR_MAX:
        return f"at most {AVATAR_MAX} characters, got {len(value)}"
    if not value:
        return "must not be empty"
    for ch in value:
        if unicodedata.category(ch) in _UNPRINTABLE or ch.isspace():
            return f"must not contain {_named(ch)}"
    return None


@functools.cache
def name_pattern() -> str:
    """``text_problem`` as a regular expression, for the OpenAPI document: a sequence of
    characters each with at most MARKS_PER_BASE marks, a joiner between two of them, and a
    visible one among them. Its classes list only what they leave out, or few characters, so
    that a generator of matching strings (hypothesis, for schemathesis) stays quick; written
    with the characters themselves (no escapes beyond ``\\]^-[|``), so that Python's ``re``,
    ECMA 262 with the ``u`` flag and Rust's ``regex`` read it alike. Lone surrogates are left
    out of it (no UTF-8 text, and so no JSON body on the wire, can carry one: Rust refuses a
    pattern naming them); ``text_problem`` refuses them."""
    marks: list[int] = []
    blank: list[int] = sorted(BLANKS)
    never: list[int] = []  # neither a base nor a mark: unprintable, joiners, tags
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat in _MARKS:
            marks.append(cp)
        elif cat == _SPACES:
            blank.append(cp)
        elif cat in _UNPRINTABLE and cat != "Cs":  # joiners and tags are format characters
            never.append(cp)
    blank.sort()
    vis = _char_class(sorted({*marks, *blank, *never}), negated=True)
    inv = _char_class(blank)
    mark = _char_class(marks)
    tags = _char_class(list(TAGS))
    flag = f"{chr(FLAG)}(?:{tags}+{chr(CANCEL_TAG)})?"
    on = f"{mark}{{0,{MARKS_PER_BASE}}}"
    joiner = _char_class(sorted(_JOINERS))
    seen = f"(?:{flag}|{vis}){on}"
    anyone = f"(?:{flag}|{vis}|{inv}){on}"
    return f"^(?:{inv}{on}{joiner}?)*{seen}(?:{joiner}?{anyone})*$"


@functools.cache
def avatar_pattern() -> str:
    """``AVATAR`` and ``avatar_problem`` as a regular expression (the length is the
    schema's maxLength)."""
    hidden = [
        cp
        for cp in range(0x110000)
        if unicodedata.category(chr(cp)) in _UNPRINTABLE - {"Cs"} or chr(cp).isspace()
    ]
    return f"^https://{_char_class(hidden, negated=True)}+$"


def _char_class(code_points: list[int], negated: bool = False) -> str:
    """A regular expression's class of the sorted ``code_points`` (every other one, when
    ``negated``), as ranges."""
    parts: list[str] = []
    start = prev = code_points[0]
    for cp in [*code_points[1:], -1]:
        if cp == prev + 1:
            prev = cp
            continue
        first, last = _literal(start), _literal(prev)
        parts.append(first if start == prev else f"{first}-{last}")
        start = prev = cp
    return ("[^" if negated else "[") + "".join(parts) + "]"


def _literal(cp: int) -> str:
    ch = chr(cp)
    return "\\" + ch if ch in "\\]^-[|" else ch


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
