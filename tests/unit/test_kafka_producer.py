"""The one Kafka producer wrapper (engine.sinks.kafka_producer) against a real broker: a full
local queue waits instead of failing, and undelivered messages are one clear error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from devtools.broker import Broker, create_topics, free_port
from engine.errors import KafkaUnavailable
from engine.sinks.kafka_producer import KafkaDeliveryError, KafkaProducer
from tests.conftest import consume

#: A local queue of 10 messages: sending hundreds must wait for deliveries to make room.
TINY_QUEUE = {"queue.buffering.max.messages": 10, "log_level": 0}


@pytest.fixture(scope="module")
def servers() -> Iterator[str]:
    with Broker().start(["tiny", "sink"]) as broker:
        yield broker.servers


def _read(servers: str, topic: str, partition: int, expect: int) -> list[Any]:
    """Messages of one partition from its start, until `expect` arrived (or 20 s passed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "tests", "log_level": 0})
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + 20
    while len(messages) < expect and time.monotonic() < deadline:
        messages += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    consumer.close()
    return messages


def test_a_full_local_queue_waits_and_every_message_arrives(servers: str) -> None:
    producer = KafkaProducer({"bootstrap.servers": servers, **TINY_QUEUE})
    for n in range(500):
        producer.send("tiny", f"value {n}".encode(), f"key {n % 7}")
    producer.flush(30)
    producer.close()
    messages = consume(servers, "tiny", expect=500)
    assert [m.value() for m in messages] == [f"value {n}".encode() for n in range(500)]
    assert [m.key() for m in messages] == [f"key {n % 7}".encode() for n in range(500)]


def test_partition_and_headers_go_as_given(servers: str) -> None:
    create_topics(servers, ["split"], partitions=2)
    producer = KafkaProducer({"bootstrap.servers": servers, **TINY_QUEUE})
    for n in range(50):
        producer.send("split", str(n), partition=1, headers=[("n", str(n).encode())])
    producer.flush(30)
    messages = _read(servers, "split", 1, expect=50)
    assert [m.value() for m in messages] == [str(n).encode() for n in range(50)]
    assert [m.headers() for m in messages] == [[("n", str(n).encode())] for n in range(50)]
    assert [m.key() for m in messages] == [None] * 50


def test_the_topic_sink_sends_a_batch_bigger_than_its_queue(servers: str, tmp_path: Path) -> None:
    from engine.sinks import BatchId
    from engine.sinks.kafka import TopicSink

    client = {"bootstrap.servers": servers, "queue.buffering.max.messages": "10"}
    sink = TopicSink("sink", client, where=tmp_path)
    rows = pa.table({"key": [f"k{n}" for n in range(500)], "value": [f"v{n}" for n in range(500)]})
    assert sink.write(rows, BatchId("app", 3, "sensor_cep", "alerts")) == 500
    messages = consume(servers, "sink", expect=500)
    assert [(m.key(), m.value()) for m in messages] == [
        (f"k{n}".encode(), f"v{n}".encode()) for n in range(500)
    ]
    assert dict(messages[0].headers()) == {
        "pipeline": b"sensor_cep",
        "query": b"alerts",
        "batch_id": b"3",
    }


def test_undelivered_messages_are_one_line_naming_the_topic() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    producer = KafkaProducer(
        {"bootstrap.servers": nowhere, "message.timeout.ms": 1000, **TINY_QUEUE}
    )
    for n in range(5):
        producer.send("alerts", str(n))
    with pytest.raises(KafkaDeliveryError) as failed:
        producer.flush(10)
    assert str(failed.value) == (
        "5 of 5 messages to topic alerts not delivered (Local: Message timed out)"
    )
    assert isinstance(failed.value, KafkaUnavailable)  # one line at the CLI, retried by a run
    # Spent: an idempotent producer cannot go on after a failure.
    with pytest.raises(KafkaDeliveryError):
        producer.send("alerts", "again")
    producer.close()


def test_a_full_queue_with_no_broker_fails_instead_of_waiting_for_ever() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    producer = KafkaProducer(
        {"bootstrap.servers": nowhere, "message.timeout.ms": 1000, **TINY_QUEUE}
    )
    started = time.monotonic()
    with pytest.raises(KafkaDeliveryError, match=r"of \d+ messages to topic alerts not delivered"):
        for n in range(1000):
            producer.send("alerts", str(n))
    assert time.monotonic() - started < 10
    producer.close()
