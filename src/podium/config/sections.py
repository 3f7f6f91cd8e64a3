"""The settings file's sections, ``[server]``, ``[store]``, ``[index]``, ``[log]``,
``[workers]`` and ``[archive]``: frozen pydantic dataclasses, each value checked by its type
(``values.py``), each setting documented where it is declared (the JSON Schema and the
README's table are made from these docstrings).
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Literal

from annotated_types import Ge, Gt, Le
from pydantic import Strict, StringConstraints
from pydantic.dataclasses import dataclass as table

from podium.config.kafka import KafkaSettings
from podium.config.values import (
    NUMBER,
    STRING,
    TABLE,
    WHOLE,
    Amount,
    AtLeastOne,
    Count,
    Flag,
    IndexUrl,
    LogUrl,
    Networks,
    Port,
    ShardUrls,
    StoreUrl,
    Text,
    as_float,
    as_int,
    says,
)


@table(frozen=True, config=TABLE)
class ServerSettings:
    host: Text = "127.0.0.1"
    port: Port = 8000
    max_body_bytes: Count = 64 * 1024
    """Larger request bodies get 413."""
    max_results_per_match: Count = 100
    read_rate_per_s: Amount = 50.0
    """Per client address; 0 turns read rate limiting off."""
    read_burst: Count = 100
    read_limiter: Annotated[
        Literal["auto", "process", "redis"], says("expected auto | process | redis")
    ] = "auto"
    """Where the read buckets live: "process" (each API process its own, so N processes let a
    client read N times the rate), "redis" (one bucket per client for the whole fleet, in the
    index's Redis: one script call per read; if that Redis is down, reads are served and
    counted in podium_read_limiter_failopen_total), or "auto": redis when index.url is
    redis://, else process. The metric podium_read_limiter says which is in force."""
    trusted_proxies: Networks = ()
    """Load balancers (addresses or networks) whose X-Forwarded-For, or else Forwarded
    (RFC 7239), is believed: the client is the right-most address there that is not itself a
    trusted proxy. From any other peer these headers are ignored."""
    page_cache_s: Amount = 1.0
    """How long one process holds a board page."""
    board_behind_s: Amount = 1.0
    """How far the board (the rank index) may be behind the store before exact answers
    read from it say so: past it, a rank, its neighbors, a top page and a friends board
    carry ``asOf`` the board marks' watermark (``[workers] mark_s``), the moment up to
    which every acknowledged match is on the board. Keep it above ``mark_s`` and the
    usual commit-to-board time."""
    max_clock_skew_s: Count = 60
    """How far in the future endedAt may be."""
    key_cache_s: Amount = 10.0
    """How long a verified credential is trusted without a lookup: a revoked key is refused
    by every API process within this long (at once by the one that revoked it)."""
    max_pending_matches: AtLeastOne = 64
    """Matches in flight at once in one process, those waiting for their turn included; one
    more gets 503 with Retry-After, so that overload shows as a prompt "back off" rather than
    every answer taking seconds. The store work of at most [store] pool_size +
    read_pool_size of them runs at once; the others wait their turn, in the order they came
    (match_wait_ms)."""
    match_wait_ms: Annotated[
        float, Strict(), Gt(0), as_float, says(NUMBER, "expected more than 0")
    ] = 1000.0
    """The longest a match waits for its turn at the store: one that has waited this long,
    or whose turn would come past it by the recent matches' store time, gets 503 with
    Retry-After before any store work, as does one whose client left while it waited (each
    counted in podium_matches_turned_away_total by reason). A game server that stopped
    waiting is never answered by work the store did for nothing: on a slow link, taking
    every match at once had the store finish them after their game servers gave up."""
    max_streams_per_client: AtLeastOne = 16
    """Live board streams (``/v1/boards/{board}/stream``) one client may hold open in one
    process; one more gets 429. Clients are told apart by address, as for the read rate: behind
    a proxy, every client it forwards counts as one unless the proxy is trusted."""
    max_streams: AtLeastOne = 2000
    """Streams open at once in one process, all clients together; one more gets 503."""
    max_connections: AtLeastOne = 4096
    """Connections open at once to one process (streams, keep-alive connections, and
    requests); one more is answered 503 with Retry-After and closed as soon as it is
    accepted, while those open go on. At start the process raises its limit on open files
    to hold this many and its backends' (or warns that it cannot)."""
    idle_timeout_s: AtLeastOne = 5
    """A connection with no request under way, just opened or between two requests, is
    closed after this many seconds."""
    request_timeout_s: AtLeastOne = 10
    """A request must arrive whole, headers and body, within this many seconds of its first
    byte, or its connection is closed (with a 408 where nothing was answered yet)."""
    api: Annotated[Literal["all", "read", "write"], says("expected all | read | write")] = "all"
    """What this process answers: "all"; "read" (players: boards, ranks, friends, the browser
    pages and streams) or "write" (game servers and admins: results, profiles, friends lists,
    bans, freezes, review), each with the health and metrics endpoints. A fleet that runs them
    apart keeps reads from queueing behind bursts of writes."""
    tournament_min_period_s: Count = 3600
    """The shortest time a recurring tournament's schedule may leave between two starts (a
    create with a shorter one is a 422): each run is a board window of its own, frozen,
    archived and announced by a tournament.ended event, so "* * * * *" would make 1,440 of
    each a day for as long as it lasts. 0: no minimum."""
    claim_lease_s: Amount = 60.0
    """How long a match id stays claimed by a key that has no result in it yet: a request
    that died between its claim and its writes (a crash, a kill -9) leaves such a claim, and
    once it is this old another key may record the match. Longer than any request takes."""
    shed_reads: Flag = True
    """When this process is saturated, refuse reads (503, Retry-After: 1) before accepting
    results slows: far-down reads first, then friends, then the top page (served from its
    last copy where there is one), a player's own rank last (README, "Results before
    reads"; docs/architecture.md, domain/admission.py). Results are never shed."""
    shed_lag_ms: Annotated[
        float, Strict(), Gt(0), as_float, says(NUMBER, "expected more than 0")
    ] = 5.0
    """The event loop's smoothed lag at which the first class of reads is shed; the next
    classes at 2, 3 and 4 times it. A result waits about this long at each of its handful of
    store round trips; one late all the same is what ``shed_accept_ms`` catches."""
    shed_accept_ms: Annotated[
        float, Strict(), Gt(0), as_float, says(NUMBER, "expected more than 0")
    ] = 30.0
    """A match this process has been recording this long sheds every read (the top page
    still answered from its last copy) until no match in flight is that old, and for a
    second after: a result already late says reads must wait, whatever the loop's lag.
    Beside 64 readers past capacity, 30 ms kept accept p99 at 39-46 ms, 50 ms at 80-123
    (BENCHMARKS.md, "Four misses of issue 23")."""


