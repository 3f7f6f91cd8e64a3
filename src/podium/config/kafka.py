"""``[log.kafka]``: the settings of the Kafka change log (``log.url = "kafka://..."``).

Self-contained: ``settings.py`` holds one field of this type in ``[log]``. The partitions,
the retention and the lease are ``[log] partitions``, ``[log] retention_s`` and
``[workers] lease_s``, as for NATS.
"""

from __future__ import annotations

import re
from typing import Annotated

from annotated_types import Ge, Le
from pydantic import AfterValidator, ConfigDict, Field, Strict, StrictStr
from pydantic.dataclasses import dataclass as table

# Kafka's own rule for a topic's name; a group's name is any string, held to the same here.
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
# What ``client`` may pass through to librdkafka: the security settings, nothing else (the
# rest of a client's settings are podium's to choose: acks, idempotence, commits).
_CLIENT_KEY = re.compile(r"security\.protocol|sasl\.[a-z0-9._]+|ssl\.[a-z0-9._]+")


def _name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(f"expected 1 to 200 of letters, digits, . _ -, got {value!r}")
    return value


def _client(value: dict[str, str]) -> dict[str, str]:
    bad = sorted(k for k in value if not _CLIENT_KEY.fullmatch(k))
    if bad:
        raise ValueError(
            f"only librdkafka's security settings pass through (security.protocol, sasl.*, "
            f"ssl.*), got {', '.join(map(repr, bad))}"
        )
    return value


Name = Annotated[StrictStr, AfterValidator(_name)]


@table(frozen=True, config=ConfigDict(extra="forbid", use_attribute_docstrings=True))
class KafkaSettings:
    topic: Name = "podium-changes"
    """The changes' topic: one message per outbox row, keyed by player id, in the player's
    partition (``[log] partitions`` of them, fixed for the topic's life)."""
    events_topic: Name = "podium-events"
    """Reward and moderation events, keyed by event id (also in the ``podium-event-id``
    header), the webhook body as value."""
    group: Name = "podium-updaters"
    """The updaters' consumer group: its committed offsets are the board's progress, as
    ``kafka-consumer-groups --describe`` shows them (lag included). The relays' leases are
    kept in the group ``<group>.relays``."""
    replication: Annotated[int, Strict(), Ge(0), Le(32)] = 0
    """Copies of each topic made at first use; 0: as many as there are brokers, up to 3
    (``min.insync.replicas`` is then 2 where there are at least 2)."""
    client: Annotated[dict[str, str], AfterValidator(_client)] = Field(default_factory=dict)
    """librdkafka's security settings, passed through to every client as they are:
    ``security.protocol`` (``SSL``, ``SASL_SSL``...), ``sasl.mechanism``,
    ``sasl.username``, ``sasl.password``, ``ssl.ca.location``..."""
