"""NATS for the tests: the machine's server, and private JetStream clusters started here.

The machine's NATS (``PODIUM_TEST_NATS``, default 127.0.0.1:4222) is shared: a test takes
a stream name of its own and deletes the stream afterwards (``own_stream``). Anything
destructive runs on a cluster of its own (``Cluster``): ``nats-server`` processes from the
installed binary, JetStream on, each with its own directory and free loopback ports,
killed with SIGKILL on demand and stopped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js import JetStreamContext

from tests.conftest import REQUIRE, need
from tests.ports import free_ports

NATS_URL = os.environ.get("PODIUM_TEST_NATS", "nats://127.0.0.1:4222")


def nats_server() -> str | None:
    return shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if os.access("/usr/sbin/nats-server", os.X_OK) else None
    )


def need_nats() -> str:
    """The machine's NATS URL, or a skip (a laptop) / failure (CI)."""
    need(NATS_URL, "NATS")
    return NATS_URL


def need_binary() -> str:
    binary = nats_server()
    if binary is None:
        message = "nats-server is not installed"
        if REQUIRE:
            pytest.fail(f"{message} and PODIUM_REQUIRE_SERVICES=1")
        pytest.skip(message)
    return binary


def stream_name() -> str:
    return f"podium-test-{secrets.token_hex(4)}"


async def delete_stream(urls: list[str], name: str) -> None:
    nc = await nats.connect(servers=urls, connect_timeout=2, max_reconnect_attempts=2)
    try:
        js = nc.jetstream()
        with suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(name)
        with suppress(nats.js.errors.NotFoundError):  # the relays' leases beside it
            await js.delete_key_value(f"{name}-relays")
    finally:
        await nc.close()


@asynccontextmanager
async def own_stream(urls: list[str]) -> AsyncIterator[str]:
    """A stream name nobody else uses; the stream, if made, is deleted afterwards."""
    name = stream_name()
    try:
        yield name
    finally:
        await delete_stream(urls, name)


Leaders = dict[str, str | None]  # a stream's consumers by name, and the node leading each


async def _leaders(js: JetStreamContext, stream: str) -> Leaders:
    return {
        c.name: c.cluster.leader if c.cluster else None for c in await js.consumers_info(stream)
    }


async def leaders(urls: list[str], stream: str) -> Leaders:
    """Which node leads each of the stream's consumers now."""
    nc = await nats.connect(servers=urls)
    try:
        return await _leaders(nc.jetstream(timeout=5), stream)
    finally:
        await nc.close()


async def settled(
    urls: list[str], stream: str, quiet_s: float = 4.0, timeout: float = 30.0
) -> Leaders:
    """Until the leaders of the stream's consumers have not changed for ``quiet_s``; they."""
    nc = await nats.connect(servers=urls)
    try:
        js = nc.jetstream(timeout=5)
        last: Leaders = {}
        since = time.monotonic()
        deadline = since + timeout
        while time.monotonic() < deadline:
            now = await _leaders(js, stream)
            if now != last or None in now.values():
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return last
            await asyncio.sleep(0.25)
        raise RuntimeError(f"the consumers of {stream} kept changing leaders: {last}")
    finally:
        await nc.close()


MAKE_ATTEMPTS = 3


class Ahead:
    """Streams made on a cluster ahead of need, each made by ``make(name)`` and then left
    until its consumers' leaders have settled (``settled``), ``depth`` at a time, each in
    a thread of its own (a test's event loop lasts one test); ``take`` gives the next.
    What is left at ``close`` is deleted."""

    def __init__(
        self, urls: list[str], make: Callable[[str], Awaitable[None]], depth: int = 3
    ) -> None:
        self.urls = urls
        self.make = make
        self.depth = depth
        self._pool = ThreadPoolExecutor(depth, thread_name_prefix="streams ahead")
        self._queue: deque[Future[tuple[str, Leaders]]] = deque()

    async def _one(self, name: str) -> tuple[str, Leaders]:
        # Made again after a failure: on a loaded machine a cluster's answer to a stream's
        # creation can outlast the client's timeout (the stream is made, or not: either way
        # making it again is safe), and a test would fail at its setup for it.
        for attempt in range(MAKE_ATTEMPTS):
            try:
                await self.make(name)
                break
            except Exception:
                if attempt == MAKE_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(1.0)
        return name, await settled(self.urls, name)

    def _more(self) -> None:
        while len(self._queue) < self.depth:
            name = stream_name()
            self._queue.append(self._pool.submit(asyncio.run, self._one(name)))

    async def take(self) -> tuple[str, Leaders]:
        self._more()
        made = self._queue.popleft()
        self._more()
        return await asyncio.wrap_future(made)

    def close(self) -> None:
        for made in self._queue:
            with suppress(Exception):
                name, _ = made.result()
                asyncio.run(delete_stream(self.urls, name))
        self._pool.shutdown()


