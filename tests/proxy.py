"""A TCP proxy that a test can cut and restore, or slow: a real outage of a real backend,
or a slow link to it, without touching the machine's shared service.

It listens on loopback by default, or on an address of a test's own net
(``tests/netns.py``), whose hosts then reach the backend through it. ``delay_s`` holds
every chunk that long before passing it on, each way, in order: the delay a long link
adds, which the machine's kernel cannot (it has no ``netem``)."""

from __future__ import annotations

import asyncio
import contextlib


class Proxy:
    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.host = host
        self.port = 0
        self.delay_s = 0.0  # read at each chunk: a test may change it while links are open
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Refuse new connections and drop the open ones, like a crashed server."""
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

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            # Chunks in order, each passed on ``delay_s`` after it arrived: a reader that
            # never waits and a writer that waits for each chunk's time, so that a slow
            # link still carries as much as a fast one, only later.
            chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

            async def read() -> None:
                with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                    while data := await src.read(65536):
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

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._links -= {writer, up_writer}
