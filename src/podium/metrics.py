"""The Prometheus metrics every role exports; one registry per process.

Defined in one module so that the API, the workers and the ops page read the same names.
Under ``podium serve --processes N`` every process writes its values to files in
``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode, chosen when it is
imported) and ``/metrics`` adds them up, so any one process answers for all of them; the
gauges say how (``multiprocess_mode``, ignored in a single process).
"""

from __future__ import annotations

import os

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

RESULTS_ACCEPTED = Counter(
    "podium_results_accepted", "Player results committed to the store", registry=REGISTRY
)
MATCHES_ACCEPTED = Counter(
    "podium_matches_accepted",
    "Match submissions answered 200 (retries too): beside podium_results_rejected, the share "
    "of submissions accepted",
    registry=REGISTRY,
)
CONNECTIONS_REFUSED = Counter(
    "podium_connections_refused",
    "Connections answered 503 and closed at once: the process had server.max_connections open",
    registry=REGISTRY,
)
REQUESTS_TIMED_OUT = Counter(
    "podium_requests_timed_out",
    "Connections closed because a request begun did not arrive whole within "
    "server.request_timeout_s",
    registry=REGISTRY,
)
RESULTS_FLAGGED = Counter(
    "podium_results_flagged",
    "Results flagged for review (accepted all the same)",
    registry=REGISTRY,
)
WEBHOOK_DELIVERIES = Counter(
    "podium_webhook_deliveries",
    "Webhook delivery attempts, by outcome: delivered, retried (to be tried again) or failed "
    "(given up past the endpoint's retry_for_s)",
    ["outcome"],
    registry=REGISTRY,
)
RECORD_REREADS = Counter(
    "podium_record_rereads",
    "Player results whose store transaction had to read again: something changed between "
    "the match's first read and its write (the same player in two matches at once, a "
    "freeze, a move between groups)",
    registry=REGISTRY,
)
RESULTS_REJECTED = Counter(
    "podium_results_rejected",
    "Match submissions refused, by HTTP status",
    ["status"],
    registry=REGISTRY,
)
ACCEPT_SECONDS = Histogram(
    "podium_accept_seconds",
    "Server time to accept a match, from its arrival: its wait for a turn included",
    buckets=_LATENCY,
    registry=REGISTRY,
)
MATCHES_TURNED_AWAY = Counter(
    "podium_matches_turned_away",
    "Matches answered 503 before any store work, by reason: full (server.max_pending_matches "
    "in flight, waiting ones included), late (its turn would come, or came, past "
    "server.match_wait_ms), gone (its client left while it waited)",
    ["reason"],
    registry=REGISTRY,
)
for _reason in ("full", "late", "gone"):  # each shown from the start, at 0
    MATCHES_TURNED_AWAY.labels(_reason)