class Cluster:
    """``size`` nats-server processes in one JetStream cluster, on loopback."""

    def __init__(self, binary: str, root: Path, size: int = 3) -> None:
        self.binary = binary
        self.root = root
        self.size = size
        ports = free_ports(2 * size)
        self.client_ports, self.route_ports = ports[:size], ports[size:]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * size
        root.mkdir(parents=True, exist_ok=True)

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports]

    @property
    def url(self) -> str:
        """The log's URL form: every server of the cluster."""
        return "nats://" + ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def _config(self, i: int) -> Path:
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.route_ports)
        store = self.root / f"n{i}" / "js"
        store.mkdir(parents=True, exist_ok=True)
        path = self.root / f"n{i}.conf"
        path.write_text(
            f"server_name: n{i}\n"
            f"listen: 127.0.0.1:{self.client_ports[i]}\n"
            f'jetstream {{ store_dir: "{store}", max_memory_store: 64MB, max_file_store: 1GB }}\n'
        )
        if self.size > 1:  # one node is a server of its own, not a cluster of one
            path.write_text(
                path.read_text()
                + f"cluster {{ name: podium-test, listen: 127.0.0.1:{self.route_ports[i]}, "
                f"routes: [{routes}] }}\n"
            )
        return path

    def start(self, i: int) -> None:
        log = (self.root / f"n{i}.log").open("ab")
        self.procs[i] = subprocess.Popen(
            [self.binary, "-c", str(self._config(i))], stdout=log, stderr=subprocess.STDOUT
        )

    def kill(self, i: int) -> None:
        """SIGKILL: no goodbye to its peers, nothing flushed."""
        proc = self.procs[i]
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            self.procs[i] = None

    def stop(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
                self.procs[i] = None

    async def ready(self, timeout: float = 30.0) -> None:
        """Until every node answers and the cluster can place a stream on every node (3
        replicas at most)."""
        deadline = time.monotonic() + timeout
        probe = f"probe-{secrets.token_hex(3)}"
        while True:
            try:
                nc = await nats.connect(servers=self.urls, connect_timeout=1)
                try:
                    js = nc.jetstream(timeout=2)
                    await js.add_stream(
                        name=probe, subjects=[f"{probe}.>"], num_replicas=min(3, self.size)
                    )
                    await js.delete_stream(probe)
                    return
                finally:
                    await nc.close()
            except (TimeoutError, nats.errors.Error, OSError) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the NATS cluster did not come up: {e!r}") from e
                await asyncio.sleep(0.3)


def started(root: Path, size: int = 3) -> Cluster:
    """A running cluster, from synchronous code (a session fixture): the caller stops it."""
    c = Cluster(need_binary(), root, size)
    try:
        for i in range(size):
            c.start(i)
        # In a thread of its own: the caller may be inside a test's event loop.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, c.ready()).result()
    except BaseException:
        c.stop()
        raise
    return c


@asynccontextmanager
async def cluster(root: Path, size: int = 3) -> AsyncIterator[Cluster]:
    """A running cluster of ``size`` nodes, stopped and removed afterwards."""
    c = Cluster(need_binary(), root, size)
    try:
        for i in range(size):
            c.start(i)
        await c.ready()
        yield c
    finally:
        c.stop()


async def stream_messages(url: str, name: str, *, missing_ok: bool = False) -> list[Any]:
    """Every message the stream holds now, oldest first (those deleted between the two asks
    left out); with ``missing_ok``, none from a stream not made yet rather than an error."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        try:
            info = await js.stream_info(name)
        except nats.js.errors.NotFoundError:
            if missing_ok:
                return []
            raise
        out: list[Any] = []
        if not info.state.messages:
            # A stream made but still empty says first_seq 0, and asking for message 0 is
            # a 400 "bad request", not a "not found": nothing to read yet.
            return out
        for seq in range(max(info.state.first_seq, 1), info.state.last_seq + 1):
            try:
                out.append(await js.get_msg(name, seq))
            except nats.js.errors.NotFoundError:
                continue  # acknowledged and removed, or deleted, between the two asks
        return out
    finally:
        await nc.close()
