"""Runs a pipeline: build its views, start one streaming query per query spec, stop cleanly."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path
from typing import Any, Literal, TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from engine.definitions.durations import Duration
from engine.definitions.expectations import by_action
from engine.definitions.kafka_settings import librdkafka_settings
from engine.definitions.pipeline import REAL_TIME, QuerySpec, trigger_duration
from engine.errors import KafkaUnavailable, UserError, first_line
from engine.lake.batch_records import RunRecords, clear_records
from engine.lake.guard import release_table
from engine.plan import Plan
from engine.plan.deployment import Deployment, plan_deployment, set_aside
from engine.plan.fingerprint import PINNED_CONF, write_fingerprint
from engine.runtime.batch_views import BatchViews
from engine.runtime.broker_wait import BrokerWait
from engine.runtime.connect import is_connect
from engine.runtime.due_timers import queue_due_timers
from engine.runtime.errors import WorkerStartFailed, as_user_error
from engine.runtime.events import RunRecorder, versions
from engine.runtime.expectations import DROPPED, ROWS
from engine.runtime.progress import ProgressListener, QueryTotals
from engine.runtime.session import default_writer
from engine.runtime.views import build_views, stream_rows
from engine.sinks.delta import DeltaSink
from engine.sinks.kafka import (
    SparkTopicSink,
    TopicSink,
    check_broker,
    headers_column,
    java_client,
)
from engine.sinks.spark_delta import SparkDeltaSink
from engine.sinks.writer import MultiTableWriter
from engine.sources.kafka_topic import KafkaOptions, kafka_options
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


@dataclass
class RunResult:
    """Per query: the writer (rows per table) and the listener's totals."""

    writers: dict[str, MultiTableWriter] = field(default_factory=dict)
    listener: ProgressListener | None = None
    #: The plan run: which views have expectations, and where they sit.
    plan: Plan | None = None
    #: Queries writing straight to Kafka that the stop cut in the middle of a batch.
    cut: set[str] = field(default_factory=set)
    #: Rows per topic of the queries that write straight to Kafka (Spark counted them).
    direct: dict[str, Counter[str]] = field(default_factory=dict)
    #: What the writers recorded per batch (engine/lake/batch_records.py).
    records: RunRecords = field(default_factory=RunRecords)

    def _totals(self, query: str) -> tuple[Counter[str], Counter[str]]:
        if query in self.direct:  # Spark's count: every row it carried, it wrote
            return self.direct[query], self.direct[query]
        return self.records.totals(self.writers[query].checkpoint)

    def rows(self, query: str) -> Counter[str]:
        """Rows the query's batches carried in this run, per table or topic."""
        return self._totals(query)[0]

    def written(self, query: str) -> Counter[str]:
        """Rows the query committed in this run, per table or topic."""
        return self._totals(query)[1]

    def report(self, out: TextIO) -> None:
        """Print rows per table and, where a query deduplicates, the input-line accounting."""
        for name, writer in self.writers.items():
            t = self.listener.totals.get(name) if self.listener else None
            written = self.written(name)
            # In the order the writer writes them (topics first).
            sinks = [s.name for s in sorted(writer.sinks, key=lambda s: s.order)]
            ordered = [k for k in sinks if k in written] + [k for k in written if k not in sinks]
            tables = ", ".join(f"{k} {written[k]:,}" for k in ordered) or "none"
            out.write(f"query {name}: {t.batches if t else 0} batches; rows written: {tables}\n")
            # The query that writes quarantine sees every input line, so it can account for them.
            rejects = [s.name for s in writer.sinks if s.quarantine]
            if t:
                self._report_checks(name, t, out)
            if t and t.deduplicates and rejects:
                carried = self.rows(name)
                quarantined = sum(carried[r] for r in rejects)
                # Rows dropped below the deduplication were already counted as events.
                after = self.plan.queries[name].drops_after_dedup if self.plan else ()
                quarantined -= sum(t.expectations.get(v, {}).get(DROPPED, 0) for v in after)
                missing = t.source_rows - (t.accepted + quarantined + t.duplicates + t.late)
                out.write(
                    f"query {name}: input lines {t.source_rows:,} = {t.accepted:,} events + "
                    f"{quarantined:,} quarantined + {t.duplicates:,} duplicates dropped + "
                    f"{t.late:,} late dropped"
                    + (f" (NOT ACCOUNTED FOR: {missing:,})" if missing else "")
                    + "\n"
                )
            elif t and t.late:
                out.write(f"query {name}: {t.late:,} late dropped (rows behind the watermark)\n")
        for name in sorted(self.cut):
            out.write(
                f"query {name}: the stop cut its running batch short; the messages that batch "
                "sent are not counted above, and a restart sends them again\n"
            )
        for totals in self.listener.totals.values() if self.listener else ():
            for handler, counts in totals.handler_counts.items():
                counted = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
                out.write(f"handler {handler}: {counted}\n")

    def _report_checks(self, query: str, totals: QueryTotals, out: TextIO) -> None:
        """One line per view with expectations: rows checked and dropped, and each rule."""
        for view, counts in totals.expectations.items():
            step = self.plan.steps.get(view) if self.plan else None
            if step is None:
                continue
            rules = ", ".join(
                f"{e.name} {counts.get(e.name, 0):,} broken ({e.action})" for e in step.expectations
            )
            dropped = f", {counts[DROPPED]:,} dropped" if DROPPED in counts else ""
            out.write(
                f"query {query}: expectations of {view}: {counts.get(ROWS, 0):,} rows"
                f"{dropped}; {rules}\n"
            )


