"""Builds a pipeline's graph in Spark: source view, SQL steps and handlers as streaming views."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from engine.errors import UserError
from engine.handler_adapter import apply_handler
from engine.pipeline import HandlerSpec, Pipeline
from engine.sources import open_source
from engine.sqlgraph import SqlError, SqlStep, load_steps, order_steps
from handlers.base import StateHandler

__all__ = ["build_views", "load_handler", "spark_error_line"]


def spark_error_line(err: Exception) -> str:
    """The first meaningful line of a Spark error, without the JVM stack trace."""
    text = str(getattr(err, "getMessage", lambda: "")() or err)
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__


def load_handler(spec: HandlerSpec, pipeline: Pipeline) -> StateHandler:
    """Import and configure a handler class named `module:Class` in the pipeline spec."""
    module_name, _, class_name = spec.class_path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as err:
        raise UserError(
            f"{pipeline.path}: handler {spec.name}: cannot load {spec.class_path} ({err})"
        ) from None
    handler = cls(pipeline.settings)
    try:  # settings are read lazily; check them before Spark starts any work
        _ = handler.timeout_mode, handler.timeout
    except ValueError as err:
        raise UserError(f"{pipeline.path}: handler {spec.name}: {err}") from None
    return handler


def _sql_view(spark: SparkSession, step: SqlStep, watermark_delay: str | None) -> None:
    try:
        if step.distinct:
            # Spark runs SQL DISTINCT as an aggregation that holds every row until the watermark
            # passes; streaming deduplication emits the first copy at once (docs/decisions.md).
            query = step.query_sql(drop_distinct=True, watermark_delay=watermark_delay)
            df = spark.sql(query).dropDuplicates(step.distinct_columns())
            df.createOrReplaceTempView(step.name)
        elif watermark_delay and step.watermarks:
            spark.sql(step.query_sql(watermark_delay=watermark_delay)).createOrReplaceTempView(
                step.name
            )
        else:
            spark.sql(step.sql)
    except PySparkException as err:
        raise UserError(f"{step.path}: {spark_error_line(err)}") from None


def build_views(
    spark: SparkSession, pipeline: Pipeline, *, input_path: str | None = None
) -> dict[str, DataFrame]:
    """Register every view of the pipeline; returns the views its queries write, by name."""
    try:
        steps = {s.name: s for s in load_steps(pipeline.sql_dir)}
        handlers = {h.name: h for h in pipeline.handlers}
        order = order_steps(
            list(steps.values()),
            provided=[pipeline.source.view],
            extra={h.name: [h.input] for h in handlers.values()},
        )
    except SqlError as err:
        raise UserError(str(err)) from None
    open_source(spark, pipeline.source, path=input_path).createOrReplaceTempView(
        pipeline.source.view
    )
    delay = pipeline.settings.get("watermark_delay") or None
    for name in order:
        if name in steps:
            _sql_view(spark, steps[name], delay)
        else:
            spec = handlers[name]
            apply_handler(
                spark.table(spec.input), load_handler(spec, pipeline)
            ).createOrReplaceTempView(name)
    return _sink_views(spark, pipeline, set(order))


def _sink_views(
    spark: SparkSession, pipeline: Pipeline, known: set[str]
) -> Mapping[str, DataFrame]:
    views = {}
    for query in pipeline.queries:
        for table, view in query.sinks.items():
            if view not in known:
                where = f"{pipeline.path}: query {query.name}"
                raise UserError(f"{where}: table {table} reads unknown view '{view}'")
            views[view] = spark.table(view)
    return views
