"""The network fails between parts of a fleet that each keep running, on hosts of the
test's own (``tests/netns.py``): links cut one way or both, a Redis primary in a split
brain, a worker cut off past its leases, a process frozen, clocks skewed across a window's
end, every link slow and lossy. Under a workload of game servers that retry and players
that read, a checker over the history and the final state (``partitions.py``) proves that
nothing acknowledged was lost or counted twice, that no try was answered 500, that no page
was older than documented, and how long the fleet took to converge after the heal. Each
scenario runs on the store's outbox and on a JetStream stream. docs/faults.md has what
each did.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import httpx
import pytest
import redis.asyncio as aioredis

from podium.config import settings as config
from podium.index.redis.keys import shard_tag
from podium.store.postgres import PostgresStore
from tests.integration import partitions
from tests.integration.partitions import Game, NetFleet, is_submit
from tests.integration.rankcheck import RankRead
from tests.netns import Host, need, paused
from tests.redis_cluster import RedisCluster, primary_of, replica_of, shards_on
from tests.redis_server import RedisServer

RATE = 20.0  # matches a second, all game servers together
SENDERS = 4
# The durations and both logs for every scenario with PODIUM_FAULTS=full. CI runs
# the short version: shorter faults, and each scenario on one of the two logs (both logs
# covered across the scenarios; the Redis split brain on both).
FULL = os.environ.get("PODIUM_FAULTS") == "full"


F = TypeVar("F", bound=Callable[..., object])


def full_only(test: F) -> F | None:
    """A scenario run in the full version only (PODIUM_FAULTS=full): in the short version
    pytest finds no test under its name, rather than reporting a skip, which CI counts as a
    failure."""
    return test if FULL else None


def logs(variant: str, *, short: str) -> list[str]:
    """The fleets a scenario runs on: the outbox and JetStream, or in the short version the
    one named."""
    return [f"outbox{variant}", f"nats{variant}"] if FULL else [f"{short}{variant}"]


FROZEN_S = 30.0 if FULL else 10.0
SLOW_S = 60.0 if FULL else 15.0  # how long every link is slow and lossy
DELAY_S = 0.2  # each way, on every link
LOSS_PERCENT = 5
CUT_LEASES = 5  # how long a worker is cut off, in leases
GRACE_S = 10  # how long the one-minute window of the clock test takes late results
SKEW_S = 5.0
AGG_SHARDS = 4
# The exact top of the split fleets' board (the aggregator's and the cluster's): most of the
# 200 players are below it, so that most rank reads are estimates, each checked against its
# interval (``rankcheck.outside_intervals``).
EXACT_TOP = 16
# The cluster's ``cluster-node-timeout``: a primary cut from the majority is voted out, and
# stops taking writes itself, a second or two after it.
NODE_TIMEOUT_MS = 2000
SLOW_VOTE_MS = 6000  # one slower than the aggregator's 5 s lease: it runs out before the vote
LEASE_WAIT_S = 15.0  # the aggregator's lease is 5 s: a standby leads well within this
BURST = 8  # matches sent to the API process at once just before its cut: some mid-commit
# A process cut from the store answers 503 within about twice ``[store] timeout_s`` (a
# connection taken, then a statement on one found dead); checked against this many times
# it, so that a busy machine does not fail it (at 3 times, one try answered after 6.2 s with
# the whole suite running beside it), while a hang until ``[store] command_timeout_s`` (10
# s), what this guards against, still fails.
STORE_WAITS = 4


@pytest.fixture
async def fleet(request: pytest.FixtureRequest) -> AsyncIterator[NetFleet]:
    need()
    log, *more = str(request.param).split("+")
    if "skewed" in more:
        nf = await partitions.start(
            log,
            workers=2,
            roles="relay,updater,freezer",
            skews={"worker": SKEW_S, "worker2": -SKEW_S},
            boards=MINUTE,
        )
    elif "split" in more:
        nf = await partitions.start(
            log,
            workers=2,
            roles="relay,updater,aggregator",
            shards=AGG_SHARDS,
            exact_top=EXACT_TOP,
        )
    elif "cluster" in more:
        # "partial": the nodes serve the slots they hold while others are down
        # (``cluster-require-full-coverage no``), instead of the whole cluster refusing keys.
        partial = {"cluster_require_full_coverage": "no"} if "partial" in more else {}
        nf = await partitions.start(
            log,
            workers=2,
            roles="relay,updater,aggregator",
            shards=AGG_SHARDS,
            cluster=True,
            cluster_node_timeout_ms=SLOW_VOTE_MS if "slowvote" in more else NODE_TIMEOUT_MS,
            cluster_options=partial,
            exact_top=EXACT_TOP,
        )
    elif "slow" in more:
        nf = await partitions.start(log, proxied=True)
    else:
        workers = 2 if "2workers" in more else 1
        nf = await partitions.start(log, sentinel="sentinel" in more, workers=workers)
    try:
        yield nf
    except BaseException:
        nf.fleet.dump()
        raise
    finally:
        await nf.close()


async def _until(
    what: str, check: Callable[[], bool], deadline_s: float = partitions.DEADLINE_S
) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("both", [True, False], ids=["both-ways", "answers-lost"])
@pytest.mark.parametrize("fleet", logs("", short="outbox"), indirect=True)
async def test_an_api_cut_from_the_store_mid_stream_loses_and_doubles_nothing(
    fleet: NetFleet, both: bool
) -> None:
    """API process 1 is cut from Postgres while matches stream in. Both ways: its requests
    cannot reach the store. Answers lost (Postgres cannot send to it; what it sends still
    arrives): every statement it sends is carried out, commits included, and none is
    answered, so each of its matches is in part or wholly stored while its game server is
    told nothing. Either way the cut process answers 503 (Retry-After, problem+json) within
    a small multiple of ``[store] timeout_s``, and its game servers send the match again, to
    the other process. After the heal it answers again. Every acknowledged result is stored
    and on the board exactly once, and no try is answered 500."""
    bound = STORE_WAITS * config.load(fleet.fleet.cfg).store.timeout_s
    # The game servers wait longer than the cut process's bound, so that its 503 is seen.
    game = Game(fleet.apis, fleet.key, RATE, timeout_s=bound + 2.0)
    senders = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    senders += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    try:
        await game.acknowledged(20, "api1")
        api1, db = fleet.hosts["api1"], fleet.hosts["db"]
        # Matches sent to it at once, then the cut as they are being served: some of them
        # mid-commit (how many were in flight is printed below, not assumed).
        burst = game.burst("api1", BURST)
        await asyncio.sleep(0.005)
        if both:
            fleet.net.cut(api1, db)
        else:
            fleet.net.cut(db, api1, both=False)
        cut = time.monotonic()  # once the filter holds: a try sent after this cannot commit
        tries = game.history.tries

        def api1_failed_since_cut() -> bool:
            return any(t.api == "api1" and t.sent >= cut and t.outcome != "200" for t in tries)

        await _until("a try on the cut API process failed", api1_failed_since_cut)
        await game.acknowledged(5, "api2")  # the other process takes the matches meanwhile
        # Cut long enough that tries sent well within it are seen answered.
        await asyncio.sleep(max(0.0, cut + 2 * bound - time.monotonic()))
        fleet.net.heal(api1, db)
        fleet.net.heal(db, api1)
        healed = time.monotonic()
        await burst
        await game.acknowledged(5, "api1")  # and the cut one again after the heal
        back = min(
            t.answered for t in tries if t.api == "api1" and t.sent >= healed and t.outcome == "200"
        )
    finally:
        await game.end(senders)
    verdict = await partitions.check(fleet, game)
    during = Counter(
        t.outcome for t in game.history.tries if t.api == "api1" and cut <= t.sent < healed
    )
    in_flight = [
        t
        for t in game.history.tries
        if t.api == "api1" and t.sent < cut < t.answered and t.outcome != "200"
    ]
    # Every try of the cut process, sent during the cut or in flight at it, answered within
    # the bound of the cut or of its send (those sent within the bound of the heal may
    # still be answered after it, and 200).
    failed = [
        t
        for t in game.history.tries
        if t.api == "api1"
        and partitions.is_submit(t)
        and t.answered > cut
        and t.sent < healed - bound
        and t.outcome != "200"
    ]
    slow = [t for t in failed if t.answered - max(t.sent, cut) > bound]
    waits = sorted(t.answered - max(t.sent, cut) for t in failed)
    print(
        f"{game.history.sent} matches; cut {healed - cut:.1f} s; api1's tries during the cut: "
        f"{dict(during)}, answered after p50 {_q(waits, 0.5):.1f} s, at most "
        f"{max(waits, default=0.0):.1f} s (the bound {bound:.0f} s); "
        f"{len(in_flight)} in flight at the cut not answered 200; api1 "
        f"answered 200 again {back - healed:.1f} s after the heal; the board equal to the "
        f"store {verdict.board_caught_up_s:.1f} s after the load stopped; {verdict.ranks()}"
    )
    assert verdict.ok, verdict
    assert "500" not in during
    assert failed, "no try of the cut process failed"
    # A 503 in words, within the bound: no hang until the game server gives up.
    assert {t.outcome for t in failed} == {"503"}, Counter(t.outcome for t in failed)
    assert not slow, [(t.path, t.answered - max(t.sent, cut)) for t in slow]


async def _members(server: RedisServer) -> dict[str, float]:
    r = aioredis.Redis.from_url(server.url, decode_responses=True, socket_timeout=5)
    try:
        rows = await r.zrange(f"nf:{{b:{partitions.BOARD}:all}}:z", 0, -1, withscores=True)
    finally:
        await r.aclose()
    return dict(rows)


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.parametrize(
    "fleet",
    ["outbox+sentinel", "nats+sentinel", *logs("+sentinel+2workers", short="outbox")],
    indirect=True,
)
async def test_a_redis_primary_cut_from_sentinel_while_the_worker_still_writes_to_it(
    fleet: NetFleet,
) -> None:
    """The Redis primary is cut from the Sentinels and its replica, both ways, while the
    worker (relay, updater, mender) and both API processes still reach it: the Sentinels
    promote the replica, and the worker goes on writing boards to the old primary on the
    connections it holds (Jepsen's split brain). On the heal the Sentinels make the old
    primary a replica of the new one, which drops every write it took after the cut, by
    Redis's design. The mender must notice and apply those changes again from the log:
    every acknowledged result is on the board exactly once, equal to the store.

    With two workers, the second and API process 2 are cut from the old primary too (on
    the Sentinels' side of the cut): the second worker's client follows the Sentinels to the
    promoted replica, and its mender replays and marks the new node there, while the first
    worker still writes to the old primary, after that replay, until the heal. The first
    worker's mender must replay again once it finds the new node, though it is already
    marked (before the fix it did not, and the board kept lacking those writes)."""
    assert fleet.sentinels is not None
    two = "worker2" in fleet.fleet.procs
    game = Game(fleet.apis, fleet.key, RATE)
    senders = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    senders += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    old = fleet.primary()  # before the cut: the one the fleet started on
    a = fleet.hosts["redis"]
    others = [fleet.hosts[n] for n in ("sentinel", "replica")]
    if two:
        others += [fleet.hosts["worker2"], fleet.hosts["api2"]]

    def logged(name: str) -> str:
        return fleet.fleet.procs[name].log.read_text(errors="replace")

    try:
        await game.acknowledged(20)
        for h in others:
            fleet.net.cut(a, h)
        cut = time.monotonic()
        new = await asyncio.to_thread(fleet.sentinels.wait_promoted, old.port, 120.0)
        promoted = time.monotonic()
        if two:
            # The second worker's mender replayed and marked the promoted node (once its
            # client gave the old primary up); the first one writes on to the old primary.
            await _until("worker 2 replayed", lambda: "were applied again" in logged("worker2"))
        await game.acknowledged(30)  # boards written meanwhile, some to the old primary
        split = await _members(old), await _members(new)
        for h in others:
            fleet.net.heal(a, h)
        healed = time.monotonic()

        def demoted() -> bool:
            with contextlib.suppress(Exception):
                return "role:slave" in old.cli("info", "replication")
            return False

        await _until("the old primary made a replica of the new one", demoted)
        await game.acknowledged(10)
    finally:
        await game.end(senders)
    on_old, on_new = split
    # What the old primary took after the cut that the new one lacks: lost on the heal.
    taken = {p for p, s in on_old.items() if s > on_new.get(p, float("-inf"))}
    # From the cut until the mender replayed, the board read (on either primary) may lack
    # what the store took since the cut: exact ranks then may be as of the cut (README,
    # "Following a promotion"); the replay's end is not seen from outside, so until the
    # load stopped. With two workers, API process 2 cannot reach the index from the cut
    # until its client gives the old primary up for the one the Sentinels name (not seen
    # from outside: until the heal), and may answer the last page it read meanwhile.
    out = {"api2": (cut, healed)} if two else None
    verdict = await partitions.check(fleet, game, out, board_behind=(cut, time.monotonic()))
    replays = [
        line
        for w in ("worker", "worker2")
        if w in fleet.fleet.procs
        for line in logged(w).splitlines()
        if "were applied again" in line
    ]
    print(
        f"{game.history.sent} matches; promoted {promoted - cut:.1f} s after the cut; at the "
        f"heal the old primary held {len(taken)} players' newer totals the new one lacked; "
        f"demoted {time.monotonic() - healed:.1f} s after the heal or sooner; the board equal "
        f"to the store {verdict.board_caught_up_s:.1f} s after the load stopped; "
        f"answers {dict(game.history.outcomes())}; the mender: {replays}; {verdict.ranks()}"
    )
    assert taken, "the worker wrote nothing to the old primary after the cut: no split brain"
    assert verdict.ok, verdict


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("fleet", logs("", short="nats"), indirect=True)
async def test_an_api_cut_from_redis_accepts_results_and_answers_reads_503(
    fleet: NetFleet,
) -> None:
    """API process 1 is cut from Redis, both ways, while matches and reads stream in: it
    goes on accepting results (they are the store's: the index is fed by the worker, which
    still reaches Redis), answers its reads 503 (never a 500, never a board it cannot see),
    and reads again after the heal; the board then holds every acknowledged result once."""
    game = Game(fleet.apis, fleet.key, RATE)
    tasks = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    tasks += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    tries = game.history.tries
    try:
        await game.acknowledged(20)
        api1, redis = fleet.hosts["api1"], fleet.hosts["redis"]
        fleet.net.cut(api1, redis)
        cut = time.monotonic()

        def failed_read_since(t0: float) -> bool:
            return any(
                t.api == "api1" and not partitions.is_submit(t) and t.sent >= t0
                and t.outcome != "200"
                for t in tries
            )  # fmt: skip

        await _until("a read on the cut API process failed", lambda: failed_read_since(cut))
        await game.acknowledged(10, "api1")  # results still accepted by the cut process
        fleet.net.heal(api1, redis)
        healed = time.monotonic()

        def read_since_heal() -> bool:
            return any(
                t.api == "api1" and not partitions.is_submit(t) and t.sent >= healed
                and t.outcome == "200"
                for t in tries
            )  # fmt: skip

        await _until("a read on api1 answered after the heal", read_since_heal)
        back = min(
            t.answered
            for t in tries
            if t.api == "api1" and not partitions.is_submit(t) and t.sent >= healed
            and t.outcome == "200"
        )  # fmt: skip
    finally:
        await game.end(tasks)
    verdict = await partitions.check(fleet, game, {"api1": (cut, healed)})
    during = [t for t in tries if t.api == "api1" and cut <= t.sent and t.answered < healed]
    reads = Counter(t.outcome for t in during if not partitions.is_submit(t))
    writes = Counter(t.outcome for t in during if partitions.is_submit(t))
    print(
        f"{game.history.sent} matches; cut {healed - cut:.1f} s; api1 during the cut: reads "
        f"{dict(reads)}, results {dict(writes)}; reads answered again {back - healed:.1f} s "
        f"after the heal; the board equal to the store {verdict.board_caught_up_s:.1f} s "
        f"after the load stopped; {verdict.ranks()}"
    )
    assert verdict.ok, verdict
    assert set(reads) <= {"200", "503"}, reads  # refused in words, not a hang or a 500
    assert reads["503"] > 0
    assert writes["200"] >= 10


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("fleet", logs("", short="outbox"), indirect=True)
async def test_an_api_process_frozen_under_load_counts_nothing_twice(
    fleet: NetFleet,
) -> None:
    """API process 1 is frozen (``SIGSTOP``) for ``FROZEN_S`` (30 s in the full version)
    while matches stream in, a burst of them sent to it just before: its game servers
    time out and send the same matches to the other process, which records them. When it
    wakes it serves the requests that waited in its sockets, the same matches again:
    each counts once (its match claim), and the process answers again as before."""
    game = Game(fleet.apis, fleet.key, RATE)
    tasks = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    tasks += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    tries = game.history.tries
    try:
        await game.acknowledged(20, "api1")
        burst = game.burst("api1", BURST)
        await asyncio.sleep(0.005)
        with paused(fleet.fleet.procs["api1"].popen.pid):
            frozen = time.monotonic()
            await asyncio.sleep(FROZEN_S)
        woke = time.monotonic()
        await burst
        await game.acknowledged(10, "api1")
        back = min(
            t.answered
            for t in tries
            if t.api == "api1" and partitions.is_submit(t) and t.sent >= woke
            and t.outcome == "200"
        )  # fmt: skip
    finally:
        await game.end(tasks)
    verdict = await partitions.check(fleet, game)
    during = Counter(t.outcome for t in tries if t.api == "api1" and frozen <= t.sent < woke)
    others = sum(
        1 for t in tries if t.api == "api2" and frozen <= t.answered < woke and t.outcome == "200"
    )
    print(
        f"{game.history.sent} matches; api1 frozen {woke - frozen:.1f} s: its tries then "
        f"{dict(during)}, api2 answered {others} tries meanwhile; api1 acknowledged a match "
        f"again {back - woke:.1f} s after it woke; the board equal to the store "
        f"{verdict.board_caught_up_s:.1f} s after the load stopped; {verdict.ranks()}"
    )
    # Frozen indeed: nothing answered by it meanwhile (a try sent then may be answered once
    # it woke), the other process carrying the load.
    answered = [
        t
        for t in tries
        if t.api == "api1" and frozen + 1 < t.answered < woke and t.outcome.isdigit()
    ]
    assert not answered, answered
    assert others > 0
    assert verdict.ok, verdict


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("fleet", logs("+2workers", short="nats"), indirect=True)
async def test_a_worker_cut_off_past_its_leases_is_taken_over_and_writes_nothing_late(
    fleet: NetFleet,
) -> None:
    """Two workers, each with a relay and an updater. The first is cut from Redis until its
    updater holds a batch it could not write (the log, still reached, keeps the batch's
    lease), then from everything else too (the store, the log), both ways, for several
    leases while matches stream in: the second takes its work over (the board moves
    meanwhile). The first finds the batch's lease ran out and gives it up unwritten (its
    ``/metrics`` say so), rather than write it late; every acknowledged result is on the
    board once."""
    game = Game(fleet.apis, fleet.key, RATE)
    tasks = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    tasks += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    lease_s = config.load(fleet.fleet.cfg).workers.lease_s
    worker = fleet.hosts["worker"]
    redis = fleet.hosts["redis"]
    others = [fleet.hosts[n] for n in ("db", "log") if n in fleet.hosts]
    failed = 'podium_worker_errors_total{role="updater"}'
    lost = 'podium_lease_lost_total{role="updater"}'
    try:
        await game.acknowledged(20)
        before = await partitions.worker_metrics(fleet, "worker")
        fleet.net.cut(worker, redis)
        cut = time.monotonic()
        # A batch held: a write of it failed (after Redis's socket timeout).
        await _until_metric(fleet, "worker", lambda m: m[failed] > before[failed])
        for h in others:
            fleet.net.cut(worker, h)
        at_cut = await _members(fleet.primary())
        await asyncio.sleep(CUT_LEASES * lease_s)
        at_heal = await _members(fleet.primary())
        for h in [redis, *others]:
            fleet.net.heal(worker, h)
        healed = time.monotonic()
        after = await _until_metric(fleet, "worker", lambda m: m[lost] > before[lost])
        await game.acknowledged(20)
    finally:
        await game.end(tasks)
    # The cut worker's share of the board waits for the other to take its lease over: a
    # rank read meanwhile may show the board as of the cut.
    verdict = await partitions.check(fleet, game, board_behind=(cut, healed))
    moved = sum(1 for p, s in at_heal.items() if s != at_cut.get(p))
    first = fleet.fleet.procs["worker"].log.read_text(errors="replace")
    print(
        f"{game.history.sent} matches; the first worker cut off {healed - cut:.1f} s "
        f"({CUT_LEASES} leases past its failed write); {moved} players' totals moved on the "
        f"board meanwhile; its updater gave up {after[lost] - before[lost]:.0f} batches held "
        f"past their lease; the first worker logged {first.count('WARNING')} warnings; the "
        f"board equal to the store {verdict.board_caught_up_s:.1f} s after the load stopped; "
        f"{verdict.ranks()}"
    )
    assert moved > 0, "nobody took the cut worker's work over"
    assert "given up unwritten" in first
    assert verdict.ok, verdict


async def _until_metric(
    fleet: NetFleet, name: str, check: Callable[[Counter[str]], bool]
) -> Counter[str]:
    """A worker's ``/metrics`` once ``check`` holds of them (asked every 0.2 s, patiently)."""
    deadline = time.monotonic() + partitions.DEADLINE_S
    while True:
        with contextlib.suppress(httpx.HTTPError):
            got = await partitions.worker_metrics(fleet, name)
            if check(got):
                return got
        assert time.monotonic() < deadline, f"never: {name}'s /metrics"
        await asyncio.sleep(0.2)


MINUTE = (
    '[[boards]]\nname = "minute"\nwindow = "schedule"\nschedule = "* * * * *"\n'
    f"duration_s = 60\nfreeze_after_s = {GRACE_S}\n"
)


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.parametrize("fleet", logs("+skewed", short="outbox"), indirect=True)
async def test_workers_with_skewed_clocks_freeze_a_window_once_and_on_time(
    fleet: NetFleet,
) -> None:
    """Two workers, each with a relay, an updater and a freezer, one with its wall clock
    5 s ahead and one 5 s behind, across the end of a one-minute window that takes late
    results for ``GRACE_S``. Matches stream in as they end, and late ones (ended in the
    window's last second) are sent from its end until after its grace. The window is frozen
    once; it holds exactly the results whose answers said they counted for it; and every
    late result sent within the grace (by the true clock) counted for it: a freezer whose
    clock runs ahead does not cut the grace short."""
    game = Game(fleet.apis, fleet.key, RATE)
    tasks = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    now = time.time()
    end = (int(now) // 60 + 1) * 60
    if end - now < 15:
        end += 60  # time for the fleet's clocks to be seen across the end
    window = time.strftime("%Y%m%dT%H%M", time.gmtime(end - 60))
    store = PostgresStore.from_url(fleet.pg.url, timeout_s=partitions.LOOK_TIMEOUT_S)
    try:

        async def late() -> None:
            clients = game._clients()
            try:
                while time.time() < end:
                    await asyncio.sleep(0.05)
                while time.time() < end + GRACE_S + 4:
                    await game.send(clients, 0, ended_at=end - 1)
                    await asyncio.sleep(0.1)
            finally:
                for c in clients:
                    await c.aclose()

        tasks.append(asyncio.create_task(late()))

        async def frozen() -> bool:
            return window in await store.frozen("minute")

        deadline = time.monotonic() + end - now + GRACE_S + partitions.DEADLINE_S
        while not await frozen():
            assert time.monotonic() < deadline, f"window {window} never frozen"
            await asyncio.sleep(0.5)
        await tasks[-1]
        final = {e.player_id: e.points for e in await store.final_page("minute", window, 1, 10_000)}
    finally:
        await game.end(tasks)
        await store.close()
    verdict = await partitions.check(fleet, game)
    matches = game.history.matches
    expected: Counter[str] = Counter()
    for m, results in game.history.acked.items():
        if "minute" in matches[m].boards and end - 60 <= matches[m].ended < end:
            expected.update(results)
    in_grace = [m for m in matches.values() if m.ended == end - 1 and m.sent < end + GRACE_S - 1]
    left_out = [m for m in in_grace if "minute" not in m.boards]
    logs = [fleet.fleet.procs[n].log.read_text(errors="replace") for n in ("worker", "worker2")]
    froze = [text.count(f"froze minute {window}") for text in logs]
    print(
        f"{game.history.sent} matches; window {window}: {sum(expected.values())} points for "
        f"{len(expected)} players counted in it; {len(in_grace)} late results sent within its "
        f"grace, {len(left_out)} of them left out; frozen by the workers (5 s ahead, 5 s "
        f"behind): {froze}; {verdict.ranks()}"
    )
    assert verdict.ok, verdict
    assert sum(froze) == 1, froze
    assert final == dict(expected)
    assert in_grace and not left_out, left_out


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.parametrize("fleet", logs("+slow", short="nats"), indirect=True)
async def test_every_link_slow_and_lossy_loses_nothing_and_drains_after_the_heal(
    fleet: NetFleet,
) -> None:
    """Every link (game servers and players to the API processes, every process to
    Postgres, Redis and the log) gets ``DELAY_S`` each way, and every host drops
    ``LOSS_PERCENT`` of what it sends, for ``SLOW_S`` (a minute with PODIUM_FAULTS=full),
    while matches arrive at ``RATE`` a second whatever the answers take. Every match is
    acknowledged (those sent before the heal within ``DEADLINE_S`` of it), nothing is lost
    or doubled, the board equals the store after; reported: how many were acknowledged
    during the slow time against how many were sent, how long a match took to be
    acknowledged, before and during, and how long after the heal the last match sent
    before it was; and from the API processes' ``/metrics``, their turns at the store during
    the slow time, how long from arrival, and the matches turned away by reason (full, late,
    gone). The game servers wait the client's default 5 s for each try: a slow link is no
    outage."""
    ops = await partitions.ops_key(fleet)
    game = Game(fleet.apis, fleet.key, RATE, timeout_s=5.0)
    done = asyncio.Event()
    tasks = [asyncio.create_task(game.open_loop(RATE, done))]
    tasks += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    try:
        await game.acknowledged(40)
        looked = await partitions.api_metrics(fleet, ops)
        applied = await partitions.worker_metrics(fleet, "worker")
        for p in fleet.proxies.values():
            p.delay_s = DELAY_S
        for h in fleet.hosts.values():
            fleet.net.lossy(h, LOSS_PERCENT)
        slowed = time.monotonic()
        await asyncio.sleep(SLOW_S)
        for p in fleet.proxies.values():
            p.delay_s = 0.0
        for h in fleet.hosts.values():
            fleet.net.lossy(h, 0)
        healed = time.monotonic()
        # The API processes' own count of the slow time (from just before it to just after).
        turns = partitions.turns_between(looked, await partitions.api_metrics(fleet, ops))
        board = partitions.board_between(applied, await partitions.worker_metrics(fleet, "worker"))
        await game.acknowledged(20)
    finally:
        done.set()
        await game.end(tasks)
    verdict = await partitions.check(fleet, game)
    matches = game.history.matches.values()
    slow = [m.took for m in matches if slowed <= m.began < healed]
    fast = [m.took for m in matches if m.began < slowed]
    # Acknowledged while every link was slow (whenever sent), and when the last match sent
    # before the heal was.
    held = sum(1 for m in matches if slowed <= m.began + m.took < healed)
    drained = max(m.began + m.took for m in matches if m.began < healed) - healed
    during = [t for t in game.history.tries if slowed <= t.sent < healed]
    tries = Counter(t.outcome for t in during if partitions.is_submit(t))
    reads = Counter(t.outcome for t in during if not partitions.is_submit(t))
    print(
        f"{game.history.sent} matches; {len(slow)} sent during {SLOW_S:.0f} s of "
        f"{DELAY_S * 1000:.0f} ms each way and {LOSS_PERCENT}% loss ({len(slow) / SLOW_S:.1f}/s "
        f"against {RATE:.0f}/s offered), {held} acknowledged during it "
        f"({held / SLOW_S:.1f}/s); the last sent before the heal acknowledged {drained:.1f} s "
        f"after it; those sent during it acknowledged after p50 {_q(slow, 0.5):.2f} s, p99 "
        f"{_q(slow, 0.99):.2f} s (before: p50 {_q(fast, 0.5):.2f} s, p99 {_q(fast, 0.99):.2f} "
        f"s); their tries {dict(tries)}, reads {dict(reads)}; the API processes during it: "
        f"{turns}; the updater during it: {board}; the board equal to the store "
        f"{verdict.board_caught_up_s:.1f} s after the load stopped; {verdict.ranks()}"
    )
    assert slow and fast
    assert verdict.ok, verdict


def _q(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _snapshot(server: RedisServer) -> tuple[int | None, float | None]:
    """The fencing counter, and the asOf of the all-time board's snapshot, as Redis holds
    them now (None where there is none)."""
    r = aioredis.Redis.from_url(server.url, decode_responses=True, socket_timeout=5)
    try:
        fence = await r.get("nf:{agg}:fence")
        snap = await r.get(f"nf:{{agg}}:snap:{partitions.BOARD}:all")
    finally:
        await r.aclose()
    as_of = None if snap is None else float(json.loads(snap)["asOf"])
    return (None if fence is None else int(fence)), as_of


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("fleet", logs("+split", short="outbox"), indirect=True)
async def test_the_active_aggregator_cut_off_past_its_lease_is_fenced_out(
    fleet: NetFleet,
) -> None:
    """The index split in shards, two workers each with an aggregator. The active one (the
    one whose cut makes the fencing counter rise) is cut from Redis, both ways, past its
    lease, while matches stream in: the standby takes the lease over under a new fencing
    token and publishes; on the heal, whatever the old one still sends is refused: its next
    ``lead`` finds the lease taken (its ``/metrics`` say so after the heal), and a cycle it
    had begun before the cut, if any, is refused its publish. The snapshot's asOf, watched
    all along, never goes back (a snapshot of the old tenure accepted after the new one
    began would be older), and the board ends equal to the store."""
    game = Game(fleet.apis, fleet.key, RATE)
    tasks = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    tasks += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    seen: list[tuple[float, int | None, float | None]] = []  # when, fence, asOf
    watching = asyncio.Event()

    async def watch() -> None:
        while not watching.is_set():
            with contextlib.suppress(Exception):
                seen.append((time.monotonic(), *await _snapshot(fleet.primary())))
            await asyncio.sleep(0.1)

    tasks.append(asyncio.create_task(watch()))
    redis = fleet.hosts["redis"]
    cut_at = healed = 0.0
    active = ""
    lost = 'podium_lease_lost_total{role="aggregator"}'
    fenced = f'podium_snapshots_fenced_total{{board="{partitions.BOARD}"}}'
    try:
        await game.acknowledged(20)
        before = {n: await partitions.worker_metrics(fleet, n) for n in ("worker", "worker2")}
        await _until("a snapshot published", lambda: any(s[2] is not None for s in seen))
        for name in ("worker", "worker2"):  # which one leads is the lease's business
            fence = seen[-1][1]
            fleet.net.cut(fleet.hosts[name], redis)
            cut_at = time.monotonic()

            def rose(before: int | None = fence, since: float = cut_at) -> bool:
                return any(s[0] > since and s[1] != before for s in seen)

            with contextlib.suppress(AssertionError):
                await _until("the fencing counter rose", rose, LEASE_WAIT_S)
            if rose():
                active = name
                await asyncio.sleep(2.0)  # the standby publishing under its token
                fleet.net.heal(fleet.hosts[name], redis)
                healed = time.monotonic()
                break
            fleet.net.heal(fleet.hosts[name], redis)  # the standby: nothing changes hands
        assert active, "cutting either worker from Redis moved no lease"
        # The old one's first step after the heal finds its tenure over.
        after = await _until_metric(fleet, active, lambda m: m[lost] > before[active][lost])
        await game.acknowledged(20)
        await asyncio.sleep(5.0)  # the old one's cycle in flight at the heal, if any
    finally:
        watching.set()
        await game.end(tasks)
    verdict = await partitions.check(fleet, game)
    published = [(t, f, a) for t, f, a in seen if a is not None]
    back = [
        (t1 - cut_at, a0, a1)
        for (_, _, a0), (t1, _, a1) in itertools.pairwise(published)
        if a1 is not None and a0 is not None and a1 < a0
    ]
    fences = sorted({f for _, f, _ in published if f is not None})
    print(
        f"{game.history.sent} matches; the active aggregator ({active}) cut from Redis "
        f"{healed - cut_at:.1f} s; fencing tokens seen {fences}; {len(published)} looks at "
        f"the snapshot, its asOf going back {len(back)} times; the old one found its lease "
        f"lost {after[lost] - before[active][lost]:.0f} times and was refused "
        f"{after[fenced] - before[active][fenced]:.0f} publishes; the board equal to the store "
        f"{verdict.board_caught_up_s:.1f} s after the load stopped; {verdict.ranks()}"
    )
    assert len(fences) >= 2
    assert not back, back
    assert verdict.ok, verdict


def _logged_at(line: str) -> float:
    """When a process logged ``line`` (its first 23 characters, ``logging``'s asctime, in
    the machine's time zone, which the test shares), in epoch seconds."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


async def _until_asked(
    what: str, check: Callable[[], bool], deadline_s: float = partitions.DEADLINE_S
) -> None:
    """``_until`` for a check that asks a node (``redis-cli``): in a thread, so that the
    game servers and the players go on meanwhile."""
    deadline = time.monotonic() + deadline_s
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


async def _first_seen(
    checks: dict[str, Callable[[], bool]], deadline_s: float = partitions.DEADLINE_S
) -> dict[str, float]:
    """When (monotonic) each check was first seen true, each asked in a thread every 0.1 s
    until all were."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + deadline_s
    while len(seen) < len(checks):
        for what, check in checks.items():
            if what not in seen and await asyncio.to_thread(check):
                seen[what] = time.monotonic()
        assert time.monotonic() < deadline, f"never: {sorted(set(checks) - set(seen))}"
        await asyncio.sleep(0.1)
    return seen


def _cluster_nodes(cluster: RedisCluster, port: int) -> dict[int, list[str]]:
    """The cluster as the node on ``port`` sees it (``CLUSTER NODES``): each node's line,
    split, by its port (fields: id, address, flags, primary's id, ..., slot ranges)."""
    lines = cluster.cli(port, "cluster", "nodes").splitlines()
    return {int(p[1].split("@")[0].rsplit(":", 1)[1]): p for p in map(str.split, lines) if p}


def _promoted(cluster: RedisCluster, seen_from: int, old: int, new: int) -> bool:
    """Whether ``seen_from`` sees ``new`` as a primary serving slots and ``old`` failed."""
    with contextlib.suppress(Exception):
        nodes = _cluster_nodes(cluster, seen_from)
        return (
            "master" in nodes[new][2].split(",")
            and len(nodes[new]) > 8
            and "fail" in nodes[old][2].split(",")
        )
    return False


def _refuses(cluster: RedisCluster, port: int) -> bool:
    """Whether the node on ``port`` says its cluster is down (it refuses every key)."""
    with contextlib.suppress(Exception):
        return "cluster_state:fail" in cluster.cli(port, "cluster", "info")
    return False


def _replica_again(cluster: RedisCluster, old: int, new: int) -> bool:
    """Whether the node on ``old`` is a replica of ``new`` again, its link up."""
    with contextlib.suppress(Exception):
        info = cluster.cli(old, "info", "replication")
        return (
            "role:slave" in info
            and f"master_port:{new}" in info
            and "master_link_status:up" in info
        )
    return False


async def _writes(
    host: str, port: int, keys: set[str], into: list[tuple[float, str, float]]
) -> None:
    """Every score a node writes to one of ``keys``, as its ``MONITOR`` shows them: the
    ``ZADD`` calls of the updater's script (``write.lua``), each with the node's wall clock,
    the member and the score, into ``into``, until cancelled."""
    r = aioredis.Redis(host=host, port=port, decode_responses=True)
    try:
        async with r.monitor() as m:
            while True:
                seen = await m.next_command()
                words = str(seen["command"]).split(" ")
                if seen["client_type"] == "lua" and words[0].upper() == "ZADD" and words[1] in keys:
                    into.append((float(seen["time"]), words[-1], float(words[-2])))
    finally:
        await r.aclose()


async def _scores(host: str, port: int, keys: set[str]) -> tuple[dict[str, float], str]:
    """Every member's score in ``keys``, read from a replica (``READONLY``), and the
    replica's role after the read (``INFO replication``)."""
    r = aioredis.Redis(
        host=host, port=port, decode_responses=True, socket_timeout=5, single_connection_client=True
    )
    try:
        await r.execute_command("READONLY")
        out: dict[str, float] = {}
        for key in sorted(keys):
            out.update(dict(await r.zrange(key, 0, -1, withscores=True)))
        info = await r.info("replication")
    finally:
        await r.aclose()
    return out, str(info.get("role"))


@pytest.mark.slow
@pytest.mark.timeout(480)
@pytest.mark.parametrize(
    "fleet",
    logs("+cluster", short="nats") + (logs("+cluster+partial", short="nats") if FULL else []),
    indirect=True,
)
async def test_a_redis_cluster_primary_cut_from_its_majority_loses_its_late_writes_to_the_mender(
    fleet: NetFleet,
) -> None:
    """The index split in shards on a Redis Cluster of three primaries and three replicas,
    each node on a host of its own, and two workers (relay, updater, mender, aggregator).
    The primary that serves the most shards is cut, both ways, from the other five nodes,
    from the second worker and from API process 2, while the first worker and API process
    1 still reach it and the first worker goes on writing boards to it.

    What Redis Cluster does, and the scenario shows: the majority (the other two primaries)
    marks the cut primary failed after ``cluster-node-timeout`` and promotes its replica,
    which lacks every write the old primary took after the cut; the old primary, seeing it
    lost the majority, stops taking writes itself (``cluster_state:fail``: every keyed
    command refused) after about the same timeout, so the split brain is bounded: its
    writes of the cut's first seconds, and no later ones. (Meanwhile, with the default
    ``cluster-require-full-coverage``, the whole cluster refuses keys from the failure's
    agreement until the promotion: an outage of the index, which reads answer 503.) On the
    heal the old primary rejoins as a replica of the promoted one, which drops those writes,
    by Redis's design. The mender sees the promoted replica's generation markers name the
    old node and applies the log again for those shards: every acknowledged result is on
    the board exactly once, equal to the store, and no rank answered meanwhile, exact or
    estimated, is false at the moments it may speak for. The test first checks that the old
    primary took, after the cut, newer totals than its replica held, so that it cannot pass
    without the lost writes it is about."""
    cluster = fleet.cluster
    assert cluster is not None
    game = Game(fleet.apis, fleet.key, RATE)
    tasks = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    tasks += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2")]
    ports = {p: n for p, n in zip(cluster.ports, (f"rc{i}" for i in range(1, 7)), strict=True)}
    primaries = await asyncio.to_thread(cluster.primaries)
    on = {p: await asyncio.to_thread(shards_on, cluster, p, AGG_SHARDS) for p in primaries}
    old = max(primaries, key=lambda p: (len(on[p]), -p))
    new = await asyncio.to_thread(replica_of, old, cluster.host(old))
    witness = next(p for p in primaries if p != old)  # a primary of the majority
    keys = {f"nf:{shard_tag(n)}:{partitions.BOARD}:all:z" for n in on[old]}
    taken_after: list[tuple[float, str, float]] = []  # the old primary's writes: when, who, score
    watch = asyncio.create_task(_writes(cluster.host(old), old, keys, taken_after))
    a = fleet.hosts[ports[old]]
    cut_off = [fleet.hosts[ports[p]] for p in cluster.ports if p != old]
    cut_off += [fleet.hosts["worker2"], fleet.hosts["api2"]]
    try:
        await game.acknowledged(40)
        for h in cut_off:
            fleet.net.cut(a, h)
        cut, cut_wall = time.monotonic(), time.time()
        # What the replica holds: all it will hold when promoted, since nothing reaches it
        # from its primary after the cut (once what was on the wire at the cut is applied).
        await asyncio.sleep(0.2)
        held, role = await _scores(cluster.host(new), new, keys)
        assert role == "slave", f"the replica was {role} before its read: read too late"
        # Both awaited at once, each seen within 0.1 s and a redis-cli call of its moment.
        seen = await _first_seen(
            {
                "the replica promoted": lambda: _promoted(cluster, witness, old, new),
                "the old primary refusing keys": lambda: _refuses(cluster, old),
            }
        )
        promoted, refused = seen["the replica promoted"], seen["the old primary refusing keys"]
        await game.acknowledged(20)  # boards written to the promoted replica meanwhile
        # The watch ends at the heal (the node is made a replica then, and refuses writes
        # until it is): cancelled, or anything else stopped it early, and its count is short.
        watch.cancel()
        (watched,) = await asyncio.gather(watch, return_exceptions=True)
        assert isinstance(watched, asyncio.CancelledError), f"the watch: {watched!r}"
        for h in cut_off:
            fleet.net.heal(a, h)
        healed = time.monotonic()
        await _until_asked(
            "the old primary a replica again", lambda: _replica_again(cluster, old, new)
        )
        demoted = time.monotonic()
        await asyncio.to_thread(cluster.wait_ok, partitions.DEADLINE_S, False)
        # And some seconds more on the whole cluster: more ranks read, exact and estimated
        # (a player's app reads about two a second).
        await game.acknowledged(200)
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        await game.end(tasks)
    after = [(t, p, s) for t, p, s in taken_after if t >= cut_wall]
    # What the old primary took after the cut that its replica lacked: lost on the heal.
    taken = {p for _, p, s in after if s > held.get(p, float("-inf"))}
    last = max((t for t, _, _ in after), default=cut_wall) - cut_wall
    # From the cut until the mender replayed, the board (on either node) may lack what the
    # store took since the cut: ranks then may be as of the cut; the replay's end is not
    # seen from outside, so until the load stopped. Part of the index is out for API process
    # 2 from the cut until its client finds the promoted replica (not seen from outside:
    # until the heal), and for API process 1 once the old primary refuses keys, and for both
    # while the other primaries do, until the promotion: either may answer the last page it
    # read meanwhile (README, "A marker gone").
    out = {"api1": (cut, promoted), "api2": (cut, healed)}
    verdict = await partitions.check(fleet, game, out, board_behind=(cut, time.monotonic()))
    replays = [
        line
        for w in ("worker", "worker2")
        for line in fleet.fleet.procs[w].log.read_text(errors="replace").splitlines()
        if "were applied again" in line
    ]
    # The first replay came after the old primary's last write, so that it covered them all
    # (the mender that replays marks the shards with their new node: another one, whose
    # client still wrote to the old primary, would not replay again); reported, since Redis
    # orders them (the old primary refuses before its replica is voted in), not podium.
    first = min((_logged_at(line) for line in replays), default=float("nan"))
    # The players' reads from the cut to the promotion, by process and answer: with
    # ``cluster-require-full-coverage no`` (the "partial" fleet) the nodes that keep the
    # majority serve their slots meanwhile, and an answer that needs the others' is a 503 or
    # labelled (the checker's), never a rank counted from some of the shards.
    reads = Counter(
        (t.api, t.outcome)
        for t in game.history.tries
        if not partitions.is_submit(t) and cut <= t.sent < promoted
    )
    print(
        f"{game.history.sent} matches; cut the primary of shards {sorted(on[old])} "
        f"({len(on[old])} of {AGG_SHARDS}); its replica promoted {promoted - cut:.1f} s after "
        f"the cut; the old primary refusing keys {refused - cut:.1f} s after it; "
        f"its last write after the cut {last:.1f} s after it ({len(after)} writes after the "
        f"cut, {len(taken)} players' newer totals its replica lacked); a replica again "
        f"{demoted - healed:.1f} s after the heal; the board equal to the store "
        f"{verdict.board_caught_up_s:.1f} s after the load stopped; answers "
        f"{dict(game.history.outcomes())}; the first replay {first - cut_wall:.1f} s after the "
        f"cut; the mender: {replays}; reads from the cut to the promotion {dict(reads)}; "
        f"{verdict.ranks()}"
    )
    assert taken, "the old primary took no write its replica lacked: no split brain"
    assert replays, "no mender replayed the log after the promotion"
    assert verdict.ok, verdict


AS_OF = re.compile(r'asOf\\?"\s*:\s*([0-9.e+]+)')


@dataclass(frozen=True)
class _Publish:
    """A snapshot publish a node took, as its ``MONITOR`` showed it: the call (``EVALSHA`` of
    ``publish.lua``, by the client's address) or the snapshot's write inside it (``SET``,
    with the snapshot's asOf), with the node's wall clock."""

    at: float
    by: str  # the client's address; "lua" for the write inside the script
    as_of: float | None


async def _publishes(host: str, port: int, into: list[_Publish]) -> None:
    """Every snapshot publish the node on ``port`` takes (``_Publish``), until cancelled. A
    watch whose connection fails is started again, and says so: one that ended unseen left
    the test waiting for a publish it could no longer see (its deadlines, added up, then
    outlasted pytest's timeout, whose signal lands in any task)."""
    while True:
        r = aioredis.Redis(host=host, port=port, decode_responses=True)
        try:
            async with r.monitor() as m:
                while True:
                    seen = await m.next_command()
                    command = str(seen["command"])
                    if ":{agg}:snap:" not in command:
                        continue
                    if seen["client_type"] == "lua":
                        if command.upper().startswith("SET "):
                            got = AS_OF.search(command)
                            as_of = float(got.group(1)) if got else None
                            into.append(_Publish(float(seen["time"]), "lua", as_of))
                    elif command.upper().startswith("EVALSHA "):
                        address = str(seen["client_address"])
                        into.append(_Publish(float(seen["time"]), address, None))
        except Exception as e:  # not a cancellation: watched again
            print(f"the watch of {host}:{port} failed ({e!r}): watching again", flush=True)
            await asyncio.sleep(0.1)
        finally:
            await r.aclose()


async def _agg_keys(host: str, port: int) -> tuple[int | None, float | None]:
    """The fencing counter and the all-time snapshot's asOf as the node on ``port`` holds
    them (a replica read with ``READONLY``), None where it has none."""
    r = aioredis.Redis(
        host=host, port=port, decode_responses=True, socket_timeout=2, single_connection_client=True
    )
    try:
        await r.execute_command("READONLY")
        fence = await r.get("nf:{agg}:fence")
        snap = await r.get(f"nf:{{agg}}:snap:{partitions.BOARD}:all")
    finally:
        await r.aclose()
    as_of = None if snap is None else float(json.loads(snap)["asOf"])
    return (None if fence is None else int(fence)), as_of


async def _watermarks(nodes: list[tuple[str, int]], into: list[tuple[float, float]]) -> None:
    """The board marks' watermark (the least mark) as each node holds it, every 0.1 s, as
    (when, the watermark), until cancelled; a node that does not answer is passed over."""
    clients = [
        aioredis.Redis(host=h, port=p, decode_responses=True, socket_timeout=1) for h, p in nodes
    ]
    try:
        while True:
            for r in clients:
                with contextlib.suppress(Exception):  # cut, or refusing keys
                    await r.execute_command("READONLY")
                    held = await r.hgetall("nf:{agg}:marks")
                    if held:
                        into.append((time.time(), min(float(v) for v in held.values())))
            await asyncio.sleep(0.1)
    finally:
        for r in clients:
            await r.aclose()


def _went_back(
    ranks: list[RankRead], watermarks: list[tuple[float, float]]
) -> tuple[list[tuple[str, float, float, float]], int]:
    """Each rank answer of a process whose snapshot is older than one the same process
    answered from before it was asked: (the process, when it was asked, the asOf seen
    before, this one's); and how many answers went back only by the board marks' label.

    An answer's asOf is its snapshot's, unless the board was more than a bound behind the
    store: then it is the marks' watermark, which may be older than a snapshot answered
    before (the board never went back; what the answer vouches for did). Such an answer,
    whose asOf is, to the second, a watermark the nodes held by the time it was answered,
    is held to its asOf by the rank check instead."""
    out, labelled = [], 0
    for api in sorted({r.api for r in ranks}):
        mine = sorted((r for r in ranks if r.api == api and r.as_of), key=lambda r: r.sent)
        for r in mine:
            before = [o.as_of for o in mine if o.answered < r.sent and o.as_of is not None]
            if not before or r.as_of is None or r.as_of >= max(before):
                continue
            done_at = r.wall + (r.answered - r.sent)
            if any(t <= done_at and int(w) == int(r.as_of) for t, w in watermarks):
                labelled += 1
                continue
            out.append((api, r.sent, max(before), r.as_of))
    return out, labelled


@full_only  # about 55 s a run (its fleet 25 to 35 s): not in CI's short version
@pytest.mark.slow
@pytest.mark.timeout(1200)  # past its waits added up: one that never ends fails with its name
@pytest.mark.parametrize(
    ("fleet", "cut"),
    [(f, cut) for f in logs("+cluster", short="nats") for cut in ("both-ways", "deaf", "mute")]
    # The vote slower than the aggregator's lease: the promoted replica's copy of it has run
    # out, and either aggregator may take a new tenure there. ``standby-side``: both ways,
    # but the standby is the one still reaching the old primary, and the active one is cut
    # from it: the lease runs out there before the old primary refuses keys, so the standby
    # may take a tenure on it that the promoted replica never hears of.
    + [
        (f, c)
        for f in logs("+cluster+slowvote", short="nats")
        for c in ("both-ways", "standby-side")
    ],
    indirect=["fleet"],
)
async def test_the_primary_of_the_aggregators_keys_cut_from_its_majority_loses_no_reader_time(
    fleet: NetFleet, cut: str
) -> None:
    """The cluster fleet of the scenario above, but the primary cut is the one that serves the
    aggregator's keys (the ``{agg}`` tag: its lease, its fencing counter, the snapshots and
    their stamps), cut from the other five nodes, from the standby aggregator's worker and
    from API process 2, while the active aggregator's worker and API process 1 still reach
    it. ``both-ways``: nothing passes; ``deaf``: the old primary still sends to them, but
    hears nothing from them (each drops what it sends to it: one direction only); ``mute``:
    the other direction, it hears them but what it sends them is dropped (at it).

    The active aggregator goes on publishing to the old primary until it refuses keys; its
    replica, promoted, holds the snapshot as of the cut, so those late publishes are lost
    when the old primary rejoins as a replica. The scenario shows that the aggregator
    publishes again to the promoted replica, newer than every snapshot lost; that no reader
    is answered from a snapshot older than one it was answered from before (a rank answer's
    asOf never goes back in one process); and, as in every scenario, that nothing is lost or
    doubled, no exact rank is false and no estimate misses its interval. With ``standby-side``
    the aggregator publishing late to the old primary, if any, is the standby, under a tenure
    taken there after the active one's lease ran out; the promoted replica knows only the
    tenure before the cut, and the same checks hold."""
    cluster = fleet.cluster
    assert cluster is not None
    # A third reader on each API process: a snapshot going back in time lasts until the next
    # publish, and more rank reads see it if it happens.
    game = Game(fleet.apis, fleet.key, RATE)
    tasks = [asyncio.create_task(game.sender(i, SENDERS)) for i in range(SENDERS)]
    tasks += [asyncio.create_task(game.reader(api)) for api in ("api1", "api2", "api1", "api2")]
    ports = {p: n for p, n in zip(cluster.ports, (f"rc{i}" for i in range(1, 7)), strict=True)}
    old = await asyncio.to_thread(primary_of, cluster, "{agg}")
    new = await asyncio.to_thread(replica_of, old, cluster.host(old))
    witness = next(p for p in await asyncio.to_thread(cluster.primaries) if p != old)
    shards = await asyncio.to_thread(shards_on, cluster, old, AGG_SHARDS)
    on_old: list[_Publish] = []
    on_new: list[_Publish] = []
    marks: list[tuple[float, float]] = []
    watches = [
        asyncio.create_task(_publishes(cluster.host(old), old, on_old)),
        asyncio.create_task(_publishes(cluster.host(new), new, on_new)),
        asyncio.create_task(_watermarks([(cluster.host(p), p) for p in (old, new)], marks)),
    ]
    a = fleet.hosts[ports[old]]
    by_address = {fleet.hosts[w].address: w for w in ("worker", "worker2")}
    cut_off: list[Host] = []
    try:
        await game.acknowledged(40)

        def active() -> str | None:
            calls = [p.by for p in on_old if p.by in by_address]
            return by_address[calls[-1]] if calls else None

        await _until("a snapshot published", lambda: active() is not None)
        leader = active()
        assert leader is not None
        standby = "worker2" if leader == "worker" else "worker"
        reaching, cut_from = (standby, leader) if cut == "standby-side" else (leader, standby)
        cut_off = [fleet.hosts[ports[p]] for p in cluster.ports if p != old]
        cut_off += [fleet.hosts[cut_from], fleet.hosts["api2"]]
        for h in cut_off:
            if cut in ("both-ways", "standby-side"):
                fleet.net.cut(a, h)
            elif cut == "deaf":
                fleet.net.cut(h, a, both=False)  # h's packets to it dropped, at h
            else:
                fleet.net.cut(a, h, both=False)  # its packets to h dropped, at it
        cut_at, cut_wall = time.monotonic(), time.time()
        _, before = await _agg_keys(cluster.host(new), new)
        seen = await _first_seen(
            {
                "the replica promoted": lambda: _promoted(cluster, witness, old, new),
                "the old primary refusing keys": lambda: _refuses(cluster, old),
            }
        )
        promoted, refused = seen["the replica promoted"], seen["the old primary refusing keys"]
        late = [p.as_of for p in on_old if p.by == "lua" and p.at >= cut_wall and p.as_of]
        late_by = sorted(
            {by_address[p.by] for p in on_old if p.at >= cut_wall and p.by in by_address}
        )
        newest_lost = max(late, default=0.0)

        def republished() -> bool:
            return any(p.by == "lua" and (p.as_of or 0.0) > newest_lost for p in on_new)

        # The aggregator that still reaches every node publishes to the promoted replica
        # (under its old lease, or a new tenure), a snapshot newer than every one lost.
        await _until("a snapshot published again on the promoted replica", republished)
        again = time.monotonic()
        fence_then, _ = await _agg_keys(cluster.host(new), new)
        await game.acknowledged(20)
        for h in cut_off:
            _heal(fleet, cut, a, h)
        cut_off = []
        healed = time.monotonic()
        await _until_asked(
            "the old primary a replica again", lambda: _replica_again(cluster, old, new)
        )
        demoted = time.monotonic()
        await asyncio.to_thread(cluster.wait_ok, partitions.DEADLINE_S, False)
        await game.acknowledged(200)
    finally:
        for h in cut_off:  # a failure mid-cut: healed before the fleet is stopped
            with contextlib.suppress(Exception):
                _heal(fleet, cut, a, h)
        for w in watches:
            w.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        await game.end(tasks)
    fence_end, end_as_of = await _agg_keys(cluster.host(new), new)
    publishers = sorted({by_address[p.by] for p in on_new if p.by in by_address})
    # API process 2 and the standby reach no part of the old primary's slots from the cut to
    # the heal; API process 1 none once it refuses keys, until its client finds the promoted
    # replica (not seen from outside: until the promotion). The board may lack, from the cut
    # until the mender replayed, what the old primary took of its shards' writes.
    out = {"api1": (cut_at, promoted), "api2": (cut_at, healed)}
    verdict = await partitions.check(fleet, game, out, board_behind=(cut_at, time.monotonic()))
    back, labelled = _went_back(game.history.ranks, marks)
    sampled = await partitions.api_metrics(fleet, await partitions.ops_key(fleet))
    passed = "podium_snapshots_passed_over_total"
    passed_over = int(sum(v for k, v in sampled.items() if k.startswith(passed)))
    during = game.history.tries
    answered = Counter(
        (t.api, t.outcome) for t in during if not is_submit(t) and cut_at <= t.sent < healed
    )
    print(
        f"{game.history.sent} matches; cut ({cut}) the primary of the aggregator's keys "
        f"(and of shards {sorted(shards)}) from its majority, {cut_from} and api2, {reaching} "
        f"({'standby' if reaching == standby else 'active'}) and api1 still reaching it; the "
        f"replica promoted {promoted - cut_at:.1f} s after the cut; the old primary refusing "
        f"keys {refused - cut_at:.1f} s after it; {len(late)} snapshots published to it "
        f"after the cut, by {late_by} (asOf up to "
        f"{newest_lost - cut_wall:+.1f} s of the cut; the replica's before the cut "
        f"{(before or 0.0) - cut_wall:+.1f} s), lost at the heal; published again on the "
        f"promoted replica {again - promoted:.1f} s after the promotion (fencing token "
        f"{fence_then}, by {publishers}); a replica again {demoted - healed:.1f} s after the "
        f"heal; the fencing token at the end {fence_end}, the snapshot's asOf "
        f"{(end_as_of or 0.0) - time.time():+.1f} s of now; reads during the cut "
        f"{dict(answered)}; rank answers whose snapshot went back: {len(back)} "
        f"{[(api, round(t - cut_at, 1), b - a) for api, t, b, a in back[:5]]} (the process, "
        f"asked how long after the cut, how many seconds back), and {labelled} whose asOf "
        f"went back to the board marks' watermark only; snapshots passed over by the "
        f"API processes as older than one they used {passed_over}; "
        f"the board equal to the store {verdict.board_caught_up_s:.1f} s after the load "
        f"stopped; {verdict.ranks()}"
    )
    # Cut from the active aggregator, the old primary takes a late snapshot only if the
    # standby's tenure there began before it refused keys: a race the test does not force.
    assert late or cut == "standby-side", "the old primary took no snapshot after the cut"
    assert set(late_by) <= {reaching}, late_by
    assert not back, back
    assert verdict.ok, verdict


def _heal(fleet: NetFleet, cut: str, a: Host, h: Host) -> None:
    """The link between the old primary ``a`` and ``h`` whole again, cut as ``cut`` says:
    the rules are on the host that drops."""
    fleet.net.heal(h, a) if cut == "deaf" else fleet.net.heal(a, h)
