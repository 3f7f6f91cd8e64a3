"""Plumbing of ``split_index.py``: a private ``redis-server``, a season-like board, and a
fast loader that writes it straight into the keys the updater's writes produce.

The board is ``--members`` players with 14-character ids (``p_000000012345``), each with a
score packed by the board's codec (``BoardSpec.score``'s ``ScoreCodec.encode``): lognormal
points (most players have a few thousand, a few have hundreds of thousands) and a time
spread evenly over the part of the season gone by. A player's row goes to
``Keys(prefix, shard_tag(shard_of(id, S))).board(key)`` on a split index, and to
``Keys(prefix).board(key)`` on one shard: the keys ``RedisIndex.write`` (what the updater
calls) writes a player's row to. The loader skips the updater's script and writes ``ZADD``
commands in RESP on one socket, many in flight, because a board of ten million players
through the record path would take hours on this machine; what it leaves out (the per-player
versions a board whose totals can fall keeps, the copy of profiles) is said where its
figures are printed.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import tempfile
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from _harness import _die_with_parent, free_port
from podium.domain.boards import BoardSpec
from podium.domain.sharding import shard_of, shard_tag
from podium.domain.windows import Window
from podium.index.redis.keys import Keys
from podium.ports import BoardKey

PER_COMMAND = 1000  # members per ZADD
CHUNK = 16_000  # members generated, grouped by shard and sent at a time


def player(i: int) -> str:
    return f"p_{i:012d}"


# -- a private redis-server -----------------------------------------------------------------


@dataclass
class PrivateRedis:
    """A ``redis-server`` of our own on a free loopback port: no persistence, no memory
    limit. It holds millions of members, so it never is the machine's shared Redis."""

    name: str
    port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            shutil.which("redis-server") or "redis-server",
            *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)),
            *("--save", "", "--appendonly", "no", "--maxmemory", "0"),
            *("--logfile", str(self.dir / "redis.log")),
        ]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, start_new_session=True
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.command("PING") == "PONG":
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: redis-server did not start on {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)

    def command(self, *args: str) -> str:
        """One command on a fresh connection, for the few control reads (INFO, FLUSHALL)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=120) as s:
            s.sendall(resp([a.encode() for a in args]))
            f = s.makefile("rb")
            return read_reply(f)

    def info(self, section: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in self.command("INFO", section).splitlines():
            k, sep, v = line.partition(":")
            if sep:
                out[k] = v
        return out

    def cpu_s(self) -> float:
        i = self.info("cpu")
        return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])

    def used_memory(self) -> int:
        return int(self.info("memory")["used_memory"])

    def flushall(self) -> None:
        self.command("FLUSHALL", "SYNC")


def private_redis(stack: contextlib.ExitStack, name: str) -> PrivateRedis:
    tmp = Path(tempfile.mkdtemp(prefix=f"podium-bench-{name}-"))
    stack.callback(shutil.rmtree, tmp, True)
    server = PrivateRedis(name, free_port(), tmp)
    stack.callback(server.stop)
    server.start()
    return server


def resp(args: Sequence[bytes]) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def read_reply(f: object) -> str:
    """One RESP2 reply (integers, simple and bulk strings are all the loader needs)."""
    line: bytes = f.readline()  # type: ignore[attr-defined]
    kind, body = line[:1], line[1:-2]
    if kind in (b"+", b":"):
        return body.decode()
    if kind == b"$":
        n = int(body)
        return "" if n < 0 else f.read(n + 2)[:-2].decode()  # type: ignore[attr-defined]
    raise RuntimeError(f"redis answered {line!r}")


# -- the board ------------------------------------------------------------------------------


def season_scores(spec: BoardSpec, window: Window, now: int, n: int, seed: int) -> array[int]:
    """``n`` packed scores, player i's at position i (so that the board of the first million
    players is a part of the board of ten million)."""
    rng = random.Random(seed)
    codec = spec.codec
    elapsed = max(1, now - window.start)
    out = array("q", bytes(8 * n))
    with progress() as bar:
        task = bar.add_task("scores", total=n)
        for start in range(0, n, CHUNK):
            stop = min(n, start + CHUNK)
            for i in range(start, stop):
                points = 1 + int(rng.lognormvariate(7.5, 1.3))
                out[i] = codec.encode(points, rng.randrange(elapsed))
            bar.advance(task, stop - start)
    return out


def shards_of(n: int, shards: int) -> array[int]:
    out = array("H", bytes(2 * n))
    for i in range(n):
        out[i] = shard_of(player(i), shards)
    return out


def board_keys(prefix: str, key: BoardKey, shards: int) -> list[str]:
    """The sorted set each shard's rows live in, as ``bootstrap`` builds the index: untagged
    keys on one shard of one Redis, a shard's tag on each part of a split one."""
    if shards == 1:
        return [Keys(prefix).board(key)]
    return [Keys(prefix, shard_tag(s)).board(key) for s in range(shards)]


def progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    )


def _commands(
    keys: Sequence[str], n: int, scores: array[int], where: array[int] | None
) -> Iterator[tuple[int, list[bytes]]]:
    """(members, ZADD commands) per chunk of players, grouped by their key."""
    bkeys = [k.encode() for k in keys]
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        groups: list[list[str]] = [[] for _ in keys]
        for i in range(start, stop):
            s = str(scores[i])
            row = f"${len(s)}\r\n{s}\r\n$14\r\n{player(i)}\r\n"
            groups[0 if where is None else where[i]].append(row)
        cmds: list[bytes] = []
        for k, rows in zip(bkeys, groups, strict=True):
            for j in range(0, len(rows), PER_COMMAND):
                part = rows[j : j + PER_COMMAND]
                head = b"*%d\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n" % (2 + 2 * len(part), len(k), k)
                cmds.append(head + "".join(part).encode())
        yield stop - start, cmds


def load(
    server: PrivateRedis,
    keys: Sequence[str],
    n: int,
    scores: array[int],
    where: array[int] | None,
    label: str,
) -> tuple[int, float]:
    """Pipelined ZADD of players ``0..n-1`` into ``keys`` (player i into ``keys[where[i]]``,
    or the one key); one chunk in flight while the next is built. Returns the members Redis
    says it added (every one is new) and the seconds it took."""
    added = 0
    t0 = time.perf_counter()
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=300) as sock,
        progress() as bar,
    ):
        f = sock.makefile("rb")
        task = bar.add_task(label, total=n)
        pending: tuple[int, int] | None = None  # (members, replies) of the chunk in flight
        for members, cmds in _commands(keys, n, scores, where):
            sock.sendall(b"".join(cmds))
            if pending is not None:
                added += sum(int(read_reply(f)) for _ in range(pending[1]))
                bar.advance(task, pending[0])
            pending = (members, len(cmds))
        if pending is not None:
            added += sum(int(read_reply(f)) for _ in range(pending[1]))
            bar.advance(task, pending[0])
    return added, time.perf_counter() - t0
