"""Settings: one TOML file plus ``PODIUM_<SECTION>_<KEY>`` environment overrides.

Everything is parsed and validated once, at start, into frozen dataclasses; a bad value is a
``ConfigError`` that names the field (``boards[1].window: ...``). Nothing here creates a
connection or a client: that is ``bootstrap.py``'s job.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from podium.domain.boards import Aggregate, BoardSpec, Order, Ties, can_fall
from podium.domain.models import Mode
from podium.domain.windows import WindowKind, WindowRule, to_epoch
from podium.errors import ConfigError

E = TypeVar("E", WindowKind, Aggregate, Order, Ties)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
DEFAULT_SEASON_START = "2026-01-05T00:00:00Z"  # a Monday, so seasons line up with ISO weeks


API_KINDS = ("all", "read", "write")


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 64 * 1024
    max_results_per_match: int = 100
    read_rate_per_s: float = 50.0  # per client address; 0 turns read rate limiting off
    read_burst: int = 100
    page_cache_s: float = 1.0  # how long one process holds a board page
    max_clock_skew_s: int = 60  # how far in the future endedAt may be
    key_cache_s: float = 10.0  # how long a verified credential is trusted without a lookup
    # Matches being recorded at once by one process; one more gets 503 with Retry-After, so
    # that overload shows as a prompt "back off" rather than every answer taking seconds.
    max_pending_matches: int = 64
    # What this process answers: "all"; "read" (players: boards, ranks, friends, the browser
    # pages and streams) or "write" (game servers and admins: results, profiles, friends
    # lists, bans, freezes, review), each with the health and metrics endpoints. A fleet
    # that runs them apart keeps reads from queueing behind bursts of writes.
    api: str = "all"


@dataclass(frozen=True)
class StoreSettings:
    url: str = "sqlite:///podium.db"
    shards: tuple[str, ...] = ()
    pool_size: int = 10  # Postgres connections for transactions and writes, per process
    read_pool_size: int = 10  # and for reads, apart, so that writes never hold them up


@dataclass(frozen=True)
class IndexSettings:
    url: str = "memory://"
    shards: int = 1
    prefix: str = "podium"


@dataclass(frozen=True)
class LogSettings:
    url: str = "outbox://"


@dataclass(frozen=True)
class WorkerSettings:
    batch: int = 500
    # The pause after a step that found less than a full batch. Each step costs about six
    # round trips (claim, ban check, a write per board window, ack) whatever its size, so
    # this sets how many a second a steady trickle of results costs; it adds as much to
    # commit-to-board latency, whose target is a second.
    idle_sleep_s: float = 0.05
    lease_s: float = (
        10.0  # how long a claimed outbox row is held before another updater may retry it
    )


@dataclass(frozen=True)
class ArchiveSettings:
    dir: str = "standings"


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


_SECTIONS: dict[str, type[Any]] = {
    "server": ServerSettings,
    "store": StoreSettings,
    "index": IndexSettings,
    "log": LogSettings,
    "workers": WorkerSettings,
    "archive": ArchiveSettings,
}


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``path`` (or ``PODIUM_CONFIG``), then the environment on top."""
    env = os.environ if env is None else env
    path = path or env.get("PODIUM_CONFIG") or None
    raw: dict[str, Any] = {}
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
    env = {} if env is None else env
    known = {*_SECTIONS, "modes", "boards"}
    for key in raw:
        if key not in known:
            raise ConfigError(f"{key}: unknown section (known: {', '.join(sorted(known))})")
    sections = {
        name: _section(name, cls, raw.get(name, {}), env) for name, cls in _SECTIONS.items()
    }
    modes = tuple(_mode(i, m) for i, m in enumerate(raw.get("modes", [{"name": "default"}])))
    if not modes:
        raise ConfigError("modes: at least one mode is needed")
    _unique("modes", [m.name for m in modes])
    boards_raw = raw.get("boards") or [
        {"name": "season", "window": "season"},
        {"name": "week", "window": "week"},
        {"name": "day", "window": "day"},
    ]
    boards = tuple(_board(i, b, {m.name for m in modes}) for i, b in enumerate(boards_raw))
    _unique("boards", [b.name for b in boards])
    settings = Settings(modes=modes, boards=boards, **sections)
    _check_urls(settings)
    return settings


