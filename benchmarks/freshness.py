"""Commit-to-rank on a split board, measured from outside (issue 34): how long after a
result is acknowledged the player's own rank, and the top page, show it.

A fleet as an operator runs it: two API processes (``podium serve --no-workers``), a worker
of the relay and the updater, a worker of the aggregator; the store on a fresh database of
the machine's Postgres, the index in ``--shards`` shards of the machine's Redis under a
prefix of its own (the outbox as the log). The ``season`` board holds ``--players`` players
written straight into the index's keys (``_split_board.py``: lognormal points; they take no
results, so the store need not hold them), and takes a background load of two-player
matches of 2,000 other players at ``--rate`` matches/s through the API (``--size`` players a
match, and 20 times as many players as a second's results when that is more, so that a
player is seldom in two matches at once), and with ``--direct R``, R results a second written
straight onto the board's shards beside them (``direct``: the board and the aggregator
loaded at rates the API processes of a small machine could not accept beside the probes).
Beside it, probes at ``--probes`` a second, each a one-player match through the API:

- ``top, new``: a player's first match of 500,000-1,000,000 points (into the first pages
  of the exact top);
- ``top, again``: another such match of a ``top, new`` player (already in the top);
- ``below``: a player's first match of 100-5,000 points (an estimated rank).

From the acknowledgment (the POST's answer) each probe polls, every 50 ms, alternating the
two API processes: ``GET /v1/boards/season/players/{id}`` until it shows the new points with
a rank that holds the player's true rank (counted straight from Redis just before and just
after the read: ``rank`` between them when exact, ``[rankLow, rankHigh]`` meeting them when
estimated), and for top probes ``GET /v1/boards/season?offset=...`` (the page of its true
rank) until it lists the player with the new points. The reference is commit-to-board:
``ZSCORE`` on the player's shard, polled from the acknowledgment until the score is there.
Also timed: ``points``, the first read of the player's rank showing the new points, whatever
its rank said.

``--src A,B`` runs the fleet on each source tree in turn (``PYTHONPATH``), alternating,
``--rounds`` times: before and after in the same minutes.

    python benchmarks/freshness.py [--players 100000] [--shards 16] [--rate 50]
        [--size 2] [--direct 0] [--probes 4] [--seconds 40] [--rounds 1] [--src SRC[,SRC]]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, beside benchmarks/

from tests.integration.fleet import Fleet

import _split_board as sb
from _harness import (
    REDIS_URL,
    code_line,
    free_port,
    install_sigterm,
    machine_line,
    make_env,
    proc_cpu,
    quantile,
    rfc3339_now,
)
from podium.bootstrap import build
from podium.config.settings import load
from podium.domain.sharding import shard_of, shard_tag
from podium.index.redis.keys import Keys
from podium.ports import BoardKey

BOARD = "season"
LOAD_PLAYERS = 2000
POLL_S = 0.05
GIVE_UP_S = 10.0
SEED = 20261206


@dataclass
class Probe:
    kind: str
    player: str
    points: int  # the total the reads must show
    acked: float = 0.0
    board: float | None = None  # seconds from the acknowledgment
    points_seen: float | None = None
    rank: float | None = None
    page: float | None = None
    page_sent: float | None = None  # when the read that first showed it was sent
    rank_sent: float | None = None
    misses: int = 0  # reads that showed the new points with a rank not holding the true one


@dataclass
class Run:
    label: str
    probes: list[Probe] = field(default_factory=list)
    load_acked: int = 0
    load_failed: int = 0
    load_results: int = 0
    direct: int = 0  # results written straight onto the board (--direct)
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # each process's CPU s a second
    reads: dict[str, list[float]] = field(default_factory=lambda: {"rank": [], "page": []})


def _config(env: Any, shards: int) -> None:
    text = env.config_path.read_text() + f"shards = {shards}\n"
    # Small pools: four processes share the machine's Postgres.
    text = text.replace("[store]\n", "[store]\npool_size = 4\nread_pool_size = 3\n")
    env.config_path.write_text(text)


def _seed(cfg: Path, prefix: str, shards: int, n: int) -> tuple[BoardKey, Any, Any, Any]:
    settings = load(cfg)
    spec = settings.board(BOARD)
    assert spec is not None
    now = int(time.time())
    w = spec.rule.window_at(now)
    assert w is not None
    key = BoardKey(BOARD, w.id)
    scores = sb.season_scores(spec, w, now, n, SEED)
    where = sb.shards_of(n, shards)
    port = int(REDIS_URL.rsplit(":", 1)[1].split("/")[0])
    server = sb.PrivateRedis("machine", port, Path("."))
    added, took = sb.load(server, sb.board_keys(prefix, key, shards), n, scores, where, "seed")
    print(f"seeded {added:,} players in {took:.1f} s", flush=True)
    return key, spec, w, scores


async def direct(cfg: Path, spec: Any, w: Any, scores: Any, rate: float, until: float) -> int:
    """``rate`` results a second written straight onto the board's shards until ``until``,
    as the updater writes them (podium's own index write, in batches of a tenth of a
    second): a seeded player's total up by 1-200 points. The board and the aggregator take
    them as they take the log's; the store and the log never see them, so a machine of two
    cores can load the board at rates its API processes could not accept beside the probes.
    How many were written."""
    backends = build(load(cfg))
    codec, rng = spec.codec, random.Random(SEED + 1)
    key, n = BoardKey(spec.name, w.id), len(scores)
    batch = max(1, round(rate / 10))
    written = 0
    next_at = time.monotonic()
    try:
        while next_at < until:
            entries = []
            for _ in range(batch):
                i = rng.randrange(n)
                points = codec.points(scores[i]) + rng.randint(1, 200)
                scores[i] = codec.encode(points, max(0, int(time.time()) - w.start))
                entries.append((sb.player(i), scores[i]))
            await backends.index.write(key, entries, descending=True, expire_at=None)
            written += batch
            next_at += batch / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        await backends.close()
    return written


def _match(results: list[tuple[str, int]]) -> dict[str, Any]:
    return {
        "mode": "default",
        "endedAt": rfc3339_now(),
        "durationSeconds": 60,
        "results": [{"playerId": p, "points": pts} for p, pts in results],
    }


class Bench:
    def __init__(
        self, run: Run, key: BoardKey, codec: Any, prefix: str, shards: int, apis: list[str]
    ) -> None:
        self.run = run
        self.codec = codec
        self.key = key
        self.shards = shards
        self.prefix = prefix
        self.apis = [httpx.AsyncClient(base_url=u, timeout=10) for u in apis]
        self.r = aioredis.Redis.from_url(REDIS_URL)
        self.keys = sb.board_keys(prefix, key, shards)
        self.tops: list[Probe] = []
        self.n = 0
        self.rng = random.Random(SEED)
        self.headers: dict[str, str] = {}
        self.size = 2

    def shard_key(self, player: str) -> str:
        return Keys(self.prefix, shard_tag(shard_of(player, self.shards))).board(self.key)

    async def close(self) -> None:
        for c in self.apis:
            await c.aclose()
        await self.r.aclose()

    async def post(self, results: list[tuple[str, int]]) -> bool:
        self.n += 1
        mid = f"m{os.getpid()}-{self.n}-{self.rng.randrange(1 << 30)}"
        c = self.apis[self.n % len(self.apis)]
        try:
            got = await c.post(
                f"/v1/matches/{mid}/results", json=_match(results), headers=self.headers
            )
        except httpx.HTTPError:
            return False
        return got.status_code in (200, 201)

    async def ahead(self, score: float) -> int:
        """Members strictly ahead of ``score`` on every shard (a descending board)."""
        pipe = self.r.pipeline(transaction=False)
        for k in self.keys:
            pipe.zcount(k, f"({score}", "+inf")
        return sum(int(x) for x in await pipe.execute())

    async def load(self, rate: float, size: int, until: float) -> None:
        self.size = size
        many = max(LOAD_PLAYERS, int(rate * size * 20))
        players = [f"L{i:07d}" for i in range(many)]
        tasks: set[asyncio.Task[bool]] = set()
        t = time.monotonic()
        while t < until:
            body = [(p, self.rng.randint(1, 1000)) for p in self.rng.sample(players, size)]
            task = asyncio.create_task(self.post(body))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            task.add_done_callback(self._count)
            t += 1.0 / rate
            await asyncio.sleep(max(0.0, t - time.monotonic()))
        if tasks:
            await asyncio.gather(*tasks)

    def _count(self, task: asyncio.Task[bool]) -> None:
        if task.result():
            self.run.load_acked += 1
            self.run.load_results += self.size
        else:
            self.run.load_failed += 1

    async def probes(self, per_s: float, until: float) -> None:
        tasks = []
        i = 0
        while time.monotonic() < until:
            i += 1
            kind = ("top, new", "below", "top, again", "below")[i % 4]
            if kind == "top, again" and not self.tops:
                kind = "top, new"
            tasks.append(asyncio.create_task(self.probe(kind, i)))
            await asyncio.sleep(1.0 / per_s)
        await asyncio.gather(*tasks)

    async def probe(self, kind: str, i: int) -> None:
        if kind == "top, again":
            old = self.tops.pop(0)
            player, before = old.player, old.points
        else:
            player, before = f"Q{i:05d}{self.rng.randrange(1000):03d}", 0
        top = kind != "below"
        add = self.rng.randint(500_000, 1_000_000) if top else self.rng.randint(100, 5000)
        p = Probe(kind, player, before + add)
        if not await self.post([(player, add)]):
            return
        p.acked = time.monotonic()
        self.run.probes.append(p)
        await asyncio.gather(self._board(p), self._rank(p), self._page(p))
        if kind == "top, new" and p.rank is not None:
            self.tops.append(p)

    async def _board(self, p: Probe) -> None:
        k = self.shard_key(p.player)
        while time.monotonic() - p.acked < GIVE_UP_S:
            score = await self.r.zscore(k, p.player)
            if score is not None and self.codec.points(int(score)) == p.points:
                p.board = time.monotonic() - p.acked
                return
            await asyncio.sleep(POLL_S / 4)

    async def _rank(self, p: Probe) -> None:
        """Reads of the player's rank until one shows the new points; that read and those
        after it are bracketed by counts of the members ahead from Redis, until one holds
        the true rank. The counts (16 calls each) are only made then, so that the probe's
        own load stays small beside the fleet's."""
        n = 0
        while time.monotonic() - p.acked < GIVE_UP_S:
            n += 1
            a0, score = None, None
            if p.points_seen is not None:
                score = await self.r.zscore(self.shard_key(p.player), p.player)
                a0 = await self.ahead(score) if score is not None else None
            sent = time.monotonic() - p.acked
            body = await self._get(n, f"/v1/boards/{BOARD}/players/{p.player}?neighbors=2")
            now = time.monotonic() - p.acked
            if body is not None and body["points"] == p.points:
                if p.points_seen is None:
                    p.points_seen = now
                    continue  # read again, bracketed
                if a0 is not None and score is not None:
                    a1 = await self.ahead(score)
                    low = body.get("rankLow", body["rank"])
                    high = body.get("rankHigh", body["rank"])
                    if low <= a1 + 1 and high >= a0 + 1:
                        p.rank, p.rank_sent = now, sent
                        return
                    p.misses += 1
                    if os.environ.get("FRESH_DEBUG") and p.misses == 1:
                        print(p.kind, body, a0 + 1, a1 + 1, flush=True)
            await asyncio.sleep(POLL_S)

    async def _get(self, n: int, path: str) -> Any:
        c = self.apis[n % len(self.apis)]
        t0 = time.monotonic()
        try:
            got = await c.get(path)
        except httpx.HTTPError:
            return None
        self.run.reads["page" if "?limit" in path else "rank"].append(time.monotonic() - t0)
        return got.json() if got.status_code == 200 else None

    async def _page(self, p: Probe) -> None:
        """The page of the player's true rank (counted from Redis once the board holds the
        new score, and again every 10 reads) until it lists them with the new points."""
        if p.kind == "below":
            return
        n = 0
        offset: int | None = None
        while time.monotonic() - p.acked < GIVE_UP_S:
            if offset is None or n % 10 == 9:
                score = await self.r.zscore(self.shard_key(p.player), p.player)
                if score is None or self.codec.points(int(score)) != p.points:
                    await asyncio.sleep(POLL_S)
                    continue
                offset = (await self.ahead(score)) // 100 * 100
            n += 1
            sent = time.monotonic() - p.acked
            body = await self._get(n, f"/v1/boards/{BOARD}?limit=100&offset={offset}")
            rows = body["entries"] if body is not None else []
            if any(e["playerId"] == p.player and e["points"] == p.points for e in rows):
                p.page, p.page_sent = time.monotonic() - p.acked, sent
                return
            await asyncio.sleep(POLL_S)


