"""Spark SQL as `query` reads it: the pipelines' dialect, with date patterns kept as written."""

from __future__ import annotations

from typing import ClassVar

from engine.definitions.sql import SparkStreaming

__all__ = ["SparkQuery"]


class SparkQuery(SparkStreaming):
    """Date patterns (`date_format(ts, 'yyyy-MM-dd')`) stay Spark's text: sqlglot's own mapping
    to DuckDB's codes leaves the letters it lacks (`DDD`, `yyy`, `LLL`, `k`) as text, which
    DuckDB then prints as they are; the DuckDB translation maps them itself."""

    TIME_MAPPING: ClassVar[dict[str, str]] = {}