def _batch_interval(spec: QuerySpec) -> Duration | None:
    """Time between the query's micro-batches (None: one as soon as the last ends). Outside
    Real-Time Mode, which reads only Spark's Kafka source and writes only its Kafka sink, a
    real-time trigger is the nearest thing: batches back to back."""
    if not spec.trigger or spec.trigger.startswith(REAL_TIME):
        return None
    return trigger_duration(spec.trigger)


def _interval_s(spec: QuerySpec) -> float:
    """Seconds between the query's micro-batches of a socket source (0: one after another)."""
    interval = _batch_interval(spec)
    return interval.timedelta.total_seconds() if interval else 0.0


def _trigger(spec: QuerySpec, once: bool, *, real_time: bool = False) -> dict[str, object]:
    """Spark's trigger for the query; `real_time` when the query can run in Real-Time Mode."""
    if once:
        return {"availableNow": True}
    if real_time and spec.trigger and spec.trigger.startswith(REAL_TIME):
        return {"realTime": trigger_duration(spec.trigger).trigger_text}
    interval = _batch_interval(spec)
    return {"processingTime": interval.trigger_text if interval else "0 seconds"}


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


def _real_time(spec: QuerySpec) -> bool:
    """Whether the query asks for Real-Time Mode (it then writes only topics)."""
    return (spec.trigger or "").startswith(REAL_TIME)


def _is_direct(writer: MultiTableWriter) -> bool:
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


def _start(
    spark: SparkSession,
    spec: QuerySpec,
    writer: MultiTableWriter,
    once: bool,
    *,
    stream: DataFrame | None = None,
    real_time: bool = False,
) -> StreamingQuery:
    """Start the query: `stream` (its streaming part, `stream_rows`) into its writer as
    foreachBatch, or straight to Kafka (`_is_direct`); `real_time` allows Real-Time Mode (the
    source is Spark's Kafka connector)."""
    # Each query gets its own FAIR pool so a slow query does not hold back a fast one. A pool
    # is a SparkContext's local property: over Spark Connect the server's scheduler decides.
    if not is_connect(spark):
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", spec.pool or spec.name)
    if _is_direct(writer):
        query = _start_direct(spark, spec, writer, _trigger(spec, once, real_time=real_time))
    else:
        assert stream is not None
        query = (
            stream.writeStream.queryName(spec.name)
            .foreachBatch(writer)
            .outputMode(spec.output_mode)
            .option("checkpointLocation", str(writer.checkpoint))
            .trigger(**_trigger(spec, once))
            .start()
        )
    _await_sources(query)
    return query


#: Spark's status messages of a query that has not opened its sources yet.
_OPENING = ("Initializing StreamExecution", "Initializing sources")


