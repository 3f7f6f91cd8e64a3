"""Settings: one TOML file plus ``PODIUM_<SECTION>_<KEY>`` environment overrides.

pydantic models read both, once, at start: the environment is laid over the file's document
setting by setting, then the sections (frozen pydantic dataclasses) check every value, and the
file's modes and boards become the domain's ``Mode`` and ``BoardSpec``. A bad value is a
``ConfigError`` that names the field and what it expects, in the file's words rather than
Python's (``store.url: expected a string, got 5``). ``schema()`` is the JSON Schema of the file,
for editors. Nothing here creates a connection or a client: that is ``bootstrap.py``'s job.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from annotated_types import Ge, Gt, Le, MaxLen, MinLen
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass as table
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema

from podium.config.kafka import KafkaSettings
from podium.config.topology import address_problem, is_sentinel_url, sentinel_address
from podium.config.webhooks import WebhookTable, check_unique
from podium.config.webhooks import tables as webhook_tables
from podium.domain import schedule
from podium.domain.boards import Aggregate, Below, BoardSpec, Order, Ties, can_fall
from podium.domain.cohorts import MAX_COHORT, MAX_TIERS, League, LeagueError
from podium.domain.models import Mode
from podium.domain.validation import capacity
from podium.domain.windows import WindowKind, WindowRule, to_epoch, to_rfc3339
from podium.errors import ConfigError
from podium.util.redact import redact_url

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
DEFAULT_SEASON_START = "2026-01-05T00:00:00Z"  # a Monday, so seasons line up with ISO weeks
MAX_DURATION_S = 366 * 86_400  # a scheduled window: a year at most (its time fits 25 bits)

# --- how values are checked, and what is said of a bad one ---------------------------------

# A value of the right kind that breaks one of these (a bound, a length, a pattern) is told
# the field's rule; any other failure, the kind of value the field expects.
_RULES = {
    "greater_than_equal",
    "less_than_equal",
    "string_too_short",
    "string_pattern_mismatch",
    "too_short",
}

# The kinds of value, in the file's words rather than Python's (a TOML file has no "int").
_WHOLE = "expected a whole number"
_NUMBER = "expected a number"
_STRING = "expected a string"
_STRINGS = "expected a list of strings"
_FLAG = "expected true or false"


def _shown(value: Any) -> Any:
    """``value`` as a message may repeat it: any URL in it (a mistyped store URL, a list of
    them) without its password or secret query values (``redact.py``)."""
    if isinstance(value, str):
        return redact_url(value) if "://" in value else value
    if isinstance(value, list | tuple):
        return type(value)(_shown(v) for v in value)
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()}
    return value


def _says(expected: str, rule: str | None = None) -> WrapValidator:
    """Whatever pydantic finds wrong with a value, say ``<expected>, got <value>`` (or, for a
    value of the right kind out of bounds, ``<rule>, got <value>``): the messages stay ours,
    whatever pydantic's own wording."""

    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as e:
            only_rules = rule and all(err["type"] in _RULES for err in e.errors())
            said = rule if only_rules else expected
            raise ValueError(f"{said}, got {_shown(value)!r}") from None

    return WrapValidator(check)


def _one_of(kind: type[StrEnum]) -> WrapValidator:
    return _says(f"expected {' | '.join(kind)}")


