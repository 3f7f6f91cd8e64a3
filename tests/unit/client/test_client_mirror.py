"""The blocking client is the asyncio client with the awaits taken out, line for line, as
httpx and redis-py keep theirs: written twice so that each reads plainly, and held here to
stay one design. A change to one client that is not made to the other fails this test."""

from __future__ import annotations

import re
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[3] / "src" / "podium" / "client"

# What differs by nature, whole lines: the docstring, the imports, the default sleep.
LINES = {
    '"""``AsyncClient``: the asyncio client, for game servers and tools on an event loop."""': (
        '"""``Client``: the blocking client, for game servers and tools without an event loop."""'
    ),
    "import asyncio": None,
    "from collections.abc import Awaitable, Callable, Sequence": (
        "import time\nfrom collections.abc import Callable, Sequence"
    ),
    "        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,": (
        "        sleep: Callable[[float], None] = time.sleep,"
    ),
}
# Then, within lines, what makes asyncio code blocking code.
WORDS = [
    (r"\basync (def|with|for)\b", r"\1"),
    (r"\bawait ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\bAsync(?=[A-Z])", ""),
]


def unasync(source: str) -> str:
    out: list[str] = []
    for line in source.splitlines():
        if line in LINES:
            replaced = LINES[line]
            if replaced is not None:
                out.extend(replaced.splitlines())
            continue
        for pattern, repl in WORDS:
            line = re.sub(pattern, repl, line)
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_blocking_client_is_the_async_one_without_awaits() -> None:
    expected = unasync((CLIENT / "_async.py").read_text())
    actual = (CLIENT / "_sync.py").read_text()
    assert actual == expected, "client/_sync.py and client/_async.py differ beyond their awaits"
