"""Settings: one TOML file plus ``PODIUM_<SECTION>_<KEY>`` environment overrides.

pydantic models read both, once, at start: the environment is laid over the file's document
setting by setting, then the sections (frozen pydantic dataclasses) check every value, and the
file's modes and boards become the domain's ``Mode`` and ``BoardSpec``. A bad value is a
``ConfigError`` that names the field and what it expects, in the file's words rather than
Python's (``store.url: expected a string, got 5``). ``schema()`` is the JSON Schema of the file,
for editors. Nothing here creates a connection or a client: that is ``bootstrap.py``'s job.

The sections are declared in ``sections.py``, the types their values are checked by in
``values.py``; the file's modes and boards, ``Settings``, and the reading, here.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from annotated_types import Ge, Le, MaxLen, MinLen
from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass as table
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema

from podium.config.ingest import IngestTable
from podium.config.ingest import check as check_ingest
from podium.config.sections import (
    ArchiveSettings,
    IndexSettings,
    LogSettings,
    ServerSettings,
    StoreSettings,
    WorkerSettings,
)
from podium.config.values import STRING, TABLE, WHOLE, Integer, Name, as_shown, one_of, says
from podium.config.webhooks import WebhookTable, check_unique
from podium.config.webhooks import tables as webhook_tables
from podium.domain import schedule
from podium.domain.boards import Aggregate, Below, BoardSpec, Order, Ties, can_fall
from podium.domain.cohorts import MAX_COHORT, MAX_TIERS, League, LeagueError
from podium.domain.models import Mode
from podium.domain.validation import capacity
from podium.domain.windows import WindowKind, WindowRule, to_epoch, to_rfc3339
from podium.errors import ConfigError

DEFAULT_SEASON_START = "2026-01-05T00:00:00Z"  # a Monday, so seasons line up with ISO weeks
MAX_DURATION_S = 366 * 86_400  # a scheduled window: a year at most (its time fits 25 bits)


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
    ingest: tuple[IngestTable, ...] = ()

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


@table(frozen=True, config=TABLE | {"title": "[[modes]]"})
class _ModeTable:
    """A kind of match game servers send results for."""

    name: Name
    """The mode game servers name in their results."""
    min_points: Integer = _MODE.min_points
    max_points: Integer = _MODE.max_points
    min_duration_s: Integer = _MODE.min_duration_s
    max_duration_s: Integer = _MODE.max_duration_s
    max_results_per_player_per_hour: Annotated[
        Annotated[int, Strict(), Ge(1)] | None, says(WHOLE, "must be at least 1")
    ] = None
    """Results one player may have recorded in this mode in an hour; no cap by default."""

    @model_validator(mode="after")
    def _ranges(self) -> Self:
        if self.min_points > self.max_points:
            raise ValueError("min_points is above max_points")
        if not 0 <= self.min_duration_s <= self.max_duration_s:
            raise ValueError("min_duration_s must be between 0 and max_duration_s")
        return self


@table(frozen=True, config=TABLE | {"title": "[[boards]]"})
class _BoardTable:
    """A leaderboard, cut into windows of time."""

    name: Name
    """The board's name in URLs."""
    window: Annotated[WindowKind, one_of(WindowKind)] = WindowKind.SEASON
    aggregate: Annotated[Aggregate, one_of(Aggregate)] = _BOARD.aggregate
    order: Annotated[Order, one_of(Order)] = _BOARD.order
    ties: Annotated[Ties, one_of(Ties)] = _BOARD.ties
    exact_top: Annotated[
        int, Strict(), Ge(1), Le(1_000_000), says(WHOLE, "expected 1 to 1000000")
    ] = _BOARD.exact_top
    """Pages reach this deep; final standings keep this many."""
    ranks_below_top: Annotated[Below, one_of(Below)] = _BOARD.ranks_below_top
    """On a board split across index shards, how ranks below the exact top are answered:
    "estimated" (from the aggregator's histogram, labelled ``exact: false`` with the interval
    the true rank lies in) or "exact" (one count per shard, sent at once)."""
    freeze_after_s: Annotated[int, Strict(), Ge(0), says(WHOLE, "expected 0 or more")] = (
        _BOARD.freeze_after_s
    )
    """A closed window accepts late results this long, then freezes."""
    modes: Annotated[
        Annotated[tuple[StrictStr, ...], MinLen(1)] | None,
        says("expected a list of mode names", "must name at least one mode"),
    ] = None
    """The modes that count for this board; default: every mode."""
    season_start: Annotated[
        AwareDatetime,
        Strict(),  # a TOML date-time, or a string read here, as before: not a number
        BeforeValidator(lambda v: datetime.fromisoformat(v) if isinstance(v, str) else v),
        says("expected an RFC 3339 UTC time"),
    ] = datetime.fromisoformat(DEFAULT_SEASON_START)
    """Season boards: when the first season starts."""
    season_weeks: Annotated[int, Strict(), Ge(1), Le(52), says(WHOLE, "expected 1 to 52")] = (
        _BOARD.rule.season_weeks
    )
    """Season boards: how long a season lasts."""
    group_by: Annotated[Literal["country"] | None, says("expected country")] = None
    """One board per country, from the player's profile."""
    # Checked even when left out (validate_default), so that a schedule board without them
    # is told which is missing, under its own name.
    schedule: Annotated[StrictStr | None, says(STRING), Field(validate_default=True)] = None
    """Schedule boards (and only they): when each window starts, a 5-field cron expression
    in UTC ("0 18 * * FRI": Fridays at 18:00)."""
    duration_s: Annotated[
        Annotated[int, Strict(), Ge(1), Le(MAX_DURATION_S)] | None,
        says(WHOLE, f"expected 1 to {MAX_DURATION_S}"),
        Field(validate_default=True),
    ] = None
    """Schedule boards (and only they): how long each window lasts, in seconds; no longer
    than the shortest time between two starts of the schedule."""

    cohort_size: Annotated[
        Annotated[int, Strict(), Ge(2), Le(MAX_COHORT)] | None,
        says(WHOLE, f"expected 2 to {MAX_COHORT}"),
    ] = None
    """A league board: each window is played besides in cohorts of this many players
    (first come; a player's first result in a window places them in their tier)."""
    tiers: Annotated[
        Annotated[tuple[Name, ...], MinLen(1), MaxLen(MAX_TIERS)] | None,
        says("expected a list of tier names, lowest first", f"name 1 to {MAX_TIERS} tiers"),
    ] = None
    """A league board's tiers, lowest first (a new player starts in the first)."""
    promote: Annotated[int, Strict(), Ge(0), says(WHOLE, "expected 0 or more")] = 0
    """A league board: how many of each cohort's top move a tier up when its window freezes."""
    demote: Annotated[int, Strict(), Ge(0), says(WHOLE, "expected 0 or more")] = 0
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
    ingest: tuple[IngestTable, ...] = ()
    """Kafka topics of finished matches, recorded by the ``ingest`` role (none by default)."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.modes:
            raise ValueError("modes: at least one mode is needed")
        for where, tables in (("modes", self.modes), ("boards", self.boards)):
            names = [t.name for t in tables]
            if twice := next((n for i, n in enumerate(names) if n in names[:i]), None):
                raise ValueError(f"{where}: {twice!r} is defined twice")
        check_unique(self.webhooks)
        check_ingest(self.ingest, self.log.url)
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
            ingest=self.ingest,
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
    "ingest": IngestTable,
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
    shown = as_shown(error["input"])
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
