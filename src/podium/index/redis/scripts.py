"""The server-side scripts of the Redis adapters (``lua/``), read from the package, and how
they are run: by SHA1 (EVALSHA), with the whole text only when a server does not hold it
yet (NoScriptError: a server just started, or a node of a cluster that never ran it; the
EVAL loads it there, so the next call is by SHA1 again).

Reads run as ``EVALSHA_RO``: a script that only reads (``#!lua flags=no-writes``), which
Redis Cluster may route to a replica (``read_from_replicas``) and which Redis holds to
reading. redis-py's ``register_script`` is not used: its reload (``SCRIPT LOAD`` on every
primary) never reaches a replica, and it knows no ``_RO`` form.

A script's keys must hash to one slot on a cluster: redis-py's cluster client checks that
before it sends (a script given keys of two slots is a bug, ``InternalError``), and
``index/redis/keys.py`` gives every key one script touches the same hash tag.

A line ``--#include <name>`` in a script is replaced by the text of ``lua/<name>.lua``:
functions that two scripts share (``place.lua``) are written once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

INCLUDE = "--#include "


def lua(name: str) -> str:
    text = (resources.files("podium.index.redis") / "lua" / f"{name}.lua").read_text()
    if INCLUDE not in text:
        return text
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith(INCLUDE):
            line = lua(line[len(INCLUDE) :].strip())
        lines.append(line)
    return "".join(lines)


class Script:
    """One script of ``lua/``, for any client (one Redis, or a cluster)."""

    __slots__ = ("_by_sha", "_whole", "sha", "text")

    def __init__(self, name: str, *, readonly: bool = False) -> None:
        self.text = lua(name)
        self.sha = hashlib.sha1(self.text.encode()).hexdigest()
        self._by_sha, self._whole = ("EVALSHA_RO", "EVAL_RO") if readonly else ("EVALSHA", "EVAL")

    async def __call__(self, client: Any, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return await client.execute_command(self._by_sha, self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.execute_command(self._whole, self.text, len(keys), *keys, *args)
