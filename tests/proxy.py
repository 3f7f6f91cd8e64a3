"""A TCP proxy that a test can cut and restore, or slow: a real outage of a real backend,
or a slow link to it, without touching the machine's shared service.

It listens on loopback by default, or on an address of a test's own net
(``tests/netns.py``), whose hosts then reach the backend through it. ``delay_s`` holds
every chunk that long before passing it on, each way, in order: the delay a long link
adds, which the machine's kernel cannot (it has no ``netem``).

``home``: a ``Loop`` (an event loop on a thread of its own) to run on, instead of the test's
loop. A test whose own loop is busy (thousands of clients' tries) would otherwise slow every
link it carries by as long as its loop lags, a delay no network adds; on a loop of their
own the proxies keep their share of the process (the interpreter switches threads every few
milliseconds). ``start``, ``cut`` and ``restore`` are awaited from the test's loop as
before."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Loop:
    """An event loop running on a thread of its own, until ``close``."""

    def __init__(self, name: str = "proxies") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` run on this loop, awaited from the caller's."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    async def close(self) -> None:
        """Every task still on the loop cancelled, then the loop stopped and closed."""

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        await self.run(cancel_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self.loop.close()


class Proxy:
    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        host: str = "127.0.0.1",
        home: Loop | None = None,
    ) -> None:
        self.target = (target_host, target_port)
        self.host = host
        self.port = 0
        self.delay_s = 0.0  # read at each chunk: a test may change it while links are open
        self.home = home
        # Round trips begun, over every link: each time the client speaks after the server
        # did (or first). A pipelined request (asyncpg's parse, bind and execute in one
        # write) is one; what a client sends before the answer came is part of the same.
        self.trips = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def _there(self, work: Coroutine[Any, Any, None]) -> None:
        if self.home is None:
            await work
        else:
            await self.home.run(work)

    async def start(self) -> None:
        await self._there(self._start())

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Refuse new connections and drop the open ones, like a crashed server."""
        await self._there(self._cut())

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for w in list(self._links):
            w.transport.abort()
        self._links.clear()

    async def restore(self) -> None:
        await self.start()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._links |= {writer, up_writer}
        loop = asyncio.get_running_loop()
        spoke = [False]  # whether the client spoke last on this link

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, up: bool) -> None:
            # Chunks in order, each passed on ``delay_s`` after it arrived: a reader that
            # never waits and a writer that waits for each chunk's time, so that a slow
            # link still carries as much as a fast one, only later.
            chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

            async def read() -> None:
                with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                    while data := await src.read(65536):
                        if up and not spoke[0]:
                            self.trips += 1
                        spoke[0] = up
                        chunks.put_nowait((loop.time() + self.delay_s, data))
                chunks.put_nowait((loop.time() + self.delay_s, b""))

            reading = asyncio.create_task(read())
            try:
                with contextlib.suppress(OSError):
                    while True:
                        due, data = await chunks.get()
                        if (wait := due - loop.time()) > 0:
                            await asyncio.sleep(wait)
                        if not data:
                            break
                        dst.write(data)
                        await dst.drain()
            finally:
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reading
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer, up=True), pipe(up_reader, writer, up=False))
        self._links -= {writer, up_writer}
