"""Streaming sources opened in Spark, each registered as the pipeline's raw view (see the
package's docstring for their columns)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from engine.definitions.pipeline import Pipeline, SourceSpec
from engine.definitions.source_options import spark_kafka_only
from engine.errors import UserError

__all__ = [
    "Connector",
    "has_kafka",
    "kafka_connector",
    "open_source",
]

_ORIGIN = "concat_ws(':', topic, partition, offset) AS origin"


# What a files source reads unless its spec says otherwise. Logs are often kept in folders by
# date (logs/2019/06/20/*.json), and Spark reads only the folder's own files (and key=value
# folders') unless told to look below. Spark also skips a file more than 7 days older than the
# newest it has seen (`maxFileAge`): a log copied in with its old time (`cp -p`, `rsync -a`,
# `tar x`) was not read, without a word. Both were lines lost with exit 0.
_FILES_DEFAULTS: Mapping[str, str] = {"recursiveFileLookup": "true", "maxFileAge": "100000d"}

# Characters Hadoop reads as a glob pattern in a path.
_GLOB = re.compile(r"([\\\[\]{}*?])")


def _files(spark: SparkSession, spec: SourceSpec, folder: Path) -> DataFrame:
    # Spark globs each file's path again when it reads a batch, so a file named report?.json
    # would also read reportA.json and others, some twice; escaping cannot reach that far.
    globbed = sorted(str(p) for p in _input_files(folder) if _GLOB.search(str(p)))
    if globbed:
        raise UserError(
            f"input file {folder / globbed[0]} has one of ? * [ ] {{ }} \\ in its name, which "
            "Spark reads as a pattern matching other files; rename it"
        )
    options = {k: str(v) for k, v in spec.options.items()}
    given = {k.lower() for k in options}
    for name, value in _FILES_DEFAULTS.items():
        if name.lower() not in given:
            options[name] = value
    _check_archive_outside(options, folder)
    reader = spark.readStream.options(**options)
    # The folder itself is escaped: g[1] is that folder, not g1.
    return reader.text(_GLOB.sub(r"\\\1", str(folder))).selectExpr(
        "value",
        "_metadata.file_path AS origin",
        # A file's lines arrived when the file was last written.
        "_metadata.file_modification_time AS timestamp",
    )


def _check_archive_outside(options: Mapping[str, str], folder: Path) -> None:
    """Spark's `cleanSource: archive` moves each read file below `sourceArchiveDir`; below the
    input folder it would be read again, and Spark stops the query with a `requirement failed`
    that names neither option."""
    archive = next((v for k, v in options.items() if k.lower() == "sourcearchivedir"), None)
    if archive is not None and Path(archive).resolve().is_relative_to(folder.resolve()):
        raise UserError(
            f"source.sourceArchiveDir: {archive} is inside the input folder {folder}, whose "
            "subfolders are read: archived files would be read again; give a folder outside it"
        )


def _input_files(folder: Path) -> list[Path]:
    """The files Spark reads below `folder`, relative to it: names that start with `.` or `_`
    (and folders so named) are Spark's to skip."""
    files = []
    for root, folders, names in os.walk(folder):
        folders[:] = [f for f in folders if not _skipped(f)]
        files += [Path(root, n).relative_to(folder) for n in names if not _skipped(n)]
    return files


def _skipped(name: str) -> bool:
    """Whether Spark's file source leaves out a file or folder of this name."""
    return name.startswith((".", "_"))


def _socket(spark: SparkSession, spec: SourceSpec) -> DataFrame:
    """Lines of a TCP server, read by our source (engine/sources/socket_lines.py), whose offsets
    go on from the checkpoint; Spark's own numbers each connection's lines from the start."""
    from engine.sources.socket_lines import SocketSource, server_address

    host, port = server_address(dict(spec.options))
    spark.dataSource.register(SocketSource)
    return (
        spark.readStream.format(SocketSource.name())
        .option("host", host)
        .option("port", str(port))
        .load()
        .selectExpr("value", "timestamp", f"'socket:{host}:{port}' AS origin")
    )


Connector = Literal["native", "python"]
_CONNECTORS = ("auto", "native", "python")
# Options of the Python source that Spark's connector does not have (or names otherwise).
_PYTHON_ONLY = ("connector", "timeout", "topic", "maxRecordsPerBatch")


def has_kafka(spark: SparkSession) -> bool:
    """Whether the session has Spark's Kafka connector (the spark-sql-kafka jar)."""
    probe = spark.readStream.format("kafka").option("subscribe", "probe")
    try:
        # Resolving the schema finds the provider; nothing connects to a broker.
        probe.option("kafka.bootstrap.servers", "127.0.0.1:9").load().schema  # noqa: B018
    except PySparkException:
        return False
    return True


