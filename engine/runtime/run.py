"""Runs a pipeline: build its views, deploy its tables, start one streaming query per query
spec (engine/runtime/query_control.py), restart or raise what fails
(engine/runtime/retries.py), stop cleanly, and log it all (engine/runtime/events.py)."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from engine.definitions.expectations import by_action
from engine.definitions.kafka_settings import librdkafka_settings
from engine.definitions.pipeline import QuerySpec
from engine.errors import UserError, first_line
from engine.lake.batch_records import clear_records
from engine.lake.guard import release_table
from engine.plan import Plan
from engine.plan.deployment import Deployment, plan_deployment, set_aside
from engine.plan.fingerprint import PINNED_CONF, write_fingerprint
from engine.runtime.batch_views import BatchViews
from engine.runtime.connect import server_gone
from engine.runtime.due_timers import queue_due_timers
from engine.runtime.events import RunRecorder, versions
from engine.runtime.progress import ProgressListener
from engine.runtime.query_control import (
    asks_real_time,
    drain,
    interval_s,
    is_direct,
    start_query,
    stop_between_batches,
)
from engine.runtime.result import RunResult
from engine.runtime.retries import broker_wait, failure, report_waits, schedule_retries
from engine.runtime.session import default_writer
from engine.runtime.views import build_views, stream_rows
from engine.sinks.delta import DeltaSink
from engine.sinks.kafka import SparkTopicSink, TopicSink, check_broker
from engine.sinks.spark_delta import SparkDeltaSink
from engine.sinks.writer import MultiTableWriter
from engine.sources.streams import Connector, kafka_connector

__all__ = ["RunOptions", "RunResult", "run_pipeline"]

Writer = Literal["spark", "delta-rs"]


@dataclass(frozen=True)
class RunOptions:
    """How to run: `once` processes what is there and exits; otherwise until a signal."""

    lake: Path
    checkpoints: Path | None = None
    once: bool = False
    input_path: str | None = None
    quiet: bool = False
    #: Who writes the Delta tables: Spark (delta-spark, on the executors) or delta-rs (on the
    #: driver); None picks Spark when the session has Delta, else delta-rs.
    writer: Writer | None = None
    #: Write tables that another checkpoint of the same query wrote (engine/lake/guard.py).
    new_checkpoint: bool = False
    #: Tables to rebuild from the input with new checkpoints (empty: all of the pipeline's).
    full_refresh: tuple[str, ...] | None = None

    @property
    def checkpoint_root(self) -> Path:
        """Default `<lake>/_checkpoints`; each pipeline and query has a folder below."""
        return self.checkpoints or self.lake / "_checkpoints"


def _writer_kind(spark: SparkSession, opts: RunOptions) -> Writer:
    if opts.writer == "spark" and default_writer(spark) != "spark":
        raise UserError(
            "--conf lake.writer=spark: this Spark session has no Delta Lake "
            "(the delta-spark jar is not in .jars; `make` fetches it)"
        )
    return opts.writer or default_writer(spark)


def _table_sinks(
    spark: SparkSession, plan: Plan, opts: RunOptions, kind: Writer
) -> dict[str, DeltaSink]:
    """One sink per table of the pipeline, written by Spark or by delta-rs."""
    if kind == "spark":
        return {t: SparkDeltaSink(plan.tables[t], opts.lake, spark) for t in plan.pipeline.tables}
    return {t: DeltaSink(plan.tables[t], opts.lake) for t in plan.pipeline.tables}


def _deploy(
    deployment: Deployment, sinks: Mapping[str, DeltaSink], plan: Plan, out: TextIO
) -> None:
    """Carry out what the deployment decided, before any query starts: set aside the
    checkpoints of rebuilt queries, then empty their tables, then create or evolve every
    table, then keep each query's fingerprint beside its checkpoint."""
    pipeline = plan.pipeline.name
    rebuilt = [q for q in deployment.queries.values() if q.verb == "rebuild"]
    for query in rebuilt:
        # First: a crash after this leaves a new checkpoint that the lake guard refuses to
        # resume on the old rows, never the old checkpoint resuming on emptied tables.
        moved = set_aside(query.checkpoint)
        if moved:
            out.write(f"query {query.name}: checkpoint set aside as {moved}\n")
    for action in deployment.tables.values():
        if action.verb == "rebuild":
            sink = sinks[action.name]
            sink.rebuild(pipeline, shared=action.shared)
            release_table(sink.path, pipeline=pipeline)
            out.write(f"{action.line()}\n")
    for action in deployment.tables.values():
        sinks[action.name].prepare()
        if action.verb == "evolve":
            out.write(f"{action.line()}\n")
    for query in deployment.queries.values():
        out.writelines(f"{note}\n" for note in query.notes)
        write_fingerprint(query.checkpoint, query.fingerprint)
    out.writelines(f"{note}\n" for note in deployment.notes)


