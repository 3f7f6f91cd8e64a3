"""``[log.kafka]``: the Kafka log's settings, read and refused."""

from __future__ import annotations

import pytest

from podium.bootstrap import topology
from podium.config.settings import parse
from podium.errors import ConfigError


def test_a_kafka_url_and_its_settings_are_read() -> None:
    s = parse(
        {
            "log": {
                "url": "kafka://k1:9092,k2:9092",
                "partitions": 12,
                "kafka": {
                    "topic": "game.changes",
                    "events_topic": "game.events",
                    "group": "board-updaters",
                    "replication": 3,
                    "client": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
                },
            }
        }
    )
    k = s.log.kafka
    assert (k.topic, k.events_topic, k.group, k.replication) == (
        "game.changes",
        "game.events",
        "board-updaters",
        3,
    )
    assert k.client == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    assert topology(s).log == "kafka"
    assert parse({}).log.kafka.topic == "podium-changes"  # defaults without a [log.kafka]


@pytest.mark.parametrize(
    ("kafka", "said"),
    [
        ({"client": {"acks": "0"}}, "log.kafka.client: only librdkafka's security settings"),
        ({"client": {"enable.idempotence": "false"}}, "'enable.idempotence'"),
        ({"topic": "a topic"}, "log.kafka.topic: expected 1 to 200 of letters"),
        ({"group": ""}, "log.kafka.group:"),
        ({"replication": -1}, "log.kafka.replication:"),
        ({"replication": "3"}, "log.kafka.replication:"),
    ],
)
def test_bad_kafka_settings_are_refused(kafka: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse({"log": {"url": "kafka://k1:9092", "kafka": kafka}})
    assert said in str(info.value)


def test_a_bad_broker_address_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"log\.url: port '0'"):
        parse({"log": {"url": "kafka://k1:9092,k2:0"}})
