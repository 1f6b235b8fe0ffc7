"""Streaming sources, each registered as the pipeline's raw view."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from engine.errors import UserError
from engine.pipeline import PROJECT_DIR, SourceSpec

__all__ = ["open_source"]


def _files(spark: SparkSession, spec: SourceSpec, path: str | None) -> DataFrame:
    folder = Path(path or spec.path or "")
    if not folder.is_absolute():
        folder = (Path.cwd() if path else PROJECT_DIR) / folder
    if not folder.is_dir():
        raise UserError(f"--input: input folder not found: {folder}")
    reader = spark.readStream.options(**{k: str(v) for k, v in spec.options.items()})
    return reader.text(str(folder)).selectExpr("value", "_metadata.file_path AS source_file")


def open_source(spark: SparkSession, spec: SourceSpec, *, path: str | None = None) -> DataFrame:
    """The streaming DataFrame of a source; `path` overrides the spec's input location."""
    if spec.kind == "files":
        return _files(spark, spec, path)
    raise UserError(f"source kind '{spec.kind}' is not available yet")
