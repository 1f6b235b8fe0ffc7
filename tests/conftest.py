"""Shared fixtures: one local Spark session per test process (the engine's), Delta table readers,
a Kafka-protocol broker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

# The reader every pipeline test uses, as `init`'s generated ones do.
from engine.testing import local_session, read_table  # noqa: F401

PROJECT = Path(__file__).resolve().parent.parent

# A runner.py that a test starts lives for half a minute, most of it spent compiling Spark's
# code for the first time: on the JIT's first tier alone it takes about a fifth less
# (docs/decisions.md, "Runs a test starts use the JIT's first tier"). That tier alone gets a
# 48 MB code cache, 37 MB of it used 24 s into a run; 240 MB is what the JVM gives both tiers.
# Every process a test starts inherits this; the suite's own session starts without it (below).
FIRST_TIER = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
SUBMIT_OPTS = os.environ.get("SPARK_SUBMIT_OPTS", "")
os.environ["SPARK_SUBMIT_OPTS"] = f"{SUBMIT_OPTS} {FIRST_TIER}".strip()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """engine.testing's session, on every tier of the JIT: it runs the whole suite, where the
    later tiers pay (five pipeline test files: 288-323 s, against 396 s on the first alone)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_SUBMIT_OPTS", SUBMIT_OPTS)
        session = local_session()
    yield session
    session.stop()


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
