"""Starting and stopping a run's streaming queries: triggers, the start into a writer or
straight to Kafka, and the waits a clean stop needs (engine/runtime/run.py drives them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from engine.definitions.durations import Duration
from engine.definitions.pipeline import REAL_TIME, QuerySpec, trigger_duration
from engine.runtime.connect import is_connect
from engine.sinks.kafka import SparkTopicSink, headers_column, java_client
from engine.sinks.writer import MultiTableWriter

__all__ = [
    "OPENING",
    "asks_real_time",
    "await_sources",
    "drain",
    "interval_s",
    "is_direct",
    "spark_trigger",
    "start_query",
    "stop_between_batches",
]


def _batch_interval(spec: QuerySpec) -> Duration | None:
    """Time between the query's micro-batches (None: one as soon as the last ends). Outside
    Real-Time Mode, which reads only Spark's Kafka source and writes only its Kafka sink, a
    real-time trigger is the nearest thing: batches back to back."""
    if not spec.trigger or spec.trigger.startswith(REAL_TIME):
        return None
    return trigger_duration(spec.trigger)


def interval_s(spec: QuerySpec) -> float:
    """Seconds between the query's micro-batches of a socket source (0: one after another)."""
    interval = _batch_interval(spec)
    return interval.timedelta.total_seconds() if interval else 0.0


def spark_trigger(spec: QuerySpec, once: bool, *, real_time: bool = False) -> dict[str, object]:
    """Spark's trigger for the query; `real_time` when the query can run in Real-Time Mode."""
    if once:
        return {"availableNow": True}
    if real_time and spec.trigger and spec.trigger.startswith(REAL_TIME):
        return {"realTime": trigger_duration(spec.trigger).trigger_text}
    interval = _batch_interval(spec)
    return {"processingTime": interval.trigger_text if interval else "0 seconds"}


def asks_real_time(spec: QuerySpec) -> bool:
    """Whether the query asks for Real-Time Mode (it then writes only topics)."""
    return (spec.trigger or "").startswith(REAL_TIME)


def is_direct(writer: MultiTableWriter) -> bool:
    """A query that writes only topics, with Spark's Kafka sink: it needs no foreachBatch."""
    return all(isinstance(s, SparkTopicSink) for s in writer.sinks)


def _start_direct(
    spark: SparkSession, spec: QuerySpec, writer: MultiTableWriter, trigger: dict[str, object]
) -> StreamingQuery:
    """Write the query's topics straight to Spark's Kafka sink (no foreachBatch), so it can
    run in Real-Time Mode. Messages carry the headers pipeline and query (a batch id is not
    known to a row here)."""
    headers = headers_column({"pipeline": writer.pipeline, "query": writer.query})
    parts = [
        spark.table(view).select(
            F.col("key").cast("string").alias("key"),
            F.col("value").cast("string").alias("value"),
            F.lit(sink.topic).alias("topic"),  # Spark's Kafka sink routes rows by this column
        )
        for sink, view in zip(writer.sinks, spec.topics.values(), strict=True)
    ]
    return (
        reduce(DataFrame.unionByName, parts)
        .withColumn("headers", headers)
        .writeStream.queryName(spec.name)
        .format("kafka")
        .options(**java_client(writer.sinks[0].client))  # type: ignore[union-attr]
        # Real-Time Mode runs update mode; the query is stateless, so it is the same as append.
        .outputMode("update")
        .option("checkpointLocation", str(writer.checkpoint))
        .trigger(**trigger)
        .start()
    )


def start_query(
    spark: SparkSession,
    spec: QuerySpec,
    writer: MultiTableWriter,
    once: bool,
    *,
    stream: DataFrame | None = None,
    real_time: bool = False,
) -> StreamingQuery:
    """Start the query: `stream` (its streaming part, `stream_rows`) into its writer as
    foreachBatch, or straight to Kafka (`is_direct`); `real_time` allows Real-Time Mode (the
    source is Spark's Kafka connector)."""
    # Each query gets its own FAIR pool so a slow query does not hold back a fast one. A pool
    # is a SparkContext's local property: over Spark Connect the server's scheduler decides.
    if not is_connect(spark):
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", spec.pool or spec.name)
    if is_direct(writer):
        query = _start_direct(spark, spec, writer, spark_trigger(spec, once, real_time=real_time))
    else:
        assert stream is not None
        query = (
            stream.writeStream.queryName(spec.name)
            .foreachBatch(writer)
            .outputMode(spec.output_mode)
            .option("checkpointLocation", str(writer.checkpoint))
            .trigger(**spark_trigger(spec, once))
            .start()
        )
    await_sources(query)
    return query


#: Spark's status messages of a query that has not opened its sources yet.
OPENING = ("Initializing StreamExecution", "Initializing sources")


def await_sources(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    """Return once the query has opened its sources, so queries open theirs one at a time.

    A Python data source keeps one environment map for all its readers, and each query's
    reader adds to it without a lock when it opens (Spark's PythonStreamingSourceRunner).
    Two queries opening the same source at once can leave the map's size wrong, and every
    task that reads the source then fails to deserialize (`OptionalDataException`)."""
    _wait_while(query, lambda status: status["message"] in OPENING, timeout_s)


def stop_between_batches(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    """Stop once the batch under way has ended (at once when none is).

    Not "wait until no trigger is active": batches that follow back to back (a processing-time
    timeout runs one per trigger) never leave such a moment, and the stop would wait for its
    timeout. A batch just starting when the stop lands is interrupted before it commits and
    runs again on the next start."""
    running = _last_batch(query)
    _wait_while(
        query,
        lambda status: status["isTriggerActive"] and _last_batch(query) == running,
        timeout_s,
    )
    query.stop()


def _last_batch(query: StreamingQuery) -> int | None:
    last = query.lastProgress
    return None if last is None else last.batchId


def drain(query: StreamingQuery, interval_s: float, timeout_s: float = 120.0) -> None:
    """Process what a socket delivered before now (it is in no checkpoint): wait until a batch
    planned after this call has ended, or until a trigger after it found nothing.

    Not "while a trigger is active": when batches take longer than the trigger interval the
    next starts at once, a trigger is nearly always active, and the stop waited its whole
    timeout. Not processAllAvailable(): a server that keeps sending would hold the stop for
    ever. The caller then lets the batch under way, if any, end (`stop_between_batches`)."""
    since = datetime.now(UTC)
    # A trigger that finds nothing posts no progress; its status says so once it has run.
    # One interval after the stop a trigger has started after it; the second is for a
    # machine too busy to start it on time.
    idle_after = time.monotonic() + interval_s + 1.0

    def pending(status: dict[str, Any]) -> bool:
        last = query.lastProgress
        # A progress's timestamp is its trigger's start: its offsets were planned after it.
        if last is not None and datetime.fromisoformat(last.timestamp) >= since:
            return False
        if time.monotonic() < idle_after:
            return True
        return status["isTriggerActive"] or status["isDataAvailable"]

    _wait_while(query, pending, timeout_s)


def _wait_while(
    query: StreamingQuery, busy: Callable[[dict[str, Any]], bool], timeout_s: float
) -> None:
    """Poll the query's status until `busy` is false of it, the query stops, or time is up."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and busy(query.status) and time.monotonic() < deadline:
        time.sleep(0.02)
