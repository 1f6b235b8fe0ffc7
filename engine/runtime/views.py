"""A plan built in Spark: the source and every streaming SQL step as temp views, and each
query's streaming part (handlers applied by the shared adapter) as one tagged stream."""

from __future__ import annotations

from functools import reduce
from pathlib import Path

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.definitions.sql import SqlError, SqlStep
from engine.errors import UserError
from engine.plan import Plan
from engine.plan.queries import QueryPlan
from engine.runtime.errors import spark_error_line
from engine.runtime.expectations import apply_rules, check_conditions
from engine.runtime.handler_adapter import apply_handlers
from engine.runtime.session import has_delta
from engine.sources.streams import open_source

__all__ = ["build_views", "stream_rows"]


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
            # A view made by SQL keeps its text, which Spark analyzes again wherever a later
            # view or the query reads it, the whole chain below it each time: kept as its plan.
            spark.table(step.name).createOrReplaceTempView(step.name)
        check_conditions(spark, step)
        apply_rules(spark, step)
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
    # Spark alone would fail at the read with a Java error (DATA_SOURCE_NOT_FOUND).
    if pipeline.source.kind == "delta" and not has_delta(spark):
        raise UserError(
            "source.kind: delta needs Delta Lake for Spark (delta-spark jar), which this Spark "
            "session does not have (`make` fetches it into .jars); cannot read table "
            f"{pipeline.source.table!r}"
        )
    source = open_source(spark, pipeline, path=input_path, lake=lake)
    source.createOrReplaceTempView(pipeline.source.view)
    delay = pipeline.settings.get("watermark_delay") or None
    skip = _after_handlers(plan)
    for name in plan.order:
        if name in plan.steps and name not in skip:
            _sql_view(spark, plan.steps[name], delay)


def _struct_type(df: DataFrame) -> str:
    return df.schema.simpleString()


def stream_rows(spark: SparkSession, plan: Plan, query: QueryPlan) -> DataFrame:
    """The query's streaming part: its outputs as one tagged stream (`_out` says which output
    a row is, its columns sit in struct `_o<i>`)."""
    parts: list[DataFrame] = []
    for output in query.outputs:
        if output.handlers is None:
            parts.append(spark.table(output.view))  # type: ignore[arg-type]
            continue
        group = output.handlers
        source = spark.table(group.input)
        handlers = {name: plan.handlers[name][1] for name in group.names}
        try:
            passthrough = source.columns if output.passthrough else ()
            parts.append(apply_handlers(source, handlers, passthrough=passthrough))
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
    return reduce(DataFrame.unionByName, tagged)
