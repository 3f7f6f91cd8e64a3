"""The Kafka log's topics made and checked at start, and the client's timeouts every part of
the log shares (``log.py``, ``relay.py``, ``lease.py``, ``replay.py``)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from podium.errors import ConfigError, LogUnavailable
from podium.log.kafka.errors import REFUSED_CODES, TRANSIENT_CODES, translated

log = logging.getLogger("podium.log")

REQUEST_TIMEOUT_S = 10.0  # a commit, an offset read: longer than a coordinator's election
READ_TIMEOUT_S = 10.0  # reading messages known to be there, below the high watermark
PING_TIMEOUT_S = 1.0  # readiness asks often: a log that takes longer is not answering
START_TIMEOUT_S = 30.0  # the topics made and their partitions led
PUBLISH_TIMEOUT_S = 10.0  # librdkafka's message.timeout.ms: a relay's publish at most
RETRY_S = 5.0  # how long a partition without a known leader is asked again


def ensure_topics(
    admin: AdminClient,
    bootstrap: str,
    wanted: dict[str, int],
    changes: str,
    replication_wanted: int,
    retention_s: float,
    *,
    fixed: bool = True,
) -> None:
    """The topics ``wanted`` (name: partitions) made where missing, then the changes topic
    checked for its partition count (unless not ``fixed``: a topic of matches is read
    whatever its count) and a leader on every partition (``START_TIMEOUT_S``)."""
    with translated(f"connect to {bootstrap}"):
        md = admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    replication = replication_wanted or min(3, max(1, len(md.brokers)))
    missing = [
        NewTopic(
            name,
            count,
            replication,
            config={
                "retention.ms": str(int(retention_s * 1000)),
                # A segment is deleted once its newest message is past retention.ms: rolled
                # this often, no message outlives 2 x retention (an erasure counts on it).
                "segment.ms": str(int(retention_s * 1000)),
                "min.insync.replicas": str(min(2, replication)),
            },
        )
        for name, count in wanted.items()
        if name not in md.topics or md.topics[name].error is not None
    ]
    if missing:
        futures = admin.create_topics(missing, operation_timeout=REQUEST_TIMEOUT_S)
        for name, future in futures.items():
            try:
                future.result(START_TIMEOUT_S)
                log.info(
                    "created topic %s (%d partitions, %d copies)",
                    name,
                    wanted[name],
                    replication,
                )
            except KafkaException as e:
                err = e.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue  # made meanwhile by another process
                if err.code() in TRANSIENT_CODES and err.code() not in REFUSED_CODES:
                    raise LogUnavailable(f"Kafka: create topic {name}: {err.str()}") from e
                raise ConfigError(
                    f"log: Kafka refused to create topic {name!r} ({wanted[name]} "
                    f"partitions, replication {replication}): {err.name()}: {err.str()}; "
                    "make it yourself, or change [log.kafka] topic/replication or "
                    "[log] partitions"
                ) from e
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with translated(f"look up topic {changes}"):
            md = admin.list_topics(changes, timeout=REQUEST_TIMEOUT_S)
        found = md.topics.get(changes)
        if found is not None and found.error is None:
            if fixed and len(found.partitions) != wanted[changes]:
                raise ConfigError(
                    f"log.partitions: topic {changes!r} has {len(found.partitions)} "
                    f"partitions, not {wanted[changes]}; a player's partition is fixed "
                    "for a topic's life: use another topic ([log.kafka] topic)"
                )
            if all(p.leader >= 0 for p in found.partitions.values()):
                return
        if time.monotonic() > deadline:
            raise LogUnavailable(f"Kafka: topic {changes}: no leader for every partition")
        time.sleep(0.1)