@table(frozen=True, config=TABLE)
class StoreSettings:
    url: StoreUrl = "sqlite:///podium.db"
    shards: ShardUrls = ()
    """The Postgres databases that hold players, split by player (README, "Store split by
    player"); ``url`` is then the home database, which holds the keys, the bucket map and the
    freezes. Empty: one database, ``url``, holds everything."""
    pool_size: Count = 10
    """Postgres connections for transactions and writes, per process (and per database). A
    pool opens one at first; once a request finds none idle, it opens the rest in the
    background and keeps them open, opening again any that closes."""
    read_pool_size: Count = 10
    """And for reads, apart, so that writes never hold them up."""
    timeout_s: Annotated[
        float, Strict(), Ge(0.1), as_float, says(NUMBER, "expected 0.1 or more")
    ] = 2.0
    """How long a request waits on a Postgres it cannot reach: a connection is opened, or one
    taken from a full pool, within it; a connection whose link leaves what was sent
    unacknowledged this long (TCP_USER_TIMEOUT), or answers no keepalive probe (sent after
    half of it idle), is dropped, by podium's end and by Postgres's (its tcp_user_timeout and
    tcp_keepalives_*, set for the session), so a cut link frees its connection slots too. A
    request that cannot reach the store answers 503 with Retry-After within about twice
    this (docs/faults.md). Too short drops connections on a lossy link that would recover."""
    command_timeout_s: Annotated[
        float, Strict(), Ge(0.1), as_float, says(NUMBER, "expected 0.1 or more")
    ] = 10.0
    """The longest any one statement may run on a link that answers (a freeze of a big
    window, a rebuild's read); past it the statement is cancelled and the call is a 503."""
    keep_results_days: Count = 90
    """Results stay in the store this many days (by ``endedAt``), then the pruner moves
    them to a gzip CSV per day under ``[archive] dir``; older ones are refused (422). Tallies,
    final standings and match claims stay. 0: keep every result, refuse none."""
    keep_events_days: Count = 30
    """Reward and moderation events (webhooks) stay this many days, then the pruner deletes
    those done with: every delivery delivered or failed (and, with NATS as the log, on the
    stream). 0: keep every event."""
    erasure_secret: Annotated[
        str, StringConstraints(strict=True, max_length=1024), says(STRING, "at most 1024")
    ] = ""
    """The key of the hashes the store keeps of erased players' ids (HMAC-SHA256), so that
    a later result for an erased id is refused without the id being kept. Empty: the first
    process generates a random key and keeps it in the store (a split store's home), and
    every process uses that one from then on; anyone who reads that row as well as the
    hashes can test guessed ids against them. Set it (from the environment,
    PODIUM_STORE_ERASURE_SECRET) to a long random string kept apart from the store, and
    never change it: it wins over the kept one, and a new secret forgets every erasure made
    under the old one."""


