"""A pipeline's graph: planned without Spark (so user errors surface before the JVM starts),
then built in Spark as streaming views: source view, SQL steps and handlers."""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from pyspark.accumulators import Accumulator
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.errors import KafkaUnavailable, UserError
from engine.handler_adapter import CountsParam, apply_handlers
from engine.pipeline import HandlerSpec, Pipeline
from engine.query_plan import QueryPlan, plan_query
from engine.sources import open_source
from engine.sqlgraph import SqlError, SqlStep, load_steps, order_steps
from engine.tables import TableDef, load_tables
from handlers.base import StateHandler

__all__ = [
    "Plan",
    "as_user_error",
    "build_views",
    "plan_pipeline",
    "spark_error_line",
    "stream_rows",
]


# Our own errors raised in Spark's Python workers reach the driver inside Spark's message.
_OWN_ERROR = re.compile(r"\b(UserError|KafkaUnavailable): (.+)")


def spark_error_line(err: Exception) -> str:
    """The first meaningful line of a Spark error, without the JVM stack trace."""
    text = str(getattr(err, "getMessage", lambda: "")() or err).strip()
    own = _OWN_ERROR.search(text)
    if own:
        return own.group(2).strip()
    return text.splitlines()[0] if text else type(err).__name__


def as_user_error(err: Exception, prefix: str = "") -> Exception:
    """The error to raise for a failed Spark job: ours (UserError, KafkaUnavailable) when it
    came from our code in a worker, else a RuntimeError; both as one line after `prefix`."""
    text = str(getattr(err, "getMessage", lambda: "")() or err)
    own = _OWN_ERROR.search(text)
    kind = {"UserError": UserError, "KafkaUnavailable": KafkaUnavailable}.get(
        own.group(1) if own else "", RuntimeError
    )
    return kind(prefix + spark_error_line(err))


@dataclass(frozen=True)
class Plan:
    """A checked pipeline: its SQL steps, handlers and tables, and the order to build views."""

    pipeline: Pipeline
    steps: Mapping[str, SqlStep]
    handlers: Mapping[str, tuple[HandlerSpec, StateHandler]]
    tables: Mapping[str, TableDef]
    order: tuple[str, ...]
    #: Per query: its streaming outputs and the steps run on each batch (engine/query_plan.py).
    queries: Mapping[str, QueryPlan]


def _load_handler(spec: HandlerSpec, pipeline: Pipeline) -> StateHandler:
    module_name, _, class_name = spec.class_path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as err:
        raise UserError(
            f"{pipeline.path}: handler {spec.name}: cannot load {spec.class_path} ({err})"
        ) from None
    handler = cls(pipeline.settings)
    try:  # settings are read lazily; check them now
        _ = handler.timeout_mode, handler.timeout
    except ValueError as err:
        raise UserError(f"{pipeline.path}: handler {spec.name}: {err}") from None
    return handler


def _check_sinks(pipeline: Pipeline, tables: Mapping[str, TableDef], views: set[str]) -> None:
    for query in pipeline.queries:
        where = f"{pipeline.path}: query {query.name}"
        for table, view in query.sinks.items():
            if table not in tables:
                raise UserError(f"{where}: unknown table '{table}' (tables/{table}.sql)")
            if view not in views:
                raise UserError(f"{where}: table {table} reads unknown view '{view}'")
        for topic, view in query.topics.items():
            if view not in views:
                raise UserError(f"{where}: topic {topic} reads unknown view '{view}'")
        if query.topics and "bootstrap.servers" not in pipeline.kafka:
            raise UserError(f"{where}: writes Kafka topics but the pipeline has no kafka: block")