def _fleet_run(label: str, src: str, args: argparse.Namespace) -> Run:
    run = Run(label)
    os.environ["PYTHONPATH"] = src
    with contextlib.ExitStack() as stack:
        env = make_env(stack, "production")
        _config(env, args.shards)
        assert env.prefix is not None
        key, spec, w, scores = _seed(env.config_path, env.prefix, args.shards, args.players)
        fleet = Fleet(env.config_path, env.tmp)
        stack.callback(fleet.stop_all)
        fleet.podium("migrate")
        gs = fleet.podium("keys", "create", "--name", "gs", "--modes", "default")
        ports = [free_port() for _ in range(args.apis)]
        for i, port in enumerate(ports):
            fleet.start(f"api{i}", "serve", "--no-workers", port=port)
        fleet.start("writer", "worker", "--roles", "relay,updater")
        fleet.start("aggregator", "worker", "--roles", "aggregator")
        apis = [f"http://127.0.0.1:{p}" for p in ports]
        headers = {"Authorization": f"Bearer {gs.strip().splitlines()[-1]}"}

        async def go() -> None:
            for i in range(args.apis):
                await fleet.api_ready(f"api{i}")
            await fleet.worker_ready("writer")
            await fleet.worker_ready("aggregator")
            bench = Bench(run, key, spec.codec, env.prefix or "", args.shards, apis)
            bench.headers = headers
            try:
                await asyncio.sleep(3.0)  # the first snapshots
                cpu0 = {n: proc_cpu(p.popen.pid) for n, p in fleet.procs.items()}
                t0 = time.monotonic()
                until = t0 + args.seconds
                load = [bench.load(args.rate, args.size, until), bench.probes(args.probes, until)]
                if args.direct:
                    d = asyncio.create_task(
                        direct(env.config_path, spec, w, scores, args.direct, until)
                    )
                    await asyncio.gather(*load)
                    run.direct = await d
                else:
                    await asyncio.gather(*load)
                took = time.monotonic() - t0
                run.seconds = took
                for n, p in fleet.procs.items():
                    run.cpu[n] = (proc_cpu(p.popen.pid) - cpu0[n]) / took
            finally:
                await bench.close()

        try:
            asyncio.run(go())
        except BaseException:
            fleet.stop_all()
            fleet.dump()
            raise
    return run


