"""Loopback ports for the servers the tests start (clusters, podium processes).

A port is chosen free, then closed, and only later bound by the server: another process
could take it meanwhile. So the ports come from below the kernel's ephemeral range (where
``bind(("127.0.0.1", 0))`` and outgoing connections take theirs, in every process on the
machine), and under pytest-xdist each worker has a slice of that range of its own: two
workers of one run never pick the same port, and no other program is handed it by the
kernel. Within a slice the choice is random, so that two runs at once seldom meet either.
"""

from __future__ import annotations

import os
import random
import socket

LOW, HIGH = 12_000, 22_000  # below the ephemeral range; +10000 stays below it too
_given: set[int] = set()  # not handed out twice by one process


def _slice() -> range:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    width = (HIGH - LOW) // max(1, workers)
    start = LOW + (index % max(1, workers)) * width
    return range(start, start + width)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, *, also: int | None = None) -> list[int]:
    """``n`` free loopback ports of this process's own; with ``also``, each one's
    ``port + also`` is free too (a Redis node's cluster bus)."""
    candidates = [p for p in _slice() if p not in _given]
    random.shuffle(candidates)
    found: list[int] = []
    for port in candidates:
        if _free(port) and (also is None or _free(port + also)):
            found.append(port)
            _given.add(port)
            if len(found) == n:
                return found
    raise RuntimeError(f"no {n} free loopback ports in {_slice()}")


def free_port() -> int:
    [port] = free_ports(1)
    return port
