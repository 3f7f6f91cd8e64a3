"""The load itself: matches due on an open-loop schedule, each submitted by one of the
simulated game servers (spread over the API addresses), then read about by its players;
a sample of results watched until they reach the board. Everything goes through
``podium.client``; what happens is told to the ``Tally``."""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from podium.client import (
    AsyncClient,
    Board,
    Forbidden,
    NotFound,
    PodiumClientError,
    ProblemError,
    RetryPolicy,
    TransportFailed,
    Unauthorized,
)
from podium.loadgen import mix as m
from podium.loadgen.latency import Recorder
from podium.loadgen.setup import Settings, SetupError, direction, reached
from podium.loadgen.stats import NO_ANSWER, SUBMIT, Tally

POLL_S = 0.025  # between a watched result's rank reads: the precision of commit-to-board
MAX_WATCHERS = 32  # results watched at once; a sample past it is skipped (and counted)
DRAIN_S = 60.0  # how long the matches in flight at the end may take to finish
LAG_TICK_S = 0.05  # the generator's own loop is timed this often
# Seconds an idle connection is kept: below uvicorn's 5 s keep-alive, so that the client
# never sends on a connection the server is closing (a ReadError on the next request).
KEEPALIVE_S = 2.0


# Connections a client holds. httpcore's pool looks at every connection it holds for every
# request it places (and polls each idle one's socket), so one pool of hundreds costs the
# generator more CPU than the requests themselves: players read through many small pools.
POOL = 16


def transport() -> httpx.AsyncHTTPTransport:
    limits = httpx.Limits(
        max_connections=POOL, max_keepalive_connections=POOL, keepalive_expiry=KEEPALIVE_S
    )
    return httpx.AsyncHTTPTransport(limits=limits)


@dataclass(frozen=True)
class Match:
    """One match, drawn in full when it falls due, so that a seed gives the same traffic."""

    number: int
    due: float  # seconds into the run
    results: list[tuple[int, int]]  # (player number, points)
    duration_s: int
    # A player's reads, in order: (kind, board, whose): whose rank or friends, mostly theirs.
    reads: dict[int, list[tuple[str, str, int]]]
    watch: tuple[int, str] | None  # the result watched until it is on this board