# Environment values arrive as strings: numbers are parsed, lists split at commas. Numbers
# are strict otherwise, since TOML's true is not a number.
_int = BeforeValidator(lambda v: int(v) if isinstance(v, str) else v)
_float = BeforeValidator(lambda v: float(v) if isinstance(v, str) else v)
_csv = BeforeValidator(
    lambda v: [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v
)

Count = Annotated[int, Strict(), Ge(0), _int, _says(_WHOLE, "expected 0 or more")]
Amount = Annotated[float, Strict(), Ge(0), _float, _says(_NUMBER, "expected 0 or more")]
Text = Annotated[
    str, StringConstraints(strict=True, min_length=1), _says(_STRING, "must not be empty")
]
Texts = Annotated[tuple[StrictStr, ...], _csv, _says(_STRINGS)]
Flag = Annotated[bool, _says(_FLAG)]  # as text (the environment) also 1/0, yes/no, on/off
AtLeastOne = Annotated[int, Strict(), Ge(1), _int, _says(_WHOLE, "must be at least 1")]
Port = Annotated[int, Strict(), Ge(1), Le(65535), _int, _says(_WHOLE, "expected 1 to 65535")]


def _networks(v: tuple[str, ...]) -> tuple[str, ...]:
    for n in v:
        ipaddress.ip_network(n, strict=False)  # ValueError: said by _says below
    return v


Networks = Annotated[
    tuple[StrictStr, ...],
    _csv,
    AfterValidator(_networks),
    _says("expected a list of addresses or networks, e.g. 10.0.0.0/8"),
]


def _servers(url: str) -> str:
    """A URL's hosts and ports read now (topology.py), as its adapter will read them: a
    malformed one stops the start naming the field and the bad part, not a driver's
    traceback at the first connection."""
    if problem := address_problem(url):
        raise ValueError(f"{problem}, in {redact_url(url)}")
    return url


StoreUrl = Annotated[
    str,
    StringConstraints(strict=True, pattern=r"^(sqlite:///|postgres(ql)?://)"),
    _says(_STRING, "expected sqlite:///PATH or postgresql://..."),
    AfterValidator(_servers),
]
# Each database of a split store; its checks apart from the list's, so that a bad one is
# named by its place (store.shards[1]).
ShardUrl = Annotated[
    str,
    StringConstraints(strict=True, pattern=r"^postgres(ql)?://"),
    _says(_STRING, "expected postgresql://..."),
    AfterValidator(_servers),
]


def _a_list(value: Any) -> Any:
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected a list of postgresql:// URLs, got {_shown(value)!r}")
    return value


ShardUrls = Annotated[tuple[ShardUrl, ...], BeforeValidator(_a_list), _csv]  # _csv first


def _sentinel_url(url: str) -> str:
    """A ``redis+sentinel://`` URL is read whole now (topology.py), so that a bad one stops
    the start naming the field, rather than the first connection failing later."""
    if is_sentinel_url(url):
        sentinel_address(url)  # its ValueError says what is wrong, and not the password
    return url


IndexUrl = Annotated[
    str,
    StringConstraints(
        # rediss: over TLS, one Redis or a cluster (index/cluster.py reads both schemes)
        strict=True,
        pattern=r"^(memory://|rediss?(\+cluster)?://|redis\+sentinel://)",
    ),
    _says(
        _STRING,
        "expected memory://, redis[s]://..., redis[s]+cluster://... or redis+sentinel://...",
    ),
    AfterValidator(_sentinel_url),
    AfterValidator(_servers),
]
LogUrl = Annotated[
    str,
    StringConstraints(strict=True, pattern=r"^(outbox://|nats://|kafka://)"),
    _says(_STRING, "expected outbox://, nats://... or kafka://..."),
    AfterValidator(_servers),
]

# The file's modes and boards take numbers from TOML only: no strings.
Integer = Annotated[int, Strict(), _says(_WHOLE)]
Name = Annotated[
    str,
    StringConstraints(strict=True, pattern=NAME_RE.pattern),
    _says(_STRING, f"must match {NAME_RE.pattern}"),
]

_TABLE = ConfigDict(extra="forbid", use_attribute_docstrings=True)

# --- the sections ---------------------------------------------------------------------------


@table(frozen=True, config=_TABLE)
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
        Literal["auto", "process", "redis"], _says("expected auto | process | redis")
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
    max_clock_skew_s: Count = 60
    """How far in the future endedAt may be."""
    key_cache_s: Amount = 10.0
    """How long a verified credential is trusted without a lookup: a revoked key is refused
    by every API process within this long (at once by the one that revoked it)."""
    max_pending_matches: AtLeastOne = 64
    """Matches being recorded at once by one process; one more gets 503 with Retry-After, so
    that overload shows as a prompt "back off" rather than every answer taking seconds."""
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
    api: Annotated[Literal["all", "read", "write"], _says("expected all | read | write")] = "all"
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
        float, Strict(), Gt(0), _float, _says(_NUMBER, "expected more than 0")
    ] = 5.0
    """The event loop's smoothed lag at which the first class of reads is shed; the next
    classes at 2, 3 and 4 times it. A result waits about this long at each of its handful of
    store round trips; one late all the same is what ``shed_accept_ms`` catches."""
    shed_accept_ms: Annotated[
        float, Strict(), Gt(0), _float, _says(_NUMBER, "expected more than 0")
    ] = 30.0
    """A match this process has been recording this long sheds every read (the top page
    still answered from its last copy) until no match in flight is that old, and for a
    second after: a result already late says reads must wait, whatever the loop's lag.
    Beside 64 readers past capacity, 30 ms kept accept p99 at 39-46 ms, 50 ms at 80-123
    (BENCHMARKS.md, "Four misses of issue 23")."""


