"""The capacity plan: from a game's players and habits, the load at peak and how many of
each part a fleet needs, with the limit that sets each count. Pure arithmetic; the command
(``podium plan``, cli/plan.py) reads the inputs and prints.

The units. A *result* is one player's result in one match (a match of two players is two):
25 million daily players playing 10 matches each is 250 million results a day, 2,894 a
second on average. Each result moves the player's total in ``windows_per_result`` board
windows (season, week and day: 3 index writes). Each result is followed by
``reads_per_match`` reads of that player (the top page, their rank, their friends), each one
index call (pages are held a second per API process, so a page costs the index next to
nothing; counting them as calls is the conservative side). The peak is ``peak`` times the
day's average, and every tier is sized for the peak.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

SECONDS_A_DAY = 86_400


@dataclass(frozen=True)
class Load:
    daily_players: int = 25_000_000
    matches_per_player: float = 10
    reads_per_match: float = 3.5
    peak: float = 10
    windows_per_result: int = 3
    players_per_board: int | None = None  # None: every daily player is on every board
    keep_days: float = 90  # how long results stay in the store (``store.keep_results_days``)

    def members(self) -> int:
        return self.daily_players if self.players_per_board is None else self.players_per_board


@dataclass(frozen=True)
class Capacities:
    """What one node takes, at the utilisation you are willing to run it at. The defaults
    and where each comes from are in ``SOURCES``; a ``--measured`` file replaces any."""

    redis_writes_per_shard: float = 80_000
    redis_reads_per_shard: float = 10_000
    redis_gb_per_shard: float = 8
    bytes_per_member: float = 240
    postgres_results_per_database: float = 5_000
    postgres_gb_per_database: float = 2_000
    bytes_per_result_stored: float = 380
    api_results_per_process: float = 600
    api_reads_per_process: float = 1_400


DEFAULTS = Capacities()
# Where each default comes from. "Measured" figures are BENCHMARKS.md's, taken on a shared
# 2-vCPU virtual machine: a dedicated node does at least as well, so they err low.
SOURCES: dict[str, str] = {
    "redis_writes_per_shard": "measured: podium's versioned write script, 88,092 updates/s "
    "(GT script 155,463) in batches of 500 (BENCHMARKS.md, versioned writes); rounded down",
    "redis_reads_per_shard": "measured: a rank with neighbors costs Redis about 85 us of CPU "
    "(BENCHMARKS.md, rank reads: around.lua), about 11,700 a core; rounded down",
    "redis_gb_per_shard": "assumed: a shard small enough that its snapshot fork and a "
    "replica's full resync stay short",
    "bytes_per_member": "the seed's sizing (18 GB for 3 boards of 25 million); a settled "
    "sorted set alone measured 110-115 B a member (BENCHMARKS.md, Redis memory per member), "
    "the rest is room for the profile copy, entry metadata and fragmentation",
    "postgres_results_per_database": "derived: 0.58 cores of Postgres for 500 results/s "
    "(BENCHMARKS.md, accepting results), about 860 a core; 8 cores at 70%",
    "postgres_gb_per_database": "assumed: a database whose backup and replica rebuild take "
    "hours, not days",
    "bytes_per_result_stored": "measured: 374-380 B a result in Postgres with its indexes "
    "and its share of the match claims (BENCHMARKS.md, the store's size)",
    "api_results_per_process": "measured: 0.59-0.62 cores of podium for 500 results/s "
    "(BENCHMARKS.md, accepting results), about 830 a core; 70% of it",
    "api_reads_per_process": "measured: 1,796-2,029 rank reads/s from one process at a core "
    "(BENCHMARKS.md, reading the board); 70% of it",
}
MEASURED_FORMAT = 1  # the "format" a --measured file names


class CapacityError(ValueError):
    """A capacities file or value that cannot be used; the message says which and why,
    and starts with ``field``'s name where one value of the load is at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def capacities(given: Mapping[str, Any], base: Capacities = DEFAULTS) -> Capacities:
    """``base`` with the values of ``given`` (a name of ``Capacities`` to a positive
    number) in place of its own; any other name or value is refused, naming it."""
    known = {f.name for f in fields(Capacities)}
    changes: dict[str, float] = {}
    for name, value in given.items():
        if name not in known:
            raise CapacityError(f"unknown capacity {name!r}; known: {', '.join(sorted(known))}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise CapacityError(f"{name}: expected a number above 0, got {value!r}")
        if not math.isfinite(value):
            raise CapacityError(f"{name}: expected a finite number, got {value!r}")
        changes[name] = float(value)
    return replace(base, **changes)


def measured(document: Any, base: Capacities = DEFAULTS) -> Capacities:
    """The capacities of a ``--measured`` file's JSON: ``{"format": 1, "capacities":
    {name: number, ...}, "source": "..."}``; names left out keep ``base``'s value."""
    if not isinstance(document, dict):
        raise CapacityError("expected a JSON object with format and capacities")
    if document.get("format") != MEASURED_FORMAT:
        raise CapacityError(f"format: expected {MEASURED_FORMAT}, got {document.get('format')!r}")
    extra = set(document) - {"format", "capacities", "source"}
    if extra:
        raise CapacityError(f"unknown key {sorted(extra)[0]!r}; known: format, capacities, source")
    given = document.get("capacities")
    if not isinstance(given, dict):
        raise CapacityError("capacities: expected an object of name to number")
    return capacities(given, base)


@dataclass(frozen=True)
class Tier:
    """How many nodes of one kind. ``needs``: each limit of a node (its CPU, its memory,
    ...) with the nodes each demand on it alone would fill, fractional; demands on one
    limit add up (a core serves both writes and reads). The fullest limit sets the count:
    ``forced_by`` names it, and the demand that weighs most on it."""

    nodes: int
    needs: Mapping[str, Mapping[str, float]]

    def need(self, limit: str) -> float:
        return sum(self.needs[limit].values())

    @property
    def forced_by(self) -> str:
        limit = max(self.needs, key=self.need)
        shares = self.needs[limit]
        if len(shares) == 1:
            return limit
        return f"{limit} ({max(shares, key=lambda k: shares[k])})"

    def as_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "forced_by": self.forced_by,
            "needs": {limit: dict(shares) for limit, shares in self.needs.items()},
        }


