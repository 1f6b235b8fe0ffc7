"""Runs a pipeline: build its views, start one streaming query per query spec, stop cleanly."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from engine.batch_writer import MultiTableWriter, tag_views
from engine.build import Plan, build_views, spark_error_line
from engine.pipeline import QuerySpec
from engine.progress import ProgressListener
from engine.sinks import DeltaSink

__all__ = ["RunOptions", "RunResult", "run_pipeline", "stop_on_signals"]


@dataclass(frozen=True)
class RunOptions:
    """How to run: `once` processes what is there and exits; otherwise until a signal."""

    lake: Path
    checkpoints: Path | None = None
    once: bool = False
    input_path: str | None = None
    quiet: bool = False

    @property
    def checkpoint_root(self) -> Path:
        """Default `<lake>/_checkpoints`; each pipeline and query has a folder below."""
        return self.checkpoints or self.lake / "_checkpoints"


@dataclass
class RunResult:
    """Per query: the writer (rows per table) and the listener's totals."""

    writers: dict[str, MultiTableWriter] = field(default_factory=dict)
    listener: ProgressListener | None = None

    def report(self, out: TextIO) -> None:
        """Print rows per table and, where a query deduplicates, the input-line accounting."""
        for name, writer in self.writers.items():
            t = self.listener.totals.get(name) if self.listener else None
            tables = ", ".join(f"{k} {v:,}" for k, v in writer.written.items())
            out.write(f"query {name}: {t.batches if t else 0} batches; rows written: {tables}\n")
            # The query that writes quarantine sees every input line, so it can account for them.
            if t and "quarantine" in writer.rows:
                quarantined = writer.rows["quarantine"]
                missing = t.source_rows - (t.accepted + quarantined + t.duplicates + t.late)
                out.write(
                    f"query {name}: input lines {t.source_rows:,} = {t.accepted:,} events + "
                    f"{quarantined:,} quarantined + {t.duplicates:,} duplicates dropped + "
                    f"{t.late:,} late dropped"
                    + (f" (NOT ACCOUNTED FOR: {missing:,})" if missing else "")
                    + "\n"
                )


def _trigger(spec: QuerySpec, once: bool) -> dict[str, object]:
    if once:
        return {"availableNow": True}
    return {"processingTime": spec.trigger or "0 seconds"}


def _start(
    spark: SparkSession, plan: Plan, spec: QuerySpec, opts: RunOptions
) -> tuple[StreamingQuery, MultiTableWriter]:
    pipeline, tables = plan.pipeline, plan.tables
    views = [(tables[t], v, spark.table(v)) for t, v in spec.sinks.items()]
    checkpoint = opts.checkpoint_root / pipeline.name / spec.name
    sinks = [DeltaSink(tables[t], opts.lake) for t in spec.sinks]
    for sink in sinks:
        sink.open()  # tables exist, with their schema, before the first batch
    writer = MultiTableWriter(
        pipeline=pipeline.name, query=spec.name, sinks=sinks, checkpoint=checkpoint
    )
    # Each query gets its own FAIR pool so a slow query does not hold back a fast one.
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", spec.pool or spec.name)
    query = (
        tag_views(views)
        .writeStream.queryName(spec.name)
        .foreachBatch(writer)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**_trigger(spec, opts.once))
        .start()
    )
    return query, writer


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT/SIGTERM, for `run_pipeline(stop=...)`."""
    event = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: event.set())
    return event


def _stop_between_batches(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def _raise_failures(queries: Mapping[str, StreamingQuery]) -> None:
    for name, q in queries.items():
        err = q.exception()
        if err is not None:
            raise RuntimeError(f"query {name} failed: {spark_error_line(err)}")


def run_pipeline(
    spark: SparkSession,
    plan: Plan,
    opts: RunOptions,
    *,
    stop: threading.Event | None = None,
    out: TextIO = sys.stdout,
) -> RunResult:
    """Run until done (`once`) or until `stop` is set; returns what was written."""
    stop = stop or threading.Event()
    pipeline = plan.pipeline
    build_views(spark, plan, input_path=opts.input_path)
    listener = ProgressListener(out, quiet=opts.quiet)
    listener.branches = {q.name: len(q.sinks) for q in pipeline.queries}
    spark.streams.addListener(listener)
    result = RunResult(listener=listener)
    queries: dict[str, StreamingQuery] = {}
    try:
        for spec in pipeline.queries:
            queries[spec.name], result.writers[spec.name] = _start(spark, plan, spec, opts)
        # --once ends when every query has drained its input; a run ends when any query fails.
        done = all if opts.once else any
        while not stop.is_set() and not done(not q.isActive for q in queries.values()):
            stop.wait(0.2)
        for q in queries.values():
            _stop_between_batches(q)
        _raise_failures(queries)
        for name, q in queries.items():
            if q.lastProgress:
                listener.wait_for(name, q.lastProgress["batchId"])
    finally:
        for q in queries.values():
            if q.isActive:
                q.stop()
        spark.streams.removeListener(listener)
    return result