READ_SECONDS = Histogram(
    "podium_read_seconds",
    "Server time of board reads",
    ["kind"],
    buckets=_LATENCY,
    registry=REGISTRY,
)
GC_PAUSE_SECONDS = Histogram(
    "podium_gc_pause_seconds",
    "Pauses of the cyclic garbage collector, by generation (2: a full collection)",
    ["generation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
    registry=REGISTRY,
)
STORE_WRITE_GROUP = Histogram(
    "podium_store_write_group_size",
    "Writes committed together in one store transaction (SQLite: every write; Postgres: records)",
    buckets=(1, 2, 4, 8, 16, 32),
    registry=REGISTRY,
)
COMMIT_TO_BOARD_SECONDS = Histogram(
    "podium_commit_to_board_seconds",
    "From store commit to visible in the rank index",
    buckets=_LATENCY,
    registry=REGISTRY,
)
CHANGES_APPLIED = Counter(
    "podium_changes_applied", "Outbox changes applied to the rank index", registry=REGISTRY
)
PROFILES_APPLIED = Counter(
    "podium_profile_changes_applied",
    "Outbox profile changes copied into the rank index's copy of names",
    registry=REGISTRY,
)
CHANGES_SKIPPED_BANNED = Counter(
    "podium_changes_skipped_banned",
    "Changes not applied because the player is banned",
    registry=REGISTRY,
)
OUTBOX_PENDING = Gauge(
    "podium_outbox_pending",
    "Outbox rows not yet applied",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
OUTBOX_AGE_SECONDS = Gauge(
    "podium_outbox_age_seconds",
    "Age of the oldest outbox row not yet applied",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
BOARD_BEHIND_SECONDS = Gauge(
    "podium_board_behind_seconds",
    "How far the board is behind the store, as this API process last read its marks: now "
    "less the least board mark (domain/marks.py); absent until a mark was read",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
AGGREGATOR_ACTIVE = Gauge(
    "podium_aggregator_active",
    "1 while this process's rank aggregator holds the lease (0: a standby)",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
RELAY_DATABASES = Gauge(
    "podium_relay_databases",
    "Store databases whose outbox this process relays to NATS now, by its leases (0: a "
    "standby, or the outbox is the log)",
    registry=REGISTRY,
    multiprocess_mode="livesum",
)
AGGREGATOR_CYCLE_SECONDS = Histogram(
    "podium_aggregator_cycle_seconds",
    "Wall time of one aggregator cycle of a board window (every shard's top and counts, "
    "the merge, the publish)",
    ["board"],
    buckets=_LATENCY,
    registry=REGISTRY,
)
AGGREGATOR_SKIPPED = Counter(
    "podium_aggregator_skipped",
    "Aggregator cycles that published nothing: a shard did not answer for too long",
    ["board"],
    registry=REGISTRY,
)
AGGREGATOR_BUCKETS_COUNTED = Counter(
    "podium_aggregator_buckets_counted",
    "Histogram buckets the aggregator counted on a shard (one ZCOUNT each): a rotating "
    "sixteenth every cycle, every bucket where the moves since its last counts cannot tell; "
    "the others follow the moves",
    ["board"],
    registry=REGISTRY,
)
SNAPSHOTS_PASSED_OVER = Counter(
    "podium_snapshots_passed_over",
    "Snapshots read older than one this process used before (a failover of the snapshot "
    "store lost the newer ones), passed over: their reads counted on the shards",
    ["board"],
    registry=REGISTRY,
)
SNAPSHOT_AGE_SECONDS = Gauge(
    "podium_aggregator_snapshot_age_seconds",
    "How old the aggregator's snapshot that this process's readers see is (its asOf)",
    ["board"],
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
SNAPSHOTS_FENCED = Counter(
    "podium_snapshots_fenced",
    "Snapshots the index refused to keep because another aggregator leads under a newer "
    "fencing token: a cycle begun under a lease that ran out before its publish",
    ["board"],
    registry=REGISTRY,
)
LEASE_LOST = Counter(
    "podium_lease_lost",
    "Times a role of this process found a lease it held gone, and wrote nothing more under "
    "it: the aggregator (the lease taken over, or lapsed into a new tenure), the relay (a "
    "store database's lease), the updater (a batch held past its lease, given up unwritten)",
    ["role"],
    registry=REGISTRY,
)
BOARD_WRITES_UNCHANGED = Counter(
    "podium_board_writes_unchanged",
    "Board entries an updater wrote that left the board as it was: a total no better than "
    "the one held (GT/LT), a version no newer, or a banned player (a change applied twice, "
    "or late)",
    registry=REGISTRY,
)
RECONCILER_CHECKED = Counter(
    "podium_reconciler_checked",
    "Players the reconciler compared between the store and the rank index",
    registry=REGISTRY,
)
RECONCILER_MISMATCHES = Counter(
    "podium_reconciler_mismatches",
    "Index entries that differed from the store, still so after every change committed "
    "before was applied, and repaired: missing, too_high or too_low (the packed score), "
    "banned (a banned player on the board, removed), extra (a member the store has no "
    "tally of, removed), metadata (the entry metadata not the tally's, written again)",
    ["kind"],
    registry=REGISTRY,
)
WORKER_HEARTBEAT = Gauge(
    "podium_worker_heartbeat_timestamp",
    "Last loop of each worker role",
    ["role"],
    registry=REGISTRY,
    multiprocess_mode="max",
)
WORKER_ERRORS = Counter(
    "podium_worker_errors", "Worker loop failures, by role", ["role"], registry=REGISTRY
)
STREAM_CLIENTS = Gauge(
    "podium_stream_clients",
    "Open live board streams (SSE), by board",
    ["board"],
    registry=REGISTRY,
    multiprocess_mode="livesum",
)

READ_LIMITER = Gauge(
    "podium_read_limiter",
    "The read rate limiter in force: 1 on its kind (off, process: each API process its own "
    "buckets; redis: one bucket per client for the fleet)",
    ["kind"],
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
READ_LIMITER_FAILOPEN = Counter(
    "podium_read_limiter_failopen",
    "Reads served unlimited because the shared limiter's Redis could not be reached",
    registry=REGISTRY,
)
READS_SHED = Counter(
    "podium_reads_shed",
    "Reads refused with 503 because this process was saturated and results come first, by "
    "class: far (pages past the top, distributions, look-ups, past windows, history), "
    "friends, page (a top page with no copy to serve stale), rank (a player's own)",
    ["route_class"],
    registry=REGISTRY,
)
PAGES_FROM_LAST_READ = Counter(
    "podium_pages_from_last_read",
    "Pages answered from this process's last read of them (with that read's asOf) because "
    "the rank index could not be read",
    registry=REGISTRY,
)
READS_STALE = Counter(
    "podium_reads_stale",
    "Top pages answered from this process's last copy (stale) while top pages were shed",
    registry=REGISTRY,
)
SHED_LEVEL = Gauge(
    "podium_shed_level",
    "Classes of reads this process sheds now: 0 none, 1 far, 2 + friends, 3 + top pages "
    "without a copy, 4 + own ranks",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
LOOP_LAG_SECONDS = Gauge(
    "podium_event_loop_lag_seconds",
    "How late the event loop's timers fire, smoothed: what the load gate sheds reads by",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)


def readable() -> CollectorRegistry:
    """What ``/metrics`` and the ops page read: this process's registry, or in multiprocess
    mode a collector over every process of the group."""
    shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not shared:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, shared)  # type: ignore[no-untyped-call]
    return registry


def exposition() -> bytes:
    return generate_latest(readable())


def serve(host: str, port: int) -> None:
    """``/metrics`` of a worker process, which has no API of its own to serve it from: on a
    thread of prometheus_client's, without a key (bind it where only Prometheus reaches)."""
    start_http_server(port, addr=host, registry=readable())


# The index mending itself (workers/mender.py): a node that changed under a shard, and what
# the log's last seconds brought back.
INDEX_FAILOVERS = Counter(
    "podium_index_failovers",
    "Times this process found the Redis node behind an index shard changed (a replica that "
    "took over, a restart) or emptied (its generation marker gone), by shard",
    ["shard"],
    registry=REGISTRY,
)
INDEX_LAYOUT_SWITCHES = Counter(
    "podium_index_layout_switches",
    "Times this process followed the index's layout record to another shard count "
    "(podium rebuild --all --shards, index/redis/layout.py)",
    registry=REGISTRY,
)
INDEX_SHARDS = Gauge(
    "podium_index_shards",
    "The shard count of the split index's live layout, as this process follows it",
    registry=REGISTRY,
)
REPLAYED_CHANGES = Counter(
    "podium_replayed_changes",
    "Changes applied once more from the log's last seconds after an index failover or rebuild",
    registry=REGISTRY,
)

INGEST_RECORDS = Counter(
    "podium_ingest_records",
    "Records of finished matches read from an [[ingest]] topic and done with: recorded "
    "(a record seen again counts as recorded, and changes nothing) or rejected (sent to the "
    "dead-letter topic with its problem)",
    ["topic", "outcome"],
    registry=REGISTRY,
)
INGEST_REJECTED = Counter(
    "podium_ingest_rejected",
    "Records of an [[ingest]] topic sent to its dead-letter topic, by the HTTP status the "
    "same body would have been answered with (422, 403, 409, 429, 401)",
    ["topic", "status"],
    registry=REGISTRY,
)
INGEST_LAG = Gauge(
    "podium_ingest_lag",
    "Records of an [[ingest]] topic's partition not yet committed by its group (the end "
    "offset minus the committed one), as seen by the process that reads the partition",
    ["topic", "group", "partition"],
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