def _fig(values: list[float | None]) -> str:
    got = sorted(v for v in values if v is not None)
    lost = sum(v is None for v in values)
    if not got:
        return f"- (n=0, {lost} never)"
    p50, p99 = quantile(got, 0.5), quantile(got, 0.99)
    text = f"{p50 * 1000:.0f} / {p99 * 1000:.0f} / {got[-1] * 1000:.0f} ms (n={len(got)}"
    return text + (f", {lost} never)" if lost else ")")


def report(run: Run) -> dict[str, Any]:
    rate = run.load_results / run.seconds if run.seconds else 0.0
    print(
        f"\n== {run.label}: load {run.load_acked} matches acknowledged ({rate:.0f} results/s), "
        f"{run.load_failed} failed; {run.direct / run.seconds if run.seconds else 0:.0f} "
        "results/s written straight onto the board"
    )
    print("kind | commit-to-board | points shown | commit-to-rank | top page (p50 / p99 / max)")
    out: dict[str, Any] = {}
    for kind in ("top, new", "top, again", "below", "all"):
        ps = [p for p in run.probes if kind == "all" or p.kind == kind]
        cols = [[p.board for p in ps], [p.points_seen for p in ps], [p.rank for p in ps]]
        page = [p.page for p in ps if p.kind != "below"]
        misses = sum(p.misses for p in ps)
        print(
            f"{kind} | {_fig(cols[0])} | {_fig(cols[1])} | {_fig(cols[2])} | "
            f"{_fig(page) if page else '-'} | reads with the points and a rank off: {misses}"
        )
        out[kind] = {"board": cols[0], "points": cols[1], "rank": cols[2], "page": page}
    ps = run.probes
    print(
        "sent, not answered (the read that showed it, from its sending: less its own time): "
        f"rank {_fig([p.rank_sent for p in ps])}, "
        f"top page {_fig([p.page_sent for p in ps if p.kind != 'below'])}"
    )
    out["sent"] = {"rank": [p.rank_sent for p in ps], "page": [p.page_sent for p in ps]}
    for what, took in run.reads.items():
        print(f"the probes' reads of the {what}, each: {_fig(list(took))}")
    out["reads"] = run.reads
    cpu = ", ".join(f"{n} {c:.2f}" for n, c in run.cpu.items())
    print(f"CPU of each process, s a second: {cpu}")
    out["cpu"] = run.cpu
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--players", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--rate", type=float, default=50.0, help="background matches/s")
    ap.add_argument("--size", type=int, default=2, help="players in a background match")
    ap.add_argument(
        "--direct", type=float, default=0.0, help="results/s written straight onto the board"
    )
    ap.add_argument("--probes", type=float, default=4.0, help="probe matches a second")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--apis", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--src", default="", help="source trees to alternate (PYTHONPATH), by commas")
    ap.add_argument("--json", type=Path, help="also write every figure here")
    args = ap.parse_args()
    install_sigterm()
    print(machine_line())
    print(code_line(), flush=True)
    srcs = [s for s in args.src.split(",") if s] or [os.environ.get("PYTHONPATH", "")]
    figures: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        for src in srcs:
            label = f"round {rnd + 1}, {src or 'installed'}"
            run = _fleet_run(label, src, args)
            figures.append({"label": label, **report(run)})
    if args.json:
        args.json.write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