def _tier(name: str, needs: dict[str, dict[str, float]]) -> Tier:
    fullest = max(sum(shares.values()) for shares in needs.values())
    if not fullest <= MAX_NODES:  # a capacity near 0 (or an overflow): no count to give
        raise CapacityError(
            f"{name}: the plan would need more than {MAX_NODES:,.0f} nodes ({fullest:.3g}); "
            "check the capacities"
        )
    # A hair of tolerance, so that 2.0000000001 of float arithmetic is two nodes, not three.
    return Tier(max(1, math.ceil(fullest - 1e-9)), needs)


@dataclass(frozen=True)
class Plan:
    load: Load
    capacities: Capacities
    results_per_s: float  # the day's average
    results_per_s_peak: float
    board_writes_per_s_peak: float
    reads_per_s_peak: float
    board_members: int  # over every board window held
    board_bytes: float
    stored_results: float
    store_bytes: float
    redis: Tier
    postgres: Tier
    api: Tier

    def as_json(self) -> dict[str, Any]:
        return {
            "load": asdict(self.load),
            "capacities": asdict(self.capacities),
            "results_per_s": {"average": self.results_per_s, "peak": self.results_per_s_peak},
            "board_writes_per_s": {
                "average": self.board_writes_per_s_peak / self.load.peak,
                "peak": self.board_writes_per_s_peak,
            },
            "reads_per_s": {
                "average": self.reads_per_s_peak / self.load.peak,
                "peak": self.reads_per_s_peak,
            },
            "board_members": self.board_members,
            "board_bytes": self.board_bytes,
            "stored_results": self.stored_results,
            "store_bytes": self.store_bytes,
            "redis_shards": self.redis.as_json(),
            "postgres_databases": self.postgres.as_json(),
            "api_processes": self.api.as_json(),
        }


# What a load may say: each value finite and within reach of a real game (ten billion
# players, a peak ten thousand times the day's average, a century of results). Past these,
# the arithmetic only overflows or rounds to nonsense, so a value there is a typo.
BOUNDS: dict[str, tuple[float, float]] = {
    "daily_players": (0, 1e10),
    "matches_per_player": (0, 1e4),
    "reads_per_match": (0, 1e4),
    "peak": (0, 1e4),
    "windows_per_result": (0, 1e3),
    "players_per_board": (0, 1e10),
    "keep_days": (0, 36_500),
}
_AT_LEAST_ZERO = frozenset({"reads_per_match", "keep_days"})  # the others: above 0
MAX_NODES = 1e9  # a tier past this is a capacity that was mistyped, not a plan


def check(load: Load) -> None:
    """CapacityError naming the first value of ``load`` that is not a finite number within
    its ``BOUNDS`` (above the low one, or at it for those that may be 0)."""
    for name, (low, high) in BOUNDS.items():
        value = getattr(load, name)
        if value is None:
            continue  # players_per_board left out
        inclusive = name in _AT_LEAST_ZERO
        above = value >= low if inclusive else value > low
        if not (math.isfinite(value) and above and value <= high):
            lower = f"from {low:g} to" if inclusive else f"above {low:g} and at most"
            raise CapacityError(
                f"{name}: expected a number {lower} {high:,.0f}, got {value}", field=name
            )


def plan(load: Load, caps: Capacities = DEFAULTS) -> Plan:
    check(load)
    results_a_day = load.daily_players * load.matches_per_player
    avg = results_a_day / SECONDS_A_DAY
    peak = avg * load.peak
    writes = peak * load.windows_per_result
    reads = peak * load.reads_per_match
    members = load.members() * load.windows_per_result
    board_bytes = members * caps.bytes_per_member
    stored = results_a_day * load.keep_days
    store_bytes = stored * caps.bytes_per_result_stored
    gb = 1e9
    redis = _tier(
        "Redis shards",
        {
            "cpu": {
                "writes": writes / caps.redis_writes_per_shard,
                "reads": reads / caps.redis_reads_per_shard,
            },
            "memory": {"boards": board_bytes / gb / caps.redis_gb_per_shard},
        },
    )
    postgres = _tier(
        "Postgres databases",
        {
            "cpu": {"results": peak / caps.postgres_results_per_database},
            "storage": {"results kept": store_bytes / gb / caps.postgres_gb_per_database},
        },
    )
    api = _tier(
        "API processes",
        {
            "cpu": {
                "results": peak / caps.api_results_per_process,
                "reads": reads / caps.api_reads_per_process,
            }
        },
    )
    return Plan(
        load, caps, avg, peak, writes, reads, members, board_bytes, stored, store_bytes,
        redis, postgres, api,
    )  # fmt: skip
