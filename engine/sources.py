"""Streaming sources, each registered as the pipeline's raw view.

Every source has `value` (the record as text), `origin` (where it came from: a file path,
topic:partition:offset, or socket:host:port) and `timestamp` (when it arrived: the file's
modification time, the Kafka message time, or the time the socket line was read). files adds
source_file; kafka adds key, topic, partition and offset (engine/kafka_source.py, or Spark's
own connector where its jar is installed). A socket cannot replay: see docs/decisions.md.
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
        "value",
        "_metadata.file_path AS source_file",
        "_metadata.file_path AS origin",
        # A file's lines arrived when the file was last written.
        "_metadata.file_modification_time AS timestamp",
    )


def _socket(spark: SparkSession, spec: SourceSpec) -> DataFrame:
    host, port = spec.options.get("host", "127.0.0.1"), spec.options.get("port")
    if not port:
        raise UserError("source.port: a socket source needs the server's port")
    reader = spark.readStream.format("socket").option("host", str(host)).option("port", str(port))
    # Spark's socket source stamps each line with its arrival time.
    return (
        reader.option("includeTimestamp", "true")
        .load()
        .selectExpr("value", "timestamp", f"'socket:{host}:{port}' AS origin")
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
    if spec.kind == "socket":
        return _socket(spark, spec)
    raise UserError(f"source kind '{spec.kind}' is not available yet")
