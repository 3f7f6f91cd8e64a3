"""The one table of confluent-kafka's errors: what is an outage, what is a setting, what is
a bug.

Transient (``LogUnavailable``, a 503 and a retry): what librdkafka calls retriable, no broker
reachable, a request or a message that timed out, a partition or a group coordinator
between leaders (a broker killed, an election), too few in-sync replicas for ``acks=all``.
Refused for want of rights or credentials (TLS, SASL, ACLs): ``ConfigError``, since only a
setting mends it. Everything else is a bug in what podium sent: ``InternalError``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from confluent_kafka import KafkaError, KafkaException

from podium.errors import ConfigError, InternalError, LogUnavailable, PodiumError

TRANSIENT_CODES = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._NO_OFFSET,
        KafkaError._RESOLVE,
        KafkaError._DESTROY,
        KafkaError._PARTITION_EOF,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.REBALANCE_IN_PROGRESS,
    }
)
REFUSED_CODES = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
        KafkaError.ILLEGAL_SASL_STATE,
    }
)


def error_of(e: KafkaError, doing: str) -> PodiumError:
    """podium's error for one of librdkafka's."""
    code = e.code()
    if code in REFUSED_CODES:
        return ConfigError(
            f"log: Kafka refused {doing}: {e.str()} (see [log.kafka] client: security.protocol, "
            "sasl.*, ssl.*, and the broker's ACLs)"
        )
    if code in TRANSIENT_CODES or e.retriable():
        return LogUnavailable(f"Kafka: {doing}: {e.str()}")
    return InternalError(f"Kafka refused {doing}: {e.name()}: {e.str()}")


@contextlib.contextmanager
def translated(doing: str) -> Iterator[None]:
    """Run a block of confluent-kafka calls; its driver errors leave it as podium's."""
    try:
        yield
    except PodiumError:
        raise
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if isinstance(err, KafkaError):
            raise error_of(err, doing) from e
        raise LogUnavailable(f"Kafka: {doing}: {e}") from e
    except (TimeoutError, ConnectionError) as e:
        raise LogUnavailable(f"Kafka: {doing}: {type(e).__name__}: {e}") from e
