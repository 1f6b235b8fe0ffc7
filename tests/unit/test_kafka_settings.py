"""The Kafka settings librdkafka is given (engine/definitions/kafka_settings.py)."""

from __future__ import annotations

import pytest

from engine.definitions.kafka_settings import librdkafka_settings
from engine.errors import UserError

JAVA_ONLY = {"bootstrap.servers": "h:9092", "linger.ms": "5", "default.api.timeout.ms": "5000"}


@pytest.mark.parametrize(
    ("settings", "given"),
    [
        (JAVA_ONLY, {"bootstrap.servers": "h:9092", "linger.ms": "5"}),
        # Java's way to turn host checks off; librdkafka reads only none or https.
        ({"ssl.endpoint.identification.algorithm": "", "acks": "all"}, {"acks": "all"}),
        ({"max.poll.records": "10"}, {"max.poll.records": "10"}),  # known, a consumer's
    ],
)
def test_for_spark_java_client_librdkafka_gets_what_it_reads(settings, given) -> None:
    assert librdkafka_settings(settings, strict=False) == given


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        (
            JAVA_ONLY,
            "kafka.default.api.timeout.ms: no such setting in librdkafka, the Kafka client of "
            "the Python connector (source.connector)",
        ),
        (
            {"bootstrap.servers": "h:9092", "acks": "maybe"},
            "kafka.acks: librdkafka refuses 'maybe': Invalid value for configuration property "
            '"request.required.acks"',
        ),
    ],
)
def test_as_the_pipeline_client_librdkafka_refusing_a_setting_is_one_line(settings, error) -> None:
    with pytest.raises(UserError) as refused:
        librdkafka_settings(settings, strict=True)
    assert str(refused.value) == error


def test_settings_librdkafka_reads_pass_as_they_are() -> None:
    settings = {"bootstrap.servers": "h:9092", "linger.ms": 5, "enable.idempotence": True}
    assert librdkafka_settings(settings, strict=True) == settings
