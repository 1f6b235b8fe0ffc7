"""Kafka source options and batch caps, and the pipeline's kafka settings (no Spark, no broker)."""

from __future__ import annotations

import pytest

from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.sources.kafka_topic import KafkaOptions, split_limit


@pytest.mark.parametrize(
    ("available", "cap", "expected"),
    [
        ({0: 10}, 4, {0: 4}),
        ({0: 3}, 10, {0: 3}),
        ({0: 10, 1: 10}, 6, {0: 3, 1: 3}),
        # In proportion to the backlogs, so no partition races ahead in event time.
        ({0: 0, 1: 200, 2: 400}, 50, {0: 0, 1: 17, 2: 33}),
        ({0: 1, 1: 10, 2: 10}, 9, {0: 1, 1: 4, 2: 4}),  # the largest remainder
        ({0: 100, 1: 900}, 10, {0: 1, 1: 9}),
        # Rounding leftovers go to the largest remainders, then the lowest partitions.
        ({0: 10, 1: 10}, 5, {0: 3, 1: 2}),
        ({0: 0, 1: 0}, 5, {0: 0, 1: 0}),
    ],
)
def test_split_limit_shares_the_cap_by_backlog(available, cap, expected):
    assert split_limit(available, cap) == expected
    assert sum(expected.values()) == min(cap, sum(available.values()))


SERVERS = {"kafka.bootstrap.servers": "h:1"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({**SERVERS}, "source.topic"),
        ({"topic": "t"}, "kafka.bootstrap.servers"),
        ({**SERVERS, "topic": "t", "startingOffsets": "middle"}, "source.startingOffsets"),
        ({**SERVERS, "topic": "t", "maxRecordsPerBatch": "lots"}, "source.maxRecordsPerBatch"),
        ({**SERVERS, "topic": "t", "timeout": "soon"}, "source.timeout: not a number"),
        ({**SERVERS, "topic": "t", "timeout": "nan"}, "source.timeout: seconds above 0"),
        # Taken for true by the Python source and refused by Spark's, exit 1: a typo.
        ({**SERVERS, "topic": "t", "failOnDataLoss": "maybe"}, "source.failOnDataLoss"),
        ({**SERVERS, "topic": "t", "maxRecordsPerBatch": "0"}, "at least 1"),
    ],
)
def test_bad_source_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        KafkaOptions.parse(options)


def test_starting_offsets_in_any_case():
    options = {**SERVERS, "topic": "t", "startingOffsets": "LATEST"}
    assert KafkaOptions.parse(options).starting == "latest"


def test_options_parse_with_librdkafka_settings_passed_through():
    opts = KafkaOptions.parse(
        {**SERVERS, "topic": "t", "maxRecordsPerBatch": "500", "kafka.security.protocol": "SSL"}
    )
    assert (opts.topic, opts.starting, opts.max_records) == ("t", "earliest", 500)
    assert opts.consumer_conf()["security.protocol"] == "SSL"
    assert opts.consumer_conf()["enable.auto.commit"] is False


def test_conf_overrides_kafka_settings_and_source_options():
    pipeline = (
        Registry()
        .get("sensor_cep")
        .with_settings({"kafka.bootstrap.servers": "127.0.0.1:1234", "source.topic": "other"})
    )
    assert pipeline.kafka["bootstrap.servers"] == "127.0.0.1:1234"
    assert pipeline.source.options["topic"] == "other"
    alerts = next(q for q in pipeline.queries if q.topics)
    assert alerts.topics == {"sensor-anomalies": "anomaly_alerts"}
