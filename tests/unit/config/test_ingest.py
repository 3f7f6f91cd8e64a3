"""``[[ingest]]``: topics of finished matches, read and refused with the setting named."""

from __future__ import annotations

from typing import Any

import pytest

from podium.config.ingest import brokers
from podium.config.settings import parse
from podium.errors import ConfigError

KAFKA_LOG = {"url": "kafka://k1:9092,k2:9092"}


def test_a_table_is_read_with_its_defaults() -> None:
    s = parse({"log": KAFKA_LOG, "ingest": [{"topic": "matches", "key": "gs-eu"}]})
    (t,) = s.ingest
    assert (t.topic, t.key, t.group, t.dead_letter_topic) == (
        "matches",
        "gs-eu",
        "podium-ingest",
        "matches.rejected",
    )
    assert brokers(t, s.log.url) == "kafka://k1:9092,k2:9092"  # the log's, by default
    assert parse({}).ingest == ()


def test_every_setting_of_a_table_is_read() -> None:
    s = parse(
        {
            "ingest": [
                {
                    "topic": "eu.matches",
                    "key": "a1b2c3d4e5f6",
                    "group": "eu-ingest",
                    "dead_letter": "eu.refused",
                    "brokers": "kafka://b1:9092",
                }
            ]
        }
    )
    (t,) = s.ingest
    assert (t.group, t.dead_letter_topic, brokers(t, s.log.url)) == (
        "eu-ingest",
        "eu.refused",
        "kafka://b1:9092",
    )


@pytest.mark.parametrize(
    ("ingest", "log", "message"),
    [
        ([{"key": "gs"}], KAFKA_LOG, r"^ingest\[0\]\.topic: required$"),
        ([{"topic": "m"}], KAFKA_LOG, r"^ingest\[0\]\.key: required$"),
        (
            [{"topic": "m", "key": "  "}],
            KAFKA_LOG,
            r"^ingest\[0\]\.key: expected a key's name or id \(podium keys list\), got '  '$",
        ),
        (
            [{"topic": "two words", "key": "gs"}],
            KAFKA_LOG,
            r"^ingest\[0\]\.topic: expected 1 to 200 of letters, digits, \. _ -, got 'two words'",
        ),
        (
            [{"topic": "m", "key": "gs", "group": ""}],
            KAFKA_LOG,
            r"^ingest\[0\]\.group: expected 1 to 200 of letters",
        ),
        (
            [{"topic": "m", "key": "gs", "partitions": 3}],
            KAFKA_LOG,
            r"^ingest\[0\]\.partitions: unknown setting \(known: topic, key, group, "
            r"dead_letter, brokers\)$",
        ),
        (
            [{"topic": "m", "key": "gs"}],
            {},
            r"^ingest\[0\]\.brokers: required \(kafka://host:9092\) when \[log\] url is not "
            r"a Kafka log$",
        ),
        (
            [{"topic": "m", "key": "gs", "brokers": "b1:9092"}],
            {},
            r"^ingest\[0\]\.brokers: expected kafka://host:9092\[,host:9092\.\.\.\], "
            r"got 'b1:9092'$",
        ),
        (
            [{"topic": "m", "key": "gs", "brokers": "kafka://,"}],
            {},
            r"^ingest\[0\]\.brokers: no broker in 'kafka://,'",
        ),
        (
            [{"topic": "m", "key": "gs", "dead_letter": "m"}],
            KAFKA_LOG,
            r"^ingest\[0\]: dead_letter: must not be the topic itself$",
        ),
        (
            [{"topic": "m", "key": "gs"}, {"topic": "m", "key": "other"}],
            KAFKA_LOG,
            r"^ingest\[1\]: topic 'm' is read twice by group 'podium-ingest'$",
        ),
        ({"topic": "m", "key": "gs"}, KAFKA_LOG, r"^ingest: expected an array of tables"),
    ],
)
def test_a_bad_table_is_refused_naming_the_setting(
    ingest: Any, log: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse({"log": log, "ingest": ingest})


def test_one_topic_may_be_read_by_two_groups() -> None:
    s = parse(
        {
            "log": KAFKA_LOG,
            "ingest": [
                {"topic": "m", "key": "gs"},
                {"topic": "m", "key": "gs", "group": "audit"},
            ],
        }
    )
    assert [t.group for t in s.ingest] == ["podium-ingest", "audit"]
