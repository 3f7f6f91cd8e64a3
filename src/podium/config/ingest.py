"""The ``[[ingest]]`` tables of the settings file: topics of finished matches that the
``ingest`` role (``workers/ingest.py``) records as if each was POSTed to
``/v1/matches/{id}/results`` by one game-server key. ``config/settings.py`` reads them with
the rest of the file; the messages follow its style (``ingest[0].topic: expected ...``).
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BeforeValidator, ConfigDict, model_validator
from pydantic.dataclasses import dataclass as table

from podium.config.kafka import _NAME
from podium.config.values import STRING

DEAD_LETTER_SUFFIX = ".rejected"  # the dead-letter topic's default: the topic's name and this


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{STRING}, got {v!r}")
    return v


def _name(v: Any) -> Any:
    """Kafka's own rule for a topic's name (a group's is held to the same)."""
    if not _NAME.fullmatch(_text(v)):
        raise ValueError(f"expected 1 to 200 of letters, digits, . _ -, got {v!r}")
    return v


def _key(v: Any) -> Any:
    if not _text(v).strip():
        raise ValueError(f"expected a key's name or id (podium keys list), got {v!r}")
    return v.strip()


def _brokers(v: Any) -> Any:
    if not _text(v).startswith("kafka://"):
        raise ValueError(f"expected kafka://host:9092[,host:9092...], got {v!r}")
    if not [h for h in v.removeprefix("kafka://").split(",") if h.strip().rstrip("/")]:
        raise ValueError(f"no broker in {v!r} (kafka://host:9092,...)")
    return v


Name = Annotated[str, BeforeValidator(_name)]


@table(
    frozen=True,
    config=ConfigDict(extra="forbid", use_attribute_docstrings=True, title="[[ingest]]"),
)
class IngestTable:
    """A Kafka topic of finished matches, recorded by the ``ingest`` role: each record's key
    the match id, its value the body of ``POST /v1/matches/{matchId}/results``."""

    topic: Name
    """The topic the game service publishes finished matches to."""
    key: Annotated[str, BeforeValidator(_key)]
    """The game-server key (its name or id, as ``podium keys list`` shows them) whose modes
    this topic's matches are held to, and that owns the matches it records."""
    group: Name = "podium-ingest"
    """The consumer group: its committed offsets are the ingest's progress (lag included,
    as ``kafka-consumer-groups --describe`` shows it)."""
    dead_letter: Annotated[str | None, BeforeValidator(lambda v: v if v is None else _name(v))] = (
        None
    )
    """Where a refused record goes (its key, value and headers as they were, its problem+json
    in the ``podium-problem`` header); default: the topic's name and ``.rejected``."""
    brokers: Annotated[str | None, BeforeValidator(lambda v: v if v is None else _brokers(v))] = (
        None
    )
    """``kafka://host:9092[,host:9092...]``; default: the brokers of ``[log] url`` when it is a
    Kafka log. The client's security settings are ``[log.kafka] client``."""

    @model_validator(mode="after")
    def _apart(self) -> Self:
        if self.dead_letter == self.topic:
            raise ValueError("dead_letter: must not be the topic itself")
        return self

    @property
    def dead_letter_topic(self) -> str:
        return self.dead_letter or f"{self.topic}{DEAD_LETTER_SUFFIX}"


def check(tables: tuple[IngestTable, ...], log_url: str) -> None:
    """Across the tables: each topic read once per group, and a broker to read it from."""
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(tables):
        if (t.topic, t.group) in seen:
            raise ValueError(f"ingest[{i}]: topic {t.topic!r} is read twice by group {t.group!r}")
        seen.add((t.topic, t.group))
        if t.brokers is None and not log_url.startswith("kafka://"):
            raise ValueError(
                f"ingest[{i}].brokers: required (kafka://host:9092) when [log] url is not a "
                "Kafka log"
            )


def brokers(t: IngestTable, log_url: str) -> str:
    """The ``kafka://`` URL the table's topic is read from."""
    return t.brokers or log_url
