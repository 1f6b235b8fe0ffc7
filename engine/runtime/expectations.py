"""A view's expectations in Spark (rules: engine/definitions/expectations.py): its rows kept,
dropped or failed by the rules, the rows it drops shaped for the quarantine table, and the
count of rows breaking each rule in a batch."""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, NullType

from engine.definitions.expectations import Expectation
from engine.definitions.sql import SqlStep, pinned_condition
from engine.errors import UserError

__all__ = [
    "DROPPED",
    "ROWS",
    "apply_rules",
    "batch_counts",
    "check_conditions",
    "failure",
    "metric_name",
    "rejected_rows",
    "views_of_metrics",
]

#: The keys of a view's checked rows and of the rows its DROP ROW rules dropped, among its
#: counts; the other keys are its rules' names (engine/definitions/expectations.py).
ROWS = "rows"
DROPPED = "dropped"
_METRIC_PREFIX = "expectations:"


def metric_name(view: str) -> str:
    """The name a streaming view's counts carry in Spark's progress (`observedMetrics`)."""
    return _METRIC_PREFIX + view


def views_of_metrics(observed: Mapping[str, object]) -> dict[str, dict[str, int]]:
    """The counts per view and rule found among a progress event's observed metrics, for
    the views that had rows in the batch."""
    found = {}
    for name, row in observed.items():
        counts = dict(row.asDict())  # type: ignore[attr-defined]
        if name.startswith(_METRIC_PREFIX) and counts.get(ROWS):
            found[name.removeprefix(_METRIC_PREFIX)] = counts
    return found


def _broken(rule: Expectation, batch_ms: int | None = None) -> Column:
    # A rule holds only where its condition is true: NULL breaks it.
    condition = F.expr(pinned_condition(rule.condition, batch_ms))
    return ~F.coalesce(condition.cast("boolean"), F.lit(False))


def _dropped(rules: tuple[Expectation, ...], batch_ms: int | None = None) -> Column | None:
    drops = [_broken(rule, batch_ms) for rule in rules if rule.action == "drop"]
    return reduce(Column.__or__, drops) if drops else None


def _counts(rules: tuple[Expectation, ...], batch_ms: int | None = None) -> list[Column]:
    dropped = _dropped(rules, batch_ms)
    return [
        F.count(F.lit(1)).alias(ROWS),
        *([F.count_if(dropped).alias(DROPPED)] if dropped is not None else []),
        *(F.count_if(_broken(rule, batch_ms)).alias(rule.name) for rule in rules),
    ]


def _row_json(df: DataFrame) -> Column:
    # Every column, NULLs too: a rule about a missing value shows the value missing.
    row = F.struct(*[F.col(c) for c in df.columns])
    return F.to_json(row, {"ignoreNullFields": "false"})


def apply_rules(spark: SparkSession, step: SqlStep, *, batch_ms: int | None = None) -> None:
    """Replace the step's view (just made from its SQL) by the rows its rules keep: a FAIL
    UPDATE rule raises on its first broken row, DROP ROW rules filter. A view of the
    streaming part (no `batch_ms`) also reports its counts to the query's progress; on a
    batch, the rules' current time is the batch's (`batch_counts` counts there)."""
    if not step.expectations:
        return
    df = spark.table(step.name)
    if batch_ms is None:
        df = df.observe(metric_name(step.name), *_counts(step.expectations))
    for rule in step.expectations:
        if rule.action == "fail":
            # The prefix makes the message ours when it reaches the driver (runtime/errors.py).
            said = F.concat(F.lit("UserError: " + failure(step, rule, "")), _row_json(df))
            broken = _broken(rule, batch_ms)
            df = df.where(F.when(broken, F.raise_error(said)).otherwise(F.lit(True)))
    dropped = _dropped(step.expectations, batch_ms)
    if dropped is not None:
        df = df.where(~dropped)
    # Replaced, not dropped first: over Spark Connect `df` names the view, resolved only now.
    df.createOrReplaceTempView(step.name)


def check_conditions(spark: SparkSession, step: SqlStep) -> None:
    """Each rule's condition over the step's view is true or false, checked once before the
    query starts: another type was cast row by row, and a value that is no boolean failed the
    batch in ANSI's words, naming an engine file, exit 1."""
    if not step.expectations:
        return
    df = spark.table(step.name)
    conditions = [F.expr(pinned_condition(rule.condition, None)) for rule in step.expectations]
    for rule, field in zip(step.expectations, df.select(*conditions).schema, strict=True):
        if not isinstance(field.dataType, BooleanType | NullType):
            raise UserError(
                f"{step.path}:{rule.line}: expectation {rule.name}: EXPECT ({rule.condition}) "
                f"is {field.dataType.simpleString()}, not a condition (true or false)"
            )


def failure(step: SqlStep, rule: Expectation, row: str) -> str:
    """The one line a FAIL UPDATE rule stops its query with."""
    return (
        f"{step.path}:{rule.line}: expectation {rule.name} failed (ON VIOLATION FAIL UPDATE), "
        f"so the batch is not committed; row: {row}"
    )


def batch_counts(spark: SparkSession, step: SqlStep, *, batch_ms: int) -> dict[str, int]:
    """Rows of the step's view in this batch (just made from its SQL, before `apply_rules`)
    and how many break each rule, for a view computed on the batch, which Spark's progress
    does not see. A broken FAIL UPDATE rule raises here, with a sample row, before anything
    is written."""
    df = spark.table(step.name)  # the view as its SQL made it, before `apply_rules`
    row = df.agg(*_counts(step.expectations, batch_ms)).first()
    counts = {k: int(v or 0) for k, v in row.asDict().items()} if row else {}
    for rule in step.expectations:
        if rule.action == "fail" and counts.get(rule.name):
            sample = df.where(_broken(rule, batch_ms)).select(_row_json(df)).first()
            raise UserError(failure(step, rule, sample[0] if sample else "?"))
    return counts


def rejected_rows(
    spark: SparkSession, step: SqlStep, *, pipeline: str, root: Path, batch_ms: int
) -> DataFrame:
    """The rows the step's DROP ROW rules drop in a batch, as quarantine rows: `raw` is the
    row as JSON, `source` the SQL file (relative to `root`), `reason` the first rule it breaks.
    The current time is the batch's, so they are the rows the view itself drops."""
    df = spark.sql(step.query_sql(batch_time_ms=batch_ms))
    drops = [rule for rule in step.expectations if rule.action == "drop"]
    reason = F.coalesce(
        *[F.when(_broken(rule, batch_ms), F.lit(f"expectation {rule.name}")) for rule in drops]
    )
    try:
        where = step.path.resolve().relative_to(root.resolve())
    except ValueError:
        where = step.path
    return (
        df.select(_row_json(df).alias("raw"), reason.alias("reason"))
        .where(F.col("reason").isNotNull())
        .select(
            F.lit(pipeline).alias("pipeline"),
            F.lit(str(where)).alias("source"),
            "raw",
            "reason",
            F.timestamp_millis(F.lit(batch_ms)).alias("ingested_at"),
        )
    )