def _writer(
    plan: Plan,
    spec: QuerySpec,
    opts: RunOptions,
    connector: Connector = "python",
    *,
    sinks: Mapping[str, DeltaSink],
    views: BatchViews,
) -> MultiTableWriter:
    pipeline = plan.pipeline
    # Topics go the way the source reads Kafka: Spark's connector or confluent-kafka.
    topic_sink = SparkTopicSink if connector == "native" else TopicSink
    return MultiTableWriter(
        pipeline=pipeline.name,
        query=spec.name,
        sinks=[
            *(sinks[t] for t in spec.sinks),
            *(topic_sink(t, pipeline.kafka, where=pipeline.path) for t in spec.topics),
        ],
        checkpoint=opts.checkpoint_root / pipeline.name / spec.name,
        views=views,
    )


def run_pipeline(
    spark: SparkSession,
    plan: Plan,
    opts: RunOptions,
    *,
    stop: threading.Event | None = None,
    out: TextIO = sys.stdout,
) -> RunResult:
    """Run until done (`once`) or until `stop` is set; returns what was written.

    Without `once`, a query stopped by an unreachable Kafka broker is restarted from its
    checkpoint every RETRY_SECONDS, so the run resumes when the broker is back.
    """
    stop = stop or threading.Event()
    pipeline = plan.pipeline
    uses_kafka = pipeline.source.kind == "kafka" or any(q.topics for q in pipeline.queries)
    connector = kafka_connector(spark, pipeline.source) if uses_kafka else "python"
    if uses_kafka and connector == "python":
        # librdkafka is the pipeline's client: a setting it refuses is the user's to mend (the
        # native connector's checks leave such settings out, engine/definitions/kafka_settings.py).
        librdkafka_settings(pipeline.kafka, strict=True)
    # Real-Time Mode reads only Spark's Kafka source.
    real_time = connector == "native" and pipeline.source.kind == "kafka" and not opts.input_path
    if real_time and not opts.once and any(asks_real_time(q) for q in pipeline.queries):
        # Spark refuses maxOffsetsPerTrigger in Real-Time Mode, and the queries share one
        # source view: a continuous run with a real-time query reads without a batch cap.
        options = {k: v for k, v in pipeline.source.options.items() if k != "maxRecordsPerBatch"}
        if "maxRecordsPerBatch" in pipeline.source.options and not opts.quiet:
            out.write(
                "source.maxRecordsPerBatch: not used by a continuous run with a real-time query "
                "(Spark refuses a batch cap in Real-Time Mode); --once keeps it\n"
            )
        pipeline = replace(pipeline, source=replace(pipeline.source, options=options))
        plan = replace(plan, pipeline=pipeline)
    kind = _writer_kind(spark, opts)
    deployment = plan_deployment(
        plan,
        lake=opts.lake,
        checkpoint_root=opts.checkpoint_root,
        conf={key: spark.conf.get(key) for key in PINNED_CONF},
        new_checkpoint=opts.new_checkpoint,
        full_refresh=opts.full_refresh,
        input_path=opts.input_path,
    )
    deployment.check()  # before anything in the lake or the checkpoints changes
    build_views(spark, plan, input_path=opts.input_path, lake=opts.lake)
    topics = sorted({t for q in pipeline.queries for t in q.topics})
    if topics and (connector == "native" or opts.once):
        # Spark's Kafka sink would wait 60 s a batch for a broker or topic that is not there,
        # then fail with a Java error; --once ends here as it does for an unreachable source.
        check_broker(pipeline.kafka, topics, where=pipeline.path, by_spark=connector == "native")
    sinks = _table_sinks(spark, plan, opts, kind)
    rules = {name: by_action(s.expectations) for name, s in plan.steps.items() if s.expectations}
    recorder = RunRecorder(opts.lake, pipeline.name, out, rules=rules)
    listener = ProgressListener(out, quiet=opts.quiet, recorder=recorder)
    # Each streaming output of a query is a branch that reads the source itself.
    listener.branches = {q: len(p.outputs) for q, p in plan.queries.items()}
    result = RunResult(listener=listener, plan=plan, records=recorder.records)
    specs = {q.name: q for q in pipeline.queries}
    streams: dict[str, DataFrame] = {}
    for name, spec in specs.items():
        views = BatchViews(plan, plan.queries[name])
        writer = result.writers[name] = _writer(
            plan, spec, opts, connector, sinks=sinks, views=views
        )
        if not is_direct(writer):
            streams[name] = stream_rows(spark, plan, plan.queries[name])
            views.check(spark, streams[name].schema, writer.sinks)
    # Only now does the lake change: a view that does not fit its table stopped the run above.
    _deploy(deployment, sinks, plan, out)
    recorder.writers = result.writers
    # The log says when a run rebuilt or evolved a table: `history` shows only a write.
    changes = [a.line() for a in deployment.tables.values() if a.verb in ("rebuild", "evolve")]
    changes += [note for q in deployment.queries.values() for note in q.notes]
    recorder.start(_run_details(spark, plan, opts, kind), changes=changes)
    spark.streams.addListener(listener)
    queries: dict[str, StreamingQuery] = {}
    retry_at: dict[str, float] = {}
    restarts: Counter[str] = Counter()
    watch = broker_wait(plan, connector, once=opts.once, input_path=opts.input_path)
    # Spark's Kafka client fails a batch whose broker went away with a Java timeout; the
    # Python connector raises KafkaUnavailable itself.
    kafka_servers = pipeline.kafka.get("bootstrap.servers", "") if connector == "native" else ""
    view_files = {name.lower(): step.path for name, step in plan.steps.items()}
    status, message = ("finished" if opts.once else "stopped"), None
    gone: UserError | None = None
    try:
        for name, spec in specs.items():
            clear_records(result.writers[name].checkpoint)
            if opts.once:  # a restart after a stop that left due timers waiting
                queue_due_timers(result.writers[name].checkpoint)
            queries[name] = start_query(
                spark,
                spec,
                result.writers[name],
                opts.once,
                stream=streams.get(name),
                real_time=real_time,
            )
        while not stop.is_set():
            schedule_retries(
                queries,
                retry_at,
                restarts,
                once=opts.once,
                kafka_servers=kafka_servers,
                view_files=view_files,
                out=out,
                recorder=recorder,
            )
            if watch:
                report_waits(watch, queries, out=out, recorder=recorder)
            for name, due in list(retry_at.items()):
                if time.monotonic() >= due:
                    del retry_at[name]
                    result.writers[name].restart()
                    if opts.once:  # the query may have stopped between a batch and its timers
                        queue_due_timers(result.writers[name].checkpoint)
                    queries[name] = start_query(
                        spark,
                        specs[name],
                        result.writers[name],
                        opts.once,
                        stream=streams.get(name),
                        real_time=real_time,
                    )
            # --once ends when every query has drained its input; a run ends when any query
            # ends (a continuous query only ends by failing, handled above).
            inactive = [not q.isActive for n, q in queries.items() if n not in retry_at]
            if (all if opts.once else any)(inactive) and not retry_at:
                break
            stop.wait(0.2)
        else:
            # A --once run stopped before its input was all read did not do what it was
            # asked: a scheduler and `log` must tell it from one that did.
            if opts.once:
                result.cut_short = True
                status, message = "stopped", "before all input was read"
        for name, q in queries.items():
            if pipeline.source.kind == "socket":
                drain(q, interval_s(specs[name]))
            if is_direct(result.writers[name]):
                # A Real-Time Mode batch never ends by itself; its Kafka writes are at least
                # once, and Spark counts them only when a batch ends.
                if q.isActive and q.status["isTriggerActive"]:
                    result.cut.add(name)
                q.stop()
            else:
                stop_between_batches(q)
        for name, q in queries.items():
            failed = failure(name, q, kafka_servers, view_files)
            if failed:
                raise failed
        for name, q in queries.items():
            # Not the last progress's batch id: a trigger that found nothing to do has one
            # too, but posts no progress event, so waiting for it would always time out.
            listener.wait_for_end(str(q.runId))
            writer = result.writers[name]
            totals = listener.totals.get(name)
            if is_direct(writer) and totals:  # no foreachBatch counted its rows: Spark did
                topics = "kafka:" + ",".join(specs[name].topics)
                result.direct[name] = Counter({topics: totals.sink_rows})
    except BaseException as err:
        gone = server_gone(spark, err)
        status, message = "failed", first_line(gone or err)
        recorder.error(None, message)
        if gone:
            raise gone from None
        raise
    finally:
        if gone is None:  # a server that went away took the queries and the listener with it
            for q in queries.values():
                if q.isActive:
                    q.stop()
            spark.streams.removeListener(listener)
        written = sum((result.written(name) for name in result.writers), Counter())
        recorder.stop(status=status, message=message, rows=written)
    return result


def _run_details(spark: SparkSession, plan: Plan, opts: RunOptions, kind: Writer) -> dict:
    """What the event log keeps of a run's start: how it runs, settings and versions."""
    return {
        "run": {
            "once": opts.once,
            "writer": kind,
            # The folder itself, not as typed: a resumed run's hint names it (engine/plan).
            "input": (
                str(plan.pipeline.input_folder(opts.input_path).resolve())
                if opts.input_path or plan.pipeline.source.kind == "files"
                else plan.pipeline.source.kind
            ),
            "checkpoints": str(opts.checkpoint_root),
            "queries": ",".join(plan.queries),
        },
        "settings": dict(plan.pipeline.settings),
        "source": dict(plan.pipeline.source.options),
        "spark": {key: spark.conf.get(key) for key in PINNED_CONF},
        "versions": versions(),
    }