def plan_pipeline(pipeline: Pipeline, *, once: bool = False) -> Plan:
    """Parse and order the SQL, load handlers and tables; every problem is a UserError."""
    try:
        steps = {s.name: s for s in load_steps(pipeline.sql_dir)}
        order = order_steps(
            list(steps.values()),
            provided=[pipeline.source.view],
            extra={h.name: [h.input] for h in pipeline.handlers},
        )
    except SqlError as err:
        raise UserError(str(err)) from None
    handlers = {h.name: (h, _load_handler(h, pipeline)) for h in pipeline.handlers}
    if once and pipeline.source.kind == "socket":
        # A socket has no end and cannot replay: AvailableNow would read nothing.
        raise UserError(
            f"--once: pipeline {pipeline.name} reads a socket, which has no end; run without "
            "--once and stop it with Ctrl-C, or read Kafka (--conf source.kind=kafka)"
        )
    if once:
        for name, (_, handler) in handlers.items():
            # Spark keeps planning batches while processing-time timers are pending, so an
            # AvailableNow run would never end (docs/decisions.md).
            if handler.timeout_mode == "processing_time":
                raise UserError(
                    f"--once: handler {name} uses processing-time timeouts, which only a "
                    "continuous run fires; run without --once or use event-time timeouts"
                )
    tables = load_tables(pipeline.tables_dir)
    _check_sinks(pipeline, tables, set(order))
    queries = {q.name: plan_query(pipeline, q, steps, order) for q in pipeline.queries}
    return Plan(pipeline, steps, handlers, tables, tuple(order), queries)


def _sql_view(spark: SparkSession, step: SqlStep, watermark_delay: str | None) -> None:
    try:
        if step.distinct:
            # Spark runs SQL DISTINCT as an aggregation that holds every row until the watermark
            # passes; streaming deduplication emits the first copy at once (docs/decisions.md).
            query = step.query_sql(drop_distinct=True, watermark_delay=watermark_delay)
            df = spark.sql(query).dropDuplicates(step.distinct_columns())
            df.createOrReplaceTempView(step.name)
        elif watermark_delay and step.watermarks:
            query = step.query_sql(watermark_delay=watermark_delay)
            spark.sql(query).createOrReplaceTempView(step.name)
        else:
            spark.sql(step.sql)
    except (PySparkException, SqlError) as err:
        raise UserError(f"{step.path}: {spark_error_line(err)}") from None


def _after_handlers(plan: Plan) -> set[str]:
    """Steps that read a handler's rows: they run on each batch, never as streaming views."""
    found: set[str] = set(plan.handlers)
    for name in plan.order:
        if name in plan.steps and plan.steps[name].references & found:
            found.add(name)
    return found - set(plan.handlers)


def build_views(
    spark: SparkSession, plan: Plan, *, input_path: str | None = None, lake: Path | None = None
) -> None:
    """Register the source and every streaming step of the plan as temp views, in order;
    `lake` holds the table of a delta source. Handlers run per query (`stream_rows`)."""
    pipeline = plan.pipeline
    source = open_source(spark, pipeline.source, path=input_path, kafka=pipeline.kafka, lake=lake)
    source.createOrReplaceTempView(pipeline.source.view)
    delay = pipeline.settings.get("watermark_delay") or None
    skip = _after_handlers(plan)
    for name in plan.order:
        if name in plan.steps and name not in skip:
            _sql_view(spark, plan.steps[name], delay)


def _struct_type(df: DataFrame) -> str:
    return df.schema.simpleString()


def stream_rows(
    spark: SparkSession, plan: Plan, query: QueryPlan
) -> tuple[DataFrame, dict[str, Accumulator]]:
    """The query's streaming part: its outputs as one tagged stream (`_out` says which output
    a row is, its columns sit in struct `_o<i>`), and each handler's counts accumulator."""
    counts: dict[str, Accumulator] = {}
    parts: list[DataFrame] = []
    for output in query.outputs:
        if output.handlers is None:
            parts.append(spark.table(output.view))  # type: ignore[arg-type]
            continue
        group = output.handlers
        for name in group.names:
            counts[name] = spark.sparkContext.accumulator(Counter(), CountsParam())
        source = spark.table(group.input)
        handlers = {name: plan.handlers[name][1] for name in group.names}
        try:
            passthrough = source.columns if output.passthrough else ()
            parts.append(apply_handlers(source, handlers, passthrough=passthrough, counts=counts))
        except ValueError as err:
            names = ", ".join(group.names)
            raise UserError(f"{plan.pipeline.path}: handlers {names}: {err}") from None
    structs = [_struct_type(p) for p in parts]
    tagged = []
    for i, part in enumerate(parts):
        columns = [
            F.struct(*part.columns).alias(f"_o{j}")
            if j == i
            else F.lit(None).cast(structs[j]).alias(f"_o{j}")
            for j in range(len(parts))
        ]
        tagged.append(part.select(F.lit(i).alias("_out"), *columns))
    return reduce(DataFrame.unionByName, tagged), counts