@table(frozen=True, config=_TABLE)
class StoreSettings:
    url: StoreUrl = "sqlite:///podium.db"
    shards: ShardUrls = ()
    """The Postgres databases that hold players, split by player (README, "Store split by
    player"); ``url`` is then the home database, which holds the keys, the bucket map and the
    freezes. Empty: one database, ``url``, holds everything."""
    pool_size: Count = 10
    """Postgres connections for transactions and writes, per process."""
    read_pool_size: Count = 10
    """And for reads, apart, so that writes never hold them up."""
    keep_results_days: Count = 90
    """Results stay in the store this many days (by ``endedAt``), then the pruner moves
    them to a gzip CSV per day under ``[archive] dir``; older ones are refused (422). Tallies,
    final standings and match claims stay. 0: keep every result, refuse none."""
    keep_events_days: Count = 30
    """Reward and moderation events (webhooks) stay this many days, then the pruner deletes
    those done with: every delivery delivered or failed (and, with NATS as the log, on the
    stream). 0: keep every event."""


@table(frozen=True, config=_TABLE)
class IndexSettings:
    url: IndexUrl = "memory://"
    shards: AtLeastOne = 1
    prefix: Annotated[
        str,
        StringConstraints(strict=True, pattern=r"^[A-Za-z0-9_.-]{1,32}$"),
        _says(_STRING, "expected 1 to 32 of letters, digits, _ . -"),
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
    watch_s: Annotated[float, Strict(), Gt(0), _float, _says(_NUMBER, "expected more than 0")] = 2.0
    """How often each process that writes boards reads the index's generation markers: the
    longest a lost index or a failover goes unseen; and how often every process reads the
    layout record of a split index (the live shard count, ``podium rebuild --all --shards``)."""


@table(frozen=True, config=_TABLE)
class LogSettings:
    url: LogUrl = "outbox://"
    stream: Annotated[
        str,
        StringConstraints(strict=True, pattern=r"^[A-Za-z0-9_-]{1,32}$"),
        _says(_STRING, "expected 1 to 32 of letters, digits, _ -"),
    ] = "podium"
    """The JetStream stream's name (and its subjects' first token), so that several
    deployments can share one NATS. The relays' leases are kept beside it, in the
    key-value bucket ``<stream>-relays``."""
    partitions: AtLeastOne = 16
    """How many parts the JetStream log is split into by player (subjects
    ``<stream>.changes.<n>``, one durable consumer each), so that updaters share the work and
    one player's changes stay in order. Fixed for the life of a stream: a stream made with
    another count is refused at start."""
    replicas: Annotated[int, Strict(), Ge(0), Le(5), _int, _says(_WHOLE, "expected 0 to 5")] = 0
    """Copies of the stream kept by a NATS cluster; 0: min(3, the cluster's size)."""
    retention_s: AtLeastOne = 86_400
    """How long the stream keeps each change, applied or not: how far back ``podium worker
    --replay-since`` can reach on NATS, and what other subscribers may read again."""
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    """``[log.kafka]``: the topics, group and security of ``url = "kafka://..."``."""


@table(frozen=True, config=_TABLE)
class WorkerSettings:
    batch: Count = 500
    """Changes per updater step."""
    idle_sleep_s: Amount = 0.05
    """The pause after a step that found less than a full batch. Each step costs about six
    round trips (claim, ban check, a write per board window, ack) whatever its size, so this
    sets how many a second a steady trickle of results costs; it adds as much to
    commit-to-board latency, whose target is a second."""
    lease_s: Amount = 10.0
    """How long a claimed outbox row is held before another updater may retry it; on NATS,
    a delivery's lease (the consumers' ack wait) and a relay's lease on a store database."""


@table(frozen=True, config=_TABLE)
class ArchiveSettings:
    dir: Text = "standings"
    """Frozen windows' full standings, one compressed file each."""


@dataclass(frozen=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    log: LogSettings = field(default_factory=LogSettings)
    workers: WorkerSettings = field(default_factory=WorkerSettings)
    archive: ArchiveSettings = field(default_factory=ArchiveSettings)
    modes: tuple[Mode, ...] = (Mode("default", 0, 1_000_000),)
    boards: tuple[BoardSpec, ...] = ()
    webhooks: tuple[WebhookTable, ...] = ()

    def mode(self, name: str) -> Mode | None:
        return next((m for m in self.modes if m.name == name), None)

    def board(self, name: str) -> BoardSpec | None:
        return next((b for b in self.boards if b.name == name), None)

    def versioned(self, board: BoardSpec) -> bool:
        """Whether totals on this board can move against its order (``last`` boards, sums
        fed by a mode with negative points, ascending sums), so that it is written by
        version instead of ``GT``/``LT``."""
        lowest = min((m.min_points for m in self.modes if board.counts(m.name)), default=0)
        return can_fall(board, lowest)


# --- the file's modes and boards, read into the domain's Mode and BoardSpec -----------------

_MODE = Mode("default")  # a mode's defaults are the domain's own
_BOARD = BoardSpec("default", WindowRule(WindowKind.SEASON))  # and a board's


@table(frozen=True, config=_TABLE | {"title": "[[modes]]"})
class _ModeTable:
    """A kind of match game servers send results for."""

    name: Name
    """The mode game servers name in their results."""
    min_points: Integer = _MODE.min_points
    max_points: Integer = _MODE.max_points
    min_duration_s: Integer = _MODE.min_duration_s
    max_duration_s: Integer = _MODE.max_duration_s
    max_results_per_player_per_hour: Annotated[
        Annotated[int, Strict(), Ge(1)] | None, _says(_WHOLE, "must be at least 1")
    ] = None
    """Results one player may have recorded in this mode in an hour; no cap by default."""

    @model_validator(mode="after")
    def _ranges(self) -> Self:
        if self.min_points > self.max_points:
            raise ValueError("min_points is above max_points")
        if not 0 <= self.min_duration_s <= self.max_duration_s:
            raise ValueError("min_duration_s must be between 0 and max_duration_s")
        return self


@table(frozen=True, config=_TABLE | {"title": "[[boards]]"})
class _BoardTable:
    """A leaderboard, cut into windows of time."""

    name: Name
    """The board's name in URLs."""
    window: Annotated[WindowKind, _one_of(WindowKind)] = WindowKind.SEASON
    aggregate: Annotated[Aggregate, _one_of(Aggregate)] = _BOARD.aggregate
    order: Annotated[Order, _one_of(Order)] = _BOARD.order
    ties: Annotated[Ties, _one_of(Ties)] = _BOARD.ties
    exact_top: Annotated[
        int, Strict(), Ge(1), Le(1_000_000), _says(_WHOLE, "expected 1 to 1000000")
    ] = _BOARD.exact_top
    """Pages reach this deep; final standings keep this many."""
    ranks_below_top: Annotated[Below, _one_of(Below)] = _BOARD.ranks_below_top
    """On a board split across index shards, how ranks below the exact top are answered:
    "estimated" (from the aggregator's histogram, labelled ``exact: false`` with the interval
    the true rank lies in) or "exact" (one count per shard, sent at once)."""
    freeze_after_s: Annotated[int, Strict(), Ge(0), _says(_WHOLE, "expected 0 or more")] = (
        _BOARD.freeze_after_s
    )
    """A closed window accepts late results this long, then freezes."""
    modes: Annotated[
        Annotated[tuple[StrictStr, ...], MinLen(1)] | None,
        _says("expected a list of mode names", "must name at least one mode"),
    ] = None
    """The modes that count for this board; default: every mode."""
    season_start: Annotated[
        AwareDatetime,
        Strict(),  # a TOML date-time, or a string read here, as before: not a number
        BeforeValidator(lambda v: datetime.fromisoformat(v) if isinstance(v, str) else v),
        _says("expected an RFC 3339 UTC time"),
    ] = datetime.fromisoformat(DEFAULT_SEASON_START)
    """Season boards: when the first season starts."""
    season_weeks: Annotated[int, Strict(), Ge(1), Le(52), _says(_WHOLE, "expected 1 to 52")] = (
        _BOARD.rule.season_weeks
    )
    """Season boards: how long a season lasts."""
    group_by: Annotated[Literal["country"] | None, _says("expected country")] = None
    """One board per country, from the player's profile."""
    # Checked even when left out (validate_default), so that a schedule board without them
    # is told which is missing, under its own name.
    schedule: Annotated[StrictStr | None, _says(_STRING), Field(validate_default=True)] = None
    """Schedule boards (and only they): when each window starts, a 5-field cron expression
    in UTC ("0 18 * * FRI": Fridays at 18:00)."""
    duration_s: Annotated[
        Annotated[int, Strict(), Ge(1), Le(MAX_DURATION_S)] | None,
        _says(_WHOLE, f"expected 1 to {MAX_DURATION_S}"),
        Field(validate_default=True),
    ] = None
    """Schedule boards (and only they): how long each window lasts, in seconds; no longer
    than the shortest time between two starts of the schedule."""

    cohort_size: Annotated[
        Annotated[int, Strict(), Ge(2), Le(MAX_COHORT)] | None,
        _says(_WHOLE, f"expected 2 to {MAX_COHORT}"),
    ] = None
    """A league board: each window is played besides in cohorts of this many players
    (first come; a player's first result in a window places them in their tier)."""
    tiers: Annotated[
        Annotated[tuple[Name, ...], MinLen(1), MaxLen(MAX_TIERS)] | None,
        _says("expected a list of tier names, lowest first", f"name 1 to {MAX_TIERS} tiers"),
    ] = None
    """A league board's tiers, lowest first (a new player starts in the first)."""
    promote: Annotated[int, Strict(), Ge(0), _says(_WHOLE, "expected 0 or more")] = 0
    """A league board: how many of each cohort's top move a tier up when its window freezes."""
    demote: Annotated[int, Strict(), Ge(0), _says(_WHOLE, "expected 0 or more")] = 0
    """A league board: how many of each cohort's bottom move a tier down."""

    @model_validator(mode="after")
    def _league(self) -> Self:
        if self.cohort_size is None:
            if self.tiers is not None or self.promote or self.demote:
                which = (
                    "tiers" if self.tiers is not None else "promote" if self.promote else "demote"
                )
                raise ValueError(f"{which}: only on a league board (with cohort_size)")
            return self
        if self.tiers is None:
            raise ValueError("tiers: required on a league board (with cohort_size)")
        if self.window is WindowKind.ALL:
            raise ValueError("cohort_size: not on an all-time board (cohorts live a window)")
        if self.group_by is not None:
            raise ValueError("cohort_size: not on a board split by group_by")
        try:
            League(self.cohort_size, self.tiers, self.promote, self.demote)
        except LeagueError as e:
            raise ValueError(str(e)) from None
        if self.exact_top < self.cohort_size:
            raise ValueError(
                f"exact_top: at least cohort_size ({self.cohort_size}), which a cohort's "
                "final standings keep whole"
            )
        return self

    @field_validator("schedule")
    @classmethod
    def _cron(cls, expr: str | None, info: ValidationInfo) -> str | None:
        scheduled = info.data.get("window") is WindowKind.SCHEDULE
        if expr is None:
            if scheduled:
                raise ValueError('required on a board with window = "schedule"')
            return None
        if "window" in info.data and not scheduled:
            raise ValueError('only on a board with window = "schedule"')
        try:
            return schedule.check(expr)
        except schedule.ScheduleError as e:
            raise ValueError(str(e)) from None

    @field_validator("duration_s")
    @classmethod
    def _fits_schedule(cls, duration: int | None, info: ValidationInfo) -> int | None:
        scheduled = info.data.get("window") is WindowKind.SCHEDULE
        if duration is None:
            if scheduled:
                raise ValueError('required on a board with window = "schedule"')
            return None
        if "window" in info.data and not scheduled:
            raise ValueError('only on a board with window = "schedule"')
        expr = info.data.get("schedule")
        if expr is None:
            return duration  # the schedule's own error says what is wrong
        # Windows that overlap would count one result twice in one board.
        gap, first = schedule.shortest_gap(expr)
        if duration > gap:
            raise ValueError(
                f"{duration} s is longer than the {gap} s between the starts at "
                f"{to_rfc3339(first)} and {to_rfc3339(first + gap)} of {expr!r}: "
                f"windows would overlap"
            )
        return duration

    @field_validator("group_by")
    @classmethod
    def _not_all_time(cls, group_by: str | None, info: ValidationInfo) -> str | None:
        if group_by is not None and info.data.get("window") is WindowKind.ALL:
            raise ValueError("not on an all-time board")
        return group_by

    def spec(self) -> BoardSpec:
        start = to_epoch(self.season_start) if self.window is WindowKind.SEASON else None
        return BoardSpec(
            name=self.name,
            rule=WindowRule(self.window, start, self.season_weeks, self.schedule, self.duration_s),
            aggregate=self.aggregate,
            order=self.order,
            ties=self.ties,
            exact_top=self.exact_top,
            ranks_below_top=self.ranks_below_top,
            freeze_after_s=self.freeze_after_s,
            modes=self.modes,
            group_by=self.group_by,
            league=None
            if self.cohort_size is None or self.tiers is None
            else League(self.cohort_size, self.tiers, self.promote, self.demote),
        )


def _default_boards() -> tuple[_BoardTable, ...]:
    kinds = (WindowKind.SEASON, WindowKind.WEEK, WindowKind.DAY)
    return tuple(_BoardTable(kind.value, kind) for kind in kinds)


class _File(BaseModel):
    """podium's settings file (podium.toml)."""

    model_config = ConfigDict(
        title="podium.toml",
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        validate_default=True,  # the defaults pass the checks a file's values do
    )

    # Defaults by factory: the schema then leaves tables' defaults to their own settings.
    server: ServerSettings = Field(default_factory=ServerSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    """The record."""
    index: IndexSettings = Field(default_factory=IndexSettings)
    """The copy that answers ranks."""
    log: LogSettings = Field(default_factory=LogSettings)
    """Between the store's outbox and the board updaters."""
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    archive: ArchiveSettings = Field(default_factory=ArchiveSettings)
    modes: tuple[_ModeTable, ...] = Field(default_factory=lambda: (_ModeTable("default"),))
    """A file's modes replace the default one, named "default"."""
    boards: Annotated[
        tuple[_BoardTable, ...], BeforeValidator(lambda v: v or _default_boards())
    ] = Field(default_factory=_default_boards)
    """Default (and with none given): summed points on boards named season, week and day."""
    webhooks: Annotated[tuple[WebhookTable, ...], BeforeValidator(webhook_tables)] = ()
    """Endpoints that receive reward and moderation events (none by default)."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.modes:
            raise ValueError("modes: at least one mode is needed")
        for where, tables in (("modes", self.modes), ("boards", self.boards)):
            names = [t.name for t in tables]
            if twice := next((n for i, n in enumerate(names) if n in names[:i]), None):
                raise ValueError(f"{where}: {twice!r} is defined twice")
        check_unique(self.webhooks)
        modes = {m.name for m in self.modes}
        for i, board in enumerate(self.boards):
            for m in board.modes or ():
                if m not in modes:
                    raise ValueError(f"boards[{i}].modes: unknown mode {m!r}")
            # One match of every mode the board counts must fit its score: otherwise every
            # such result would be refused, and the mode is a mistake to say at start.
            codec = board.spec().codec
            limit = codec.points_limit
            for mode in self.modes:
                if (board.modes is None or mode.name in board.modes) and not (
                    -limit < mode.min_points and mode.max_points < limit
                ):
                    raise ValueError(
                        f"boards[{i}] ({board.name}): mode {mode.name!r} allows "
                        f"{mode.min_points}..{mode.max_points} points a match, past what the "
                        f"board holds ({capacity(codec, 'points')})"
                    )
        return self

    def settings(self) -> Settings:
        return Settings(
            server=self.server,
            store=self.store,
            index=self.index,
            log=self.log,
            workers=self.workers,
            archive=self.archive,
            modes=tuple(Mode(**dataclasses.asdict(m)) for m in self.modes),
            boards=tuple(b.spec() for b in self.boards),
            webhooks=self.webhooks,
        )


_SECTIONS = {
    "server": ServerSettings,
    "store": StoreSettings,
    "index": IndexSettings,
    "log": LogSettings,
    "workers": WorkerSettings,
    "archive": ArchiveSettings,
}
_TABLES: dict[str, type[Any]] = {
    **_SECTIONS,
    "modes": _ModeTable,
    "boards": _BoardTable,
    "webhooks": WebhookTable,
}
# ``podium_server_read_rate_per_s``: ("server", "read_rate_per_s"), for every setting there is.
_ENV_NAMES = {
    f"podium_{name}_{f.name}": (name, f.name)
    for name, cls in _SECTIONS.items()
    for f in dataclasses.fields(cls)
}


def _environment(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The settings ``env`` overrides, as the file would hold them but every value a string:
    ``PODIUM_SERVER_PORT=9000`` is ``{"server": {"port": "9000"}}``, the sections' validators
    then read the number (or the flag, or the list: ``PODIUM_STORE_SHARDS=a,b``). Names are
    read in any case, and only those of the settings there are: the rest of the environment
    (``PODIUM_CONFIG``, a stray ``PODIUM_SERVER``) is not ours to refuse."""
    out: dict[str, dict[str, str]] = {}
    for name, value in env.items():
        if setting := _ENV_NAMES.get(name.lower()):
            section, key = setting
            out.setdefault(section, {})[key] = value
    return out


def _overlay(raw: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The file's document with the environment on top, setting by setting: a section the
    environment touches keeps the file's other settings."""
    merged = dict(raw)
    for section, values in _environment(env).items():
        given = raw.get(section)
        merged[section] = {**given, **values} if isinstance(given, Mapping) else values
    return merged


# --- reading ----------------------------------------------------------------------------------


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``path`` (or ``PODIUM_CONFIG``), then the environment on top."""
    env = os.environ if env is None else env
    path = path or env.get("PODIUM_CONFIG") or None
    raw: dict[str, Any] = {}
    # A start with a mistyped path must stop and say so, not run on the defaults.
    if path:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} not found") from None
        except OSError as e:
            raise ConfigError(f"config file {path}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path}: {e}") from None
    return parse(raw, env)


def parse(raw: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Settings:
    """Settings from a TOML document already read and the environment ``env`` (none by
    default)."""
    try:
        return _File.model_validate(_overlay(raw, env or {})).settings()
    except ValidationError as e:
        raise ConfigError("\n".join(_describe(err) for err in e.errors())) from None


def _describe(error: ErrorDetails) -> str:
    """One line naming the field: ``boards[1].window: expected ..., got 'fortnight'``."""
    loc = error["loc"]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    kind = error["type"]
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        if len(loc) == 1:
            return f"{where}: unknown section (known: {', '.join(sorted(_File.model_fields))})"
        known = [f.name for f in dataclasses.fields(_TABLES[str(loc[0])])]
        return f"{where}: unknown setting (known: {', '.join(known)})"
    shown = _shown(error["input"])
    if kind in ("dataclass_type", "model_type"):
        return f"{where}: expected a table, got {shown!r}"
    if kind == "tuple_type":
        return f"{where}: expected an array of tables, got {shown!r}"
    if kind in ("missing", "missing_argument"):
        return f"{where}: required"
    if kind == "value_error":
        message = str(error.get("ctx", {})["error"])
        return f"{where}: {message}" if where else message
    return f"{where}: {error['msg']}, got {shown!r}"


# --- the JSON Schema of the file --------------------------------------------------------------


class _TomlSchema(GenerateJsonSchema):
    """TOML has no null: a setting that may be left out is not also ``null``."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        out = super().default_schema(schema)
        if out.get("default", ...) is None:
            del out["default"]
        return out


def schema() -> dict[str, Any]:
    """The JSON Schema of ``podium.toml``, from the models that read it: ``podium config
    schema`` prints it, and ``podium.schema.json`` is its output."""
    return {
        "$schema": GenerateJsonSchema.schema_dialect,
        **_File.model_json_schema(schema_generator=_TomlSchema),
    }