def _await_sources(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    """Return once the query has opened its sources, so queries open theirs one at a time.

    A Python data source keeps one environment map for all its readers, and each query's
    reader adds to it without a lock when it opens (Spark's PythonStreamingSourceRunner).
    Two queries opening the same source at once can leave the map's size wrong, and every
    task that reads the source then fails to deserialize (`OptionalDataException`)."""
    _wait_while(query, lambda status: status["message"] in _OPENING, timeout_s)


def _stop_between_batches(query: StreamingQuery, timeout_s: float = 120.0) -> None:
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


def _drain(query: StreamingQuery, interval_s: float, timeout_s: float = 120.0) -> None:
    """Process what a socket delivered before now (it is in no checkpoint): wait until a batch
    planned after this call has ended, or until a trigger after it found nothing.

    Not "while a trigger is active": when batches take longer than the trigger interval the
    next starts at once, a trigger is nearly always active, and the stop waited its whole
    timeout. Not processAllAvailable(): a server that keeps sending would hold the stop for
    ever. The caller then lets the batch under way, if any, end (`_stop_between_batches`)."""
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


RETRY_SECONDS = 5.0
# How often in a row a run restarts a query whose Python worker did not start in time.
WORKER_RESTARTS = 3


def _failure(
    name: str, query: StreamingQuery, kafka_servers: str, view_files: Mapping[str, Path]
) -> Exception | None:
    """A stopped query's error, as one line (KafkaUnavailable when the broker was away)."""
    err = query.exception()
    if err is None:
        return None
    prefix = f"query {name}: "
    return as_user_error(err, prefix, kafka_servers=kafka_servers, views=view_files)


def _schedule_retries(
    queries: Mapping[str, StreamingQuery],
    retry_at: dict[str, float],
    restarts: Counter[str],
    *,
    once: bool,
    kafka_servers: str,
    view_files: Mapping[str, Path],
    out: TextIO,
    recorder: RunRecorder,
) -> None:
    """Raise a stopped query's error, unless it can be run again: a Python worker that did not
    start in time (a few times in a row), or the broker away in a continuous run. Then say so
    and schedule its restart from its checkpoint."""
    for name, q in queries.items():
        if name in restarts and q.isActive and q.lastProgress is not None:
            del restarts[name]  # its workers started: the count is of restarts in a row
        failed = (
            None if q.isActive or name in retry_at else _failure(name, q, kafka_servers, view_files)
        )
        if failed is None:
            continue
        if isinstance(failed, WorkerStartFailed) and restarts[name] < WORKER_RESTARTS:
            restarts[name] += 1
            said = f"{failed}; restarting it ({restarts[name]} of {WORKER_RESTARTS})"
        elif isinstance(failed, KafkaUnavailable) and not once:
            said = f"{failed}; retrying every {RETRY_SECONDS:g} s"
        else:
            raise failed
        recorder.error(name, said)
        out.write(said + "\n")
        out.flush()
        retry_at[name] = time.monotonic() + RETRY_SECONDS


def _broker_wait(plan: Plan, opts: RunOptions, connector: Connector) -> BrokerWait | None:
    """A watch on Spark's Kafka source in a continuous run, which its client would otherwise
    spend waiting for a broker that went away without a word (the Python source fails)."""
    source = plan.pipeline.source
    if opts.once or opts.input_path or connector != "native" or source.kind != "kafka":
        return None
    options = KafkaOptions.parse(kafka_options(source, plan.pipeline.kafka))
    return BrokerWait(options.servers, options.timeout_s)


def _report_waits(
    watch: BrokerWait,
    queries: Mapping[str, StreamingQuery],
    *,
    out: TextIO,
    recorder: RunRecorder,
) -> None:
    """Say which queries started or stopped waiting on the broker."""
    for name, q in queries.items():
        news = watch.observe(name, q.status["message"], time.monotonic()) if q.isActive else None
        if news:
            recorder.error(name, news.line, status=news.status)
            out.write(news.line + "\n")
            out.flush()


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
    if real_time and not opts.once and any(_real_time(q) for q in pipeline.queries):
        # Spark refuses maxOffsetsPerTrigger in Real-Time Mode, and the queries share one
        # source view: a continuous run with a real-time query reads without a batch cap.
        options = {k: v for k, v in pipeline.source.options.items() if k != "maxRecordsPerBatch"}
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
        if not _is_direct(writer):
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
    watch = _broker_wait(plan, opts, connector)
    # Spark's Kafka client fails a batch whose broker went away with a Java timeout; the
    # Python connector raises KafkaUnavailable itself.
    kafka_servers = pipeline.kafka.get("bootstrap.servers", "") if connector == "native" else ""
    view_files = {name.lower(): step.path for name, step in plan.steps.items()}
    status, message = ("finished" if opts.once else "stopped"), None
    try:
        for name, spec in specs.items():
            clear_records(result.writers[name].checkpoint)
            if opts.once:  # a restart after a stop that left due timers waiting
                queue_due_timers(result.writers[name].checkpoint)
            queries[name] = _start(
                spark,
                spec,
                result.writers[name],
                opts.once,
                stream=streams.get(name),
                real_time=real_time,
            )
        while not stop.is_set():
            _schedule_retries(
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
                _report_waits(watch, queries, out=out, recorder=recorder)
            for name, due in list(retry_at.items()):
                if time.monotonic() >= due:
                    del retry_at[name]
                    result.writers[name].restart()
                    if opts.once:  # the query may have stopped between a batch and its timers
                        queue_due_timers(result.writers[name].checkpoint)
                    queries[name] = _start(
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
        for name, q in queries.items():
            if pipeline.source.kind == "socket":
                _drain(q, _interval_s(specs[name]))
            if _is_direct(result.writers[name]):
                # A Real-Time Mode batch never ends by itself; its Kafka writes are at least
                # once, and Spark counts them only when a batch ends.
                if q.isActive and q.status["isTriggerActive"]:
                    result.cut.add(name)
                q.stop()
            else:
                _stop_between_batches(q)
        for name, q in queries.items():
            failed = _failure(name, q, kafka_servers, view_files)
            if failed:
                raise failed
        for name, q in queries.items():
            # Not the last progress's batch id: a trigger that found nothing to do has one
            # too, but posts no progress event, so waiting for it would always time out.
            listener.wait_for_end(str(q.runId))
            writer = result.writers[name]
            totals = listener.totals.get(name)
            if _is_direct(writer) and totals:  # no foreachBatch counted its rows: Spark did
                topics = "kafka:" + ",".join(specs[name].topics)
                result.direct[name] = Counter({topics: totals.sink_rows})
    except BaseException as err:
        status, message = "failed", first_line(err)
        recorder.error(None, message)
        raise
    finally:
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