def _section(name: str, cls: type[Any], table: Any, env: Mapping[str, str]) -> Any:
    if not isinstance(table, dict):
        raise ConfigError(f"{name}: must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in fields:
            raise ConfigError(f"{name}.{key}: unknown setting (known: {', '.join(fields)})")
        values[key] = value
    for key in fields:
        env_value = env.get(f"PODIUM_{name.upper()}_{key.upper()}")
        if env_value is not None:
            values[key] = env_value
    default = cls()
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = _coerce(f"{name}.{key}", value, getattr(default, key))
    return cls(**out)


def _coerce(where: str, value: Any, default: Any) -> Any:
    """Check ``value`` against the type of the default; env values arrive as strings."""
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                if value.lower() not in {"1", "0", "true", "false", "yes", "no"}:
                    raise ValueError
                return value.lower() in {"1", "true", "yes"}
            if not isinstance(value, bool):
                raise ValueError
            return value
        if isinstance(default, int):
            if isinstance(value, bool | float):
                raise ValueError
            v = int(value)
            if v < 0:
                raise ValueError
            return v
        if isinstance(default, float):
            if isinstance(value, bool):
                raise ValueError
            v2 = float(value)
            if v2 < 0:
                raise ValueError
            return v2
        if isinstance(default, tuple):
            if isinstance(value, str):
                value = [s.strip() for s in value.split(",") if s.strip()]
            if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
                raise ValueError
            return tuple(value)
        if not isinstance(value, str) or not value:
            raise ValueError
        return value
    except (TypeError, ValueError):
        kind = type(default).__name__ if not isinstance(default, tuple) else "list of strings"
        raise ConfigError(f"{where}: expected a non-negative {kind}, got {value!r}") from None


def _mode(i: int, m: Any) -> Mode:
    where = f"modes[{i}]"
    if not isinstance(m, dict):
        raise ConfigError(f"{where}: must be a table")
    name = m.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(f"{where}.name: must match {NAME_RE.pattern}, got {name!r}")
    allowed = {f.name for f in dataclasses.fields(Mode)}
    for key in m:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown setting (known: {', '.join(allowed)})")
    ints: dict[str, int | None] = {}
    for key in ("min_points", "max_points", "min_duration_s", "max_duration_s"):
        if key in m:
            v = m[key]
            if not isinstance(v, int) or isinstance(v, bool):
                raise ConfigError(f"{where}.{key}: expected an integer, got {v!r}")
            ints[key] = v
    cap = m.get("max_results_per_player_per_hour")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise ConfigError(f"{where}.max_results_per_player_per_hour: expected a positive integer")
    mode = Mode(name=name, max_results_per_player_per_hour=cap, **ints)  # type: ignore[arg-type]
    if mode.min_points > mode.max_points:
        raise ConfigError(f"{where}: min_points is above max_points")
    if mode.min_duration_s < 0 or mode.min_duration_s > mode.max_duration_s:
        raise ConfigError(f"{where}: min_duration_s must be between 0 and max_duration_s")
    return mode


_BOARD_KEYS = {
    "name",
    "window",
    "aggregate",
    "order",
    "ties",
    "exact_top",
    "freeze_after_s",
    "modes",
    "season_start",
    "season_weeks",
    "group_by",
}


def _board(i: int, b: Any, mode_names: set[str]) -> BoardSpec:
    where = f"boards[{i}]"
    if not isinstance(b, dict):
        raise ConfigError(f"{where}: must be a table")
    for key in b:
        if key not in _BOARD_KEYS:
            raise ConfigError(
                f"{where}.{key}: unknown setting (known: {', '.join(sorted(_BOARD_KEYS))})"
            )
    name = b.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(f"{where}.name: must match {NAME_RE.pattern}, got {name!r}")
    kind = _enum(f"{where}.window", WindowKind, b.get("window", "season"))
    season_start: int | None = None
    season_weeks = b.get("season_weeks", 13)
    if not _is_int(season_weeks) or not 1 <= season_weeks <= 52:
        raise ConfigError(f"{where}.season_weeks: expected an integer from 1 to 52")
    if kind is WindowKind.SEASON:
        raw_start = b.get("season_start", DEFAULT_SEASON_START)
        try:
            start_dt = (
                raw_start
                if isinstance(raw_start, datetime)
                else datetime.fromisoformat(str(raw_start).replace("Z", "+00:00"))
            )
            season_start = to_epoch(start_dt)
        except ValueError:
            raise ConfigError(
                f"{where}.season_start: expected an RFC 3339 UTC time, got {raw_start!r}"
            ) from None
    modes = b.get("modes")
    if modes is not None:
        if not isinstance(modes, list) or not modes or not all(isinstance(m, str) for m in modes):
            raise ConfigError(f"{where}.modes: expected a non-empty list of mode names")
        for m in modes:
            if m not in mode_names:
                raise ConfigError(f"{where}.modes: unknown mode {m!r}")
    exact_top = b.get("exact_top", 10_000)
    if not _is_int(exact_top) or not 1 <= exact_top <= 1_000_000:
        raise ConfigError(f"{where}.exact_top: expected an integer from 1 to 1000000")
    freeze = b.get("freeze_after_s", 600)
    if not _is_int(freeze) or freeze < 0:
        raise ConfigError(f"{where}.freeze_after_s: expected a non-negative integer")
    group_by = b.get("group_by")
    if group_by is not None and group_by != "country":
        raise ConfigError(f'{where}.group_by: expected "country", got {group_by!r}')
    if group_by is not None and kind is WindowKind.ALL:
        raise ConfigError(f"{where}.group_by: not on an all-time board")
    return BoardSpec(
        name=name,
        rule=WindowRule(kind, season_start, season_weeks),
        aggregate=_enum(f"{where}.aggregate", Aggregate, b.get("aggregate", "sum")),
        order=_enum(f"{where}.order", Order, b.get("order", "desc")),
        ties=_enum(f"{where}.ties", Ties, b.get("ties", "first")),
        exact_top=exact_top,
        freeze_after_s=freeze,
        modes=tuple(modes) if modes is not None else None,
        group_by=group_by,
    )


def _enum(where: str, cls: type[E], value: Any) -> E:
    try:
        return cls(value)
    except ValueError:
        allowed = " | ".join(e.value for e in cls)
        raise ConfigError(f"{where}: expected {allowed}, got {value!r}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)  # TOML true is not a number


def _unique(where: str, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ConfigError(f"{where}: {n!r} is defined twice")
        seen.add(n)


def _check_urls(s: Settings) -> None:
    if not re.match(r"^(sqlite:///|postgres(ql)?://)", s.store.url):
        raise ConfigError(
            f"store.url: expected sqlite:///PATH or postgresql://..., got {s.store.url!r}"
        )
    if not re.match(r"^(memory://|redis(\+cluster)?://|rediss://)", s.index.url):
        raise ConfigError(
            f"index.url: expected memory://, redis://... or redis+cluster://..., "
            f"got {s.index.url!r}"
        )
    if not re.match(r"^(outbox://|nats://)", s.log.url):
        raise ConfigError(f"log.url: expected outbox:// or nats://..., got {s.log.url!r}")
    if not 1 <= s.server.port <= 65535:
        raise ConfigError(f"server.port: expected 1 to 65535, got {s.server.port}")
    if s.index.shards < 1:
        raise ConfigError("index.shards: must be at least 1")
    if s.server.max_pending_matches < 1:
        raise ConfigError("server.max_pending_matches: must be at least 1")
    if s.server.api not in API_KINDS:
        raise ConfigError(f"server.api: expected {' | '.join(API_KINDS)}, got {s.server.api!r}")
    if s.server.api != "all" and s.index.url.startswith("memory://"):
        raise ConfigError(
            "server.api: a process for reads or writes only needs an index it shares with the "
            "others (index.url = redis://...); the in-process index is this process's own"
        )
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", s.index.prefix):
        raise ConfigError("index.prefix: 1 to 32 of letters, digits, _ . -")
