"""Shared fixtures: one local Spark session per test process (the engine's), Delta table readers,
a Kafka-protocol broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The fixture and reader every pipeline test uses, `init`'s generated ones too.
from engine.testing import read_table, spark  # noqa: F401

PROJECT = Path(__file__).resolve().parent.parent


@pytest.fixture
def broker() -> Iterator[Any]:
    """A real Kafka broker (Apache Kafka where `make` fetched its jars, else tansu) with the
    sensor_cep topics, per test."""
    from devtools.broker import Broker

    with Broker().start(["sensor-readings", "sensor-anomalies"]) as running:
        yield running


def produce(servers: str, topic: str, lines: list[str]) -> None:
    """Send lines to a topic and wait until the broker has them all."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for line in lines:
        producer.produce(topic, value=line)
    assert producer.flush(30) == 0


def consume(servers: str, topic: str, *, expect: int, timeout_s: float = 20.0) -> list[Any]:
    """Messages of partition 0 from the start, until `expect` arrived or no more come."""
    import time

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "tests", "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < expect and time.monotonic() < deadline:
        messages += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    # Anything beyond `expect` (a duplicate) shows up within a moment.
    messages += [m for m in consumer.consume(100, timeout=1.0) if m.error() is None]
    consumer.close()
    return messages


def staged(scenario: Path, dest: Path) -> Path:
    """Copy a scenario's part files to `dest` with modification times in name order.

    Spark's file source reads files in modification-time order, and a git checkout gives them
    arbitrary times, so tests that expect one file per batch stage them first.
    """
    import os
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for number, source in enumerate(sorted(scenario.glob("part-*.json")), start=1):
        target = dest / source.name
        shutil.copy(source, target)
        os.utime(target, (1_700_000_000 + number, 1_700_000_000 + number))
    return dest


def copy_project(dest: Path) -> Path:
    """A copy of the project (pipelines/, sql/, tables/, quality/, the sample data/) to edit
    in a test; `Registry(<copy>/pipelines)` reads it and finds the rest beside it."""
    import shutil

    for folder in ("pipelines", "sql", "tables", "quality", "data"):
        shutil.copytree(PROJECT / folder, dest / folder)
    return dest


def edit(path: Path, old: str, new: str) -> None:
    """Replace text that must be in the file once."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not once in {path}"
    path.write_text(text.replace(old, new))


def batches_committed(checkpoint: Path) -> int:
    """How many batches Spark has committed in a query's checkpoint."""
    from engine.lake.guard import last_committed

    last = last_committed(checkpoint)
    return 0 if last is None else last + 1
