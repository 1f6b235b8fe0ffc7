"""The stateless end of a query, run on each micro-batch: from the rows its streaming part
emitted to the DataFrames of its tables and topics (plan in engine/plan/queries.py)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from engine.definitions.expectations import rejects_view
from engine.definitions.tables import view_misfits
from engine.errors import UserError
from engine.plan import Plan
from engine.plan.queries import QueryPlan
from engine.runtime.casts import keeps_values
from engine.runtime.connect import isolated_session
from engine.runtime.errors import as_user_error, spark_error_line
from engine.runtime.expectations import (
    ROWS,
    apply_rules,
    batch_counts,
    check_conditions,
    rejected_rows,
)
from engine.runtime.handler_adapter import handler_rows, passthrough_rows
from engine.sinks import Sink

__all__ = ["BatchViews"]


class BatchViews:
    """Binds a batch's rows to the views they stand for, runs the batch steps' SQL on them and
    selects each sink's columns, cast to its table's types."""

    def __init__(self, plan: Plan, query: QueryPlan) -> None:
        self.plan = plan
        self.query = query
        #: What each target is written to (a table, or a topic's message), in target order;
        #: set by `check` before the query starts.
        self.sinks: list[Sink] = []
        #: Each handler input's columns, as the passthrough rows carry them; set by `check`.
        self.input_columns: dict[str, list[str]] = {}
        #: Whether `check` has held each sink's view to its table (batches then skip it).
        self._fitted = False

    def _bind(self, rows: DataFrame) -> None:
        for i, output in enumerate(self.query.outputs):
            part = rows.where(F.col("_out") == i).select(f"_o{i}.*")
            if output.handlers is None:
                part.createOrReplaceTempView(output.view)  # type: ignore[arg-type]
                continue
            for name in output.handlers.names:
                handler = self.plan.handlers[name][1]
                handler_rows(part, name, handler).createOrReplaceTempView(name)
            if output.passthrough:
                inputs = self.input_columns[output.handlers.input]
                passthrough_rows(part, inputs).createOrReplaceTempView(output.handlers.input)

    def __call__(
        self, rows: DataFrame, batch_ms: int
    ) -> tuple[list[DataFrame], dict[str, dict[str, int]]]:
        """One DataFrame per sink, in sink order, computed from the batch's `rows`; and the
        counts of the expectations of the views computed here (view -> rule -> rows).

        The steps' current time is the batch's timestamp `batch_ms`, as in the streaming part
        of the query: a view and the rows its rules drop are judged at one time, and a replay
        of the batch decides the same."""
        spark = rows.sparkSession
        if self._streaming_fails:
            # A broken FAIL UPDATE rule of the streaming part raises now, before any write.
            try:
                rows.count()
            except PySparkException as err:
                raise as_user_error(err) from None
        self._bind(rows)
        counts: dict[str, dict[str, int]] = {}
        rejects = {rejects_view(view): self.plan.steps[view] for view in self.query.drops}
        for name in self.query.batch_steps:
            step = rejects.get(name) or self.plan.steps[name]
            try:
                if name in rejects:
                    dropped = rejected_rows(
                        spark,
                        step,
                        pipeline=self.plan.pipeline.name,
                        root=self.project_root,
                        batch_ms=batch_ms,
                    )
                    dropped.createOrReplaceTempView(name)
                    continue
                spark.sql(step.query_sql(batch_time_ms=batch_ms)).createOrReplaceTempView(name)
                if step.expectations:
                    if not self._fitted:  # `check`'s pass: the batches' views have its types
                        check_conditions(spark, step)
                    checked = batch_counts(spark, step, batch_ms=batch_ms)
                    if checked.get(ROWS):
                        counts[name] = checked
                    apply_rules(spark, step, batch_ms=batch_ms)
            except PySparkException as err:
                if err.getCondition() == "PYTHON_EXCEPTION":
                    # Raised by a handler of the streaming part, which Spark runs at the
                    # batch's first action: its own file and line say where, not this view.
                    raise
                raise UserError(f"{step.path}: {spark_error_line(err)}") from None
        frames = []
        for sink, view in zip(self.sinks, self.query.targets, strict=True):
            frame = self._select(spark.table(view), sink, view)
            if sink.name == self.query.quarantine:
                for dropped in rejects:
                    frame = frame.unionByName(self._select(spark.table(dropped), sink, dropped))
            frames.append(frame)
        return frames, counts

    @property
    def _streaming_fails(self) -> bool:
        steps = (self.plan.steps.get(name) for name in self.query.streaming_steps)
        return any(e.action == "fail" for s in steps if s for e in s.expectations)

    @property
    def project_root(self) -> Path:
        """Where the dropped rows' `source` (their SQL file) is relative to."""
        return self.plan.pipeline.project.root

    @cached_property
    def _read_by_steps(self) -> frozenset[str]:
        """Views that a SQL step or a handler reads: they may carry columns for those."""
        handlers = {spec.input for spec, _ in self.plan.handlers.values()}
        return frozenset(handlers).union(*(s.references for s in self.plan.steps.values()))

    def _select(self, df: DataFrame, sink: Sink, view: str) -> DataFrame:
        if not self._fitted:  # a batch's views have the schemas `check` held to the sinks
            self._fit(df, sink, view)
        return df.select(*[F.col(c.name).cast(c.ddl_type).alias(c.name) for c in sink.columns])

    def _fit(self, df: DataFrame, sink: Sink, view: str) -> None:
        """Refuse a view that does not fit its table: a missing column, one the table lacks
        that no step reads (it would be lost unseen), or a cast that would change values."""
        declared = [c.name for c in sink.columns]
        read = view in self._read_by_steps
        problems = view_misfits(view, sink.name, declared, df.columns, read=read)
        if problems:
            raise UserError(f"{sink.where}: {problems[0]}")
        cast = df.select(*[F.col(c.name).cast(c.ddl_type) for c in sink.columns])
        types = {f.name.lower(): f.dataType for f in df.schema.fields}  # Spark's, any case
        for column, field in zip(sink.columns, cast.schema.fields, strict=True):
            given = types[column.name.lower()]
            if not keeps_values(given, field.dataType):
                raise UserError(
                    f"{sink.where}: view '{view}' gives column {column.name} as "
                    f"{given.simpleString().upper()}, which table {sink.name} would cut to "
                    f"{column.ddl_type}: change the table's type or CAST it in the view"
                )

    def check(self, spark: SparkSession, schema: StructType, sinks: Sequence[Sink]) -> None:
        """Set the `sinks` and run the batch steps once on no rows of the stream's
        `schema`, in a session of their own, so a missing column or a SQL error stops the run
        before any query starts."""
        self.sinks = list(sinks)
        for output in self.query.outputs:
            if output.handlers is not None and output.passthrough:
                self.input_columns[output.handlers.input] = spark.table(
                    output.handlers.input
                ).columns
        self._fitted = False
        with isolated_session(spark) as session:
            self(session.createDataFrame([], schema), 0)
        self._fitted = True
