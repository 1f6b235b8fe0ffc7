"""Streaming sources, each registered as the pipeline's raw view.

Every source has `value` (the record as text) and `origin` (where it came from: a file path,
or topic:partition:offset). files adds source_file; kafka adds key, topic, partition, offset
and timestamp (engine/kafka_source.py, or Spark's own connector where its jar is installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from engine.errors import UserError
from engine.pipeline import PROJECT_DIR, SourceSpec

__all__ = ["open_source"]

_ORIGIN = "concat_ws(':', topic, partition, offset) AS origin"


def _files(spark: SparkSession, spec: SourceSpec, path: str | None) -> DataFrame:
    folder = Path(path or spec.path or "")
    if not folder.is_absolute():
        folder = (Path.cwd() if path else PROJECT_DIR) / folder
    if not folder.is_dir():
        raise UserError(f"--input: input folder not found: {folder}")
    reader = spark.readStream.options(**{k: str(v) for k, v in spec.options.items()})
    return reader.text(str(folder)).selectExpr(
        "value", "_metadata.file_path AS source_file", "_metadata.file_path AS origin"
    )


def _kafka(spark: SparkSession, spec: SourceSpec, client: Mapping[str, str]) -> DataFrame:
    options = {k: str(v) for k, v in spec.options.items() if k != "connector"}
    options.update({f"kafka.{k}": v for k, v in client.items()})
    connector = spec.options.get("connector", "python")
    if connector == "native":
        # Spark's own connector (spark-sql-kafka jar on the cluster): same columns, its options.
        native = {
            "subscribe": options.pop("topic", ""),
            "maxOffsetsPerTrigger": options.pop("maxRecordsPerBatch", None),
            **options,
        }
        reader = spark.readStream.format("kafka")
        for k, v in native.items():
            if v not in (None, ""):
                reader = reader.option(k, v)
        try:
            loaded = reader.load()
        except PySparkException as err:
            raise UserError(
                "source.connector: native needs Spark's Kafka connector (spark-sql-kafka jar), "
                f"which this Spark does not have ({str(err).splitlines()[0][:80]})"
            ) from None
        return loaded.selectExpr(
            "CAST(key AS STRING) AS key",
            "CAST(value AS STRING) AS value",
            "topic",
            "partition",
            "offset",
            "timestamp",
            _ORIGIN,
        )
    if connector != "python":
        raise UserError(f"source.connector: python or native, not {connector!r}")
    from engine.kafka_source import KafkaOptions, KafkaSource

    KafkaOptions.parse(options)  # option errors now, in one line, not from a Spark worker
    spark.dataSource.register(KafkaSource)
    return (
        spark.readStream.format(KafkaSource.name())
        .options(**options)
        .load()
        .selectExpr("*", _ORIGIN)
    )


def open_source(
    spark: SparkSession,
    spec: SourceSpec,
    *,
    path: str | None = None,
    kafka: Mapping[str, str] | None = None,
) -> DataFrame:
    """The streaming DataFrame of a source. `path` (--input) reads that folder of files
    instead, whatever the source kind; `kafka` holds the pipeline's librdkafka settings."""
    if spec.kind == "files" or path is not None:
        return _files(spark, spec, path)
    if spec.kind == "kafka":
        return _kafka(spark, spec, kafka or {})
    raise UserError(f"source kind '{spec.kind}' is not available yet")
