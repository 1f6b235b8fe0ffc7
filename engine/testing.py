"""What a project's pipeline tests need from the engine: a pytest fixture for one local Spark
session per test process, and a reader of a Delta table's rows. `init` writes tests that use
them, in this project and in a project folder of one's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from engine.lake import read_arrow

__all__ = ["local_session", "read_table", "spark"]


def local_session() -> SparkSession:
    """The local Spark session tests share, with two shuffle partitions for their small data."""
    from engine.runtime.session import get_spark

    # Spark keeps a Kafka sink's producer for 10 minutes after its query ends, reconnecting to
    # a broker a test has since stopped; when a later test's server got that free port, the
    # producer read its lines as a Kafka reply (OutOfMemoryError) and took the connection.
    idle_producers = {
        "spark.kafka.producer.cache.timeout": "5s",
        "spark.kafka.producer.cache.evictorThreadRunInterval": "1s",
    }
    return get_spark({"spark.sql.shuffle.partitions": "2", **idle_producers})


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole test process, stopped at its end."""
    session = local_session()
    yield session
    session.stop()


def read_table(lake: Path, name: str, *, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """All rows of a Delta table as dicts, in a stable order, without the `drop` columns."""
    rows = read_arrow(DeltaTable(str(lake / name))).to_pylist()
    rows = [{k: v for k, v in r.items() if k not in drop} for r in rows]
    return sorted(rows, key=lambda r: [str(r[k]) for k in sorted(r)])