@table(frozen=True, config=TABLE)
class IndexSettings:
    url: IndexUrl = "memory://"
    shards: AtLeastOne = 1
    prefix: Annotated[
        str,
        StringConstraints(strict=True, pattern=r"^[A-Za-z0-9_.-]{1,32}$"),
        says(STRING, "expected 1 to 32 of letters, digits, _ . -"),
    ] = "podium"
    """Every Redis key starts with this."""
    read_from_replicas: Flag = False
    """Rank reads from the replicas of a Redis Cluster (or those Sentinel lists, on
    redis+sentinel://), writes to the primaries: a replica may lag its primary by a few
    milliseconds, which a rank read can afford."""
    failover_replay_s: Count = 60
    """When a Redis node behind the index changed (a replica took over, or it restarted
    from a snapshot), every process that writes boards applies the change log once more
    from this many seconds before the shard's generation marker was last confirmed on its
    old node (before the change, however late it is noticed), to bring back the writes the
    new node lacks; 0 turns it off. It must reach back past the updaters' lag and a
    replica's at their worst."""
    watch_s: Annotated[float, Strict(), Gt(0), as_float, says(NUMBER, "expected more than 0")] = 2.0
    """How often each process that writes boards reads the index's generation markers: the
    longest a lost index or a failover goes unseen; and how often every process reads the
    layout record of a split index (the live shard count, ``podium rebuild --all --shards``)."""


@table(frozen=True, config=TABLE)
class LogSettings:
    url: LogUrl = "outbox://"
    stream: Annotated[
        str,
        StringConstraints(strict=True, pattern=r"^[A-Za-z0-9_-]{1,32}$"),
        says(STRING, "expected 1 to 32 of letters, digits, _ -"),
    ] = "podium"
    """The JetStream stream's name (and its subjects' first token), so that several
    deployments can share one NATS. The relays' leases are kept beside it, in the
    key-value bucket ``<stream>-relays``."""
    partitions: AtLeastOne = 16
    """How many parts the JetStream log is split into by player (subjects
    ``<stream>.changes.<n>``, one durable consumer each), so that updaters share the work and
    one player's changes stay in order. Fixed for the life of a stream: a stream made with
    another count is refused at start."""
    replicas: Annotated[int, Strict(), Ge(0), Le(5), as_int, says(WHOLE, "expected 0 to 5")] = 0
    """Copies of the stream kept by a NATS cluster; 0: min(3, the cluster's size)."""
    retention_s: AtLeastOne = 86_400
    """How long the stream keeps each change, applied or not: how far back ``podium worker
    --replay-since`` can reach on NATS, and what other subscribers may read again."""
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    """``[log.kafka]``: the topics, group and security of ``url = "kafka://..."``."""


@table(frozen=True, config=TABLE)
class WorkerSettings:
    batch: Count = 500
    """Changes per updater step."""
    idle_sleep_s: Amount = 0.05
    """The pause after a step that found less than a full batch. Each step costs about six
    round trips (claim, ban check, a write per board window, ack) whatever its size, so this
    sets how many a second a steady trickle of results costs; it adds as much to
    commit-to-board latency, whose target is a second."""
    mark_s: Amount = 0.5
    """How often the relay role writes a board mark into each store database's outbox (a
    row per log partition), which the updaters carry to the index: what tells the reads how
    far the board is behind the store (``[server] board_behind_s``). 0: no marks, and no
    answer is ever labelled behind."""
    lease_s: Amount = 10.0
    """How long a claimed outbox row is held before another updater may retry it; on NATS,
    a delivery's lease (the consumers' ack wait) and a relay's lease on a store database."""
    erasure_settle_s: Amount = 15.0
    """How long after an erasure's store step the eraser sweeps the store and the index once
    more: a record or an updater's write that began before the erasure and ended after its
    first sweep is gone by then. At least the longest a request or an updater batch takes
    (an updater's batch is held ``lease_s`` at most)."""
    erasure_lease_s: Amount = 60.0
    """How long an eraser holds an erasure it claimed without renewing it: it renews every
    third of it while a step runs, however long the step (an index sweep, the archive's
    rewrite on a big player), so this is how long a dead eraser's erasure waits before
    another takes it over, and how long a stalled one may miss its renewals before it loses
    the erasure."""


@table(frozen=True, config=TABLE)
class ArchiveSettings:
    dir: Text = "standings"
    """Frozen windows' full standings, one compressed file each."""
