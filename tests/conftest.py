"""Shared fixtures: one local Spark session per test process, and Delta table readers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

PROJECT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from engine.spark_session import get_spark

    session = get_spark({"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"})
    yield session
    session.stop()


def read_table(lake: Path, name: str, *, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """All rows of a Delta table as dicts, in a stable order, without the `drop` columns."""
    rows = DeltaTable(str(lake / name)).to_pyarrow_table().to_pylist()
    rows = [{k: v for k, v in r.items() if k not in drop} for r in rows]
    return sorted(rows, key=lambda r: [str(r[k]) for k in sorted(r)])