def kafka_connector(spark: SparkSession, spec: SourceSpec) -> Connector:
    """Who reads and writes Kafka: `connector` auto (the default) is Spark's own connector
    where the session has its jar, the Python source and confluent-kafka producer otherwise."""
    asked = str(spec.options.get("connector", "auto"))
    if asked not in _CONNECTORS:
        raise UserError(f"source.connector: auto, native or python, not {asked!r}")
    if asked != "python" and has_kafka(spark):
        return "native"
    if asked == "native":
        raise UserError(
            "source.connector: native needs Spark's Kafka connector (spark-sql-kafka jar), "
            "which this Spark session does not have (`make` fetches it into .jars)"
        )
    unread = spark_kafka_only(spec.options)
    if unread:
        why = "source.connector python" if asked == "python" else "no spark-sql-kafka jar here"
        raise UserError(
            f"source.{unread[0]}: only Spark's Kafka connector reads it, and the Python Kafka "
            f"source reads this topic ({why}); leave it out, or use the native connector"
        )
    return "python"


def _check_topic(options: Mapping[str, str]) -> None:
    """Broker and topic there, checked once at the start: Spark's own client would retry an
    unreachable broker for minutes and wait on a missing topic for ever."""
    from engine.sources.kafka_topic import KafkaOptions, check_topic

    check_topic(KafkaOptions.parse(options), by_spark=True)


# The view's columns with either connector. Both give key and value as bytes; the CAST keeps
# the bytes as they are, so a value that is not valid UTF-8 reaches the SQL intact.
_KAFKA_COLUMNS = (
    "CAST(key AS STRING) AS key",
    "CAST(value AS STRING) AS value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    _ORIGIN,
)


def _native(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """Spark's connector: offsets in the checkpoint, the same view columns as the Python source."""
    _check_topic(options)
    native = {
        "subscribe": options["topic"],
        # The Python source's default, not Spark's ("latest"): a new query reads the topic.
        "startingOffsets": options.get("startingOffsets", "earliest"),
        "maxOffsetsPerTrigger": options.get("maxRecordsPerBatch"),
        **{k: v for k, v in options.items() if k not in _PYTHON_ONLY},
    }
    reader = spark.readStream.format("kafka")
    for k, v in native.items():
        if v not in (None, "", "none"):
            reader = reader.option(k, v)
    return reader.load().selectExpr(*_KAFKA_COLUMNS)


def _kafka(spark: SparkSession, spec: SourceSpec, client: Mapping[str, str]) -> DataFrame:
    from engine.sources.kafka_topic import kafka_options

    options = kafka_options(spec, client)
    if kafka_connector(spark, spec) == "native":
        return _native(spark, options)
    from engine.sources.kafka import KafkaSource
    from engine.sources.kafka_topic import KafkaOptions

    KafkaOptions.parse(options)  # option errors now, in one line, not from a Spark worker
    spark.dataSource.register(KafkaSource)
    return (
        spark.readStream.format(KafkaSource.name())
        .options(**options)
        .load()
        .selectExpr(*_KAFKA_COLUMNS)
    )


def _delta(spark: SparkSession, spec: SourceSpec, table: Path) -> DataFrame:
    """A lake table read as a stream: its columns, plus `origin` and `timestamp`."""
    if not (table / "_delta_log").is_dir():
        raise UserError(
            f"source.table: no Delta table {spec.table!r} at {table} "
            "(run the pipeline that writes it first, with the same --lake)"
        )
    reader = spark.readStream.format("delta")
    for key, value in spec.options.items():
        reader = reader.option(key, str(value))
    df = reader.load(str(table))
    extra = [f"'delta:{spec.table}' AS origin"] * ("origin" not in df.columns)
    # Delta's stream has no per-row arrival time: the rows arrive with the batch that reads
    # them. In a stream current_timestamp() is the batch's time, kept in the offset log, so a
    # replayed batch gets the same value.
    extra += ["current_timestamp() AS timestamp"] * ("timestamp" not in df.columns)
    return df.selectExpr("*", *extra)


def open_source(
    spark: SparkSession,
    pipeline: Pipeline,
    *,
    path: str | None = None,
    lake: Path | None = None,
) -> DataFrame:
    """The streaming DataFrame of a pipeline's source. `path` (--input) reads that folder of
    files instead (for a delta source: that Delta table); `lake` is where a delta source finds
    its table."""
    spec = pipeline.source
    if spec.kind == "delta":
        return _delta(spark, spec, spec.delta_table(lake or Path("lake").resolve(), path))
    if spec.kind == "files" or path is not None:
        return _files(spark, spec, pipeline.input_folder(path))
    if spec.kind == "kafka":
        return _kafka(spark, spec, pipeline.kafka)
    if spec.kind == "socket":
        return _socket(spark, spec)
    raise UserError(f"source kind '{spec.kind}' is not available yet")