@dataclass
class Run:
    """One load run. ``expected``: for each (player, board), the total its acknowledged
    submissions answered, furthest in the board's direction (``setup.direction``)."""

    s: Settings
    boards: list[Board]
    friended: dict[int, list[int]]
    clock: Callable[[], float] = time.monotonic
    tally: Tally = field(default_factory=Tally)
    expected: dict[tuple[int, str], int] = field(default_factory=dict)
    fatal: str | None = None
    # How late the generator's own loop ran its callbacks (and its CPU time): when it is
    # the one falling behind, that lateness is in every latency it reports.
    loop_lag: Recorder = field(default_factory=Recorder)
    cpu_s: float = 0.0
    cpu_started: float = 0.0
    in_flight: int = 0
    offered_s: float = 0.0  # when the last match fell due and the drain began
    started: float = 0.0
    done: bool = False
    _watchers: int = 0
    _friended: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._friended = sorted(self.friended)

    def now(self) -> float:
        return self.clock() - self.started

    def _draw(self, rng: random.Random, n: int, due: float) -> Match:
        s = self.s
        results = m.draw_match(rng, s.players, s.players_per_match)
        reads: dict[int, list[tuple[str, str, int]]] = {}
        names = [b.name for b in self.boards]
        for p, _ in results:
            mine = []
            for kind in s.mix.draw(rng):
                whose = p
                if kind == m.FRIENDS and p not in self.friended:
                    # A player with no friends list would read a board of one: a player
                    # who has one reads theirs instead, at the same moment.
                    whose = rng.choice(self._friended)
                mine.append((kind, rng.choice(names), whose))
            reads[p] = mine
        watch = None
        if rng.random() < s.commit_sample:
            watchable = [b.name for b in self.boards if direction(b) is not None]
            if watchable:
                watch = (results[0][0], rng.choice(watchable))
        return Match(n, due, results, m.draw_duration(rng), reads, watch)

    async def run(self) -> None:
        s = self.s
        rng = random.Random(s.seed)
        run_id = secrets.token_hex(4)  # match ids never repeat across runs, seed or not
        gate = asyncio.Semaphore(s.concurrency)

        async def counted_sleep(seconds: float) -> None:
            self.tally.retries += 1  # the client sleeps once before each retry
            await asyncio.sleep(seconds)

        servers = [
            AsyncClient(
                s.apis[i % len(s.apis)],
                s.key,
                timeout=s.timeout_s,
                retry=RetryPolicy(),
                sleep=counted_sleep,
                rng=random.Random(rng.random()),
                transport=transport(),
            )
            for i in range(max(s.game_servers, len(s.apis)))
        ]
        # Enough pools for every request the gate lets through, each API as many.
        pools = len(s.apis) * max(1, -(-s.concurrency // (POOL * len(s.apis))))
        readers = [
            AsyncClient(s.apis[i % len(s.apis)], timeout=s.timeout_s, transport=transport())
            for i in range(pools)
        ]
        tasks: set[asyncio.Task[None]] = set()
        self.started = self.clock()
        self.cpu_started = time.process_time()
        monitor = asyncio.create_task(self._monitor())
        try:
            for n, due in enumerate(m.arrivals(s.rate, rng)):
                if due >= s.duration_s or self.fatal is not None:
                    break
                wait = due - self.now()
                if wait > 0:
                    await asyncio.sleep(wait)
                match = self._draw(rng, n, due)
                server = servers[n % len(servers)]
                task = asyncio.create_task(
                    self._match(match, f"lg-{run_id}-{n}", server, readers, gate)
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            self.offered_s = self.now()
            if tasks:
                _, late = await asyncio.wait(set(tasks), timeout=DRAIN_S)
                for t in late:
                    t.cancel()
        finally:
            self.done = True
            monitor.cancel()
            self.cpu_s = time.process_time() - self.cpu_started
            for c in (*servers, *readers):
                await c.aclose()

    async def _monitor(self) -> None:
        while True:
            before = self.clock()
            await asyncio.sleep(LAG_TICK_S)
            self.loop_lag.record(self.clock() - before - LAG_TICK_S)

    async def _match(
        self,
        match: Match,
        match_id: str,
        server: AsyncClient,
        readers: list[AsyncClient],
        gate: asyncio.Semaphore,
    ) -> None:
        t = self.tally
        t.matches_sent += 1
        due = self.started + match.due
        results = [(m.player_id(p), points) for p, points in match.results]
        self.in_flight += 1
        try:
            async with gate:
                recorded = await server.submit(
                    match_id, results, duration_seconds=match.duration_s, mode=self.s.mode
                )
        except (Unauthorized, Forbidden) as e:
            self.fatal = f"the game server's key was refused: {e}"
            t.matches_failed += 1
            t.failed(SUBMIT, e.status)
            return
        except ProblemError as e:
            t.matches_failed += 1
            t.failed(SUBMIT, e.status)
            return
        except PodiumClientError as e:
            t.matches_failed += 1
            t.failed(SUBMIT, NO_ANSWER if isinstance(e, TransportFailed) else "unreadable")
            return
        finally:
            self.in_flight -= 1
        answered = self.clock()
        t.answered(SUBMIT, answered - self.started, answered - due)
        t.acknowledged(answered - self.started, len(results))
        ways = {b.name: direction(b) for b in self.boards}
        for p, _ in match.results:
            totals = recorded.totals(m.player_id(p))
            for board, way in ways.items():
                if way is None or board not in totals:
                    continue
                key, total = (p, board), totals[board]
                old = self.expected.get(key)
                if old is None or reached(total, old, way):
                    self.expected[key] = total
        jobs: list[Awaitable[None]] = [
            self._reads(p, reads, readers, gate, answered) for p, reads in match.reads.items()
        ]
        if match.watch is not None:
            p, board = match.watch
            watched = recorded.totals(m.player_id(p)).get(board)
            if watched is not None:
                jobs.append(self._watch(p, board, watched, readers, answered))
        await asyncio.gather(*jobs)

    async def _reads(
        self,
        player: int,
        reads: list[tuple[str, str, int]],
        readers: list[AsyncClient],
        gate: asyncio.Semaphore,
        due: float,
    ) -> None:
        """A player's reads after their match, one after another as a game's client makes
        them: the first due at the submission's answer, each next at the one before's."""
        t = self.tally
        reader = readers[player % len(readers)]
        for kind, board, whose in reads:
            pid = m.player_id(whose)
            ok = False
            self.in_flight += 1
            try:
                async with gate:
                    if kind == m.TOP:
                        await reader.page(board)
                    elif kind == m.RANK:
                        await reader.rank(board, pid)
                    else:
                        await reader.friends(board, pid)
                ok = True
            except NotFound:
                if kind == m.RANK:  # before the updater brought them in: a documented moment
                    t.rank_not_yet += 1
                else:
                    t.failed(kind, 404)
            except ProblemError as e:
                t.failed(kind, e.status)
            except PodiumClientError as e:
                t.failed(kind, NO_ANSWER if isinstance(e, TransportFailed) else "unreadable")
            finally:
                self.in_flight -= 1
            answered = self.clock()
            if ok:
                t.answered(kind, answered - self.started, answered - due)
            due = answered

    async def _watch(
        self, player: int, board: str, total: int, readers: list[AsyncClient], answered: float
    ) -> None:
        """Commit to board: from the submission's answer to the first rank read that shows
        its total (or one past it), read every POLL_S; "not seen" after the deadline. The
        time is an upper bound, late by at most a poll's gap and a read."""
        t = self.tally
        if self._watchers >= MAX_WATCHERS:
            t.commit_skipped += 1
            return
        way = next(direction(b) for b in self.boards if b.name == board)
        assert way is not None
        t.commit_sampled += 1
        self._watchers += 1
        reader = readers[player % len(readers)]
        try:
            while True:
                t.poll_reads += 1
                try:
                    r = await reader.rank(board, m.player_id(player), neighbors=0)
                except PodiumClientError:
                    pass  # not on the board yet (404), or a failed read: poll again
                else:
                    if reached(r.points, total, way):
                        t.commit.record(self.clock() - answered)
                        return
                if self.clock() - answered > self.s.commit_deadline_s:
                    t.commit_not_seen += 1
                    return
                await asyncio.sleep(POLL_S)
        finally:
            self._watchers -= 1


__all__ = ["Match", "Run", "SetupError"]
