"""Delta tables written by Spark (delta-spark) from the executors, idempotent per batch.

The same contract as `engine.sinks.delta.DeltaSink` (delta-rs, the embedded path): the table is
created from its `tables/<name>.sql` DDL, appends and MERGEs carry the writer's transaction
(app id, batch id), so Delta itself skips a batch the table already holds, and the commit's
userMetadata names pipeline, query and batch for `history`.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from engine.definitions.tables import TableDef
from engine.plan.table_changes import TableChanges
from engine.sinks import BatchId
from engine.sinks.delta import DeltaSink, added, full_refresh_metadata

__all__ = [
    "SparkDeltaSink",
    "alter_table_sql",
    "create_table_sql",
    "delete_pipeline_sql",
    "key_bounds",
    "merge_sql",
]

# Session settings Delta reads for an idempotent MERGE and for its commit info. Streaming
# queries run in sessions of their own (clones), so setting them there touches no other query.
_TXN_APP = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def _path_table(path: Path) -> exp.Table:
    return exp.Table(this=exp.to_identifier(str(path), quoted=True), db=exp.to_identifier("delta"))


def _ddl(table: TableDef) -> exp.Create:
    tree = sqlglot.parse_one(table.path.read_text(), read="spark")
    assert isinstance(tree, exp.Create)
    return tree


def create_table_sql(table: TableDef, path: Path) -> str:
    """The table's DDL file as `CREATE TABLE IF NOT EXISTS delta.`path` ...`."""
    tree = _ddl(table)
    tree.this.set("this", _path_table(path))
    tree.set("exists", True)
    return tree.sql(dialect="spark")


def alter_table_sql(table: TableDef, path: Path, changes: TableChanges) -> list[str]:
    """The ALTER TABLE statements that add the DDL's new columns (with their comments), drop
    the NOT NULLs it dropped and set the comments it changed; one action per statement, as
    Spark takes them."""
    columns = {c.name: c for c in _ddl(table).this.expressions if isinstance(c, exp.ColumnDef)}
    actions: list[exp.Expression] = []
    if changes.add:
        actions.append(exp.Schema(expressions=[columns[c.name].copy() for c in changes.add]))
    actions += [
        exp.AlterColumn(this=exp.to_identifier(name), drop=True, allow_null=True)
        for name in changes.relax
    ]
    actions += [
        exp.AlterColumn(this=exp.to_identifier(c.name), comment=exp.Literal.string(c.comment))
        for c in changes.recomment
    ]
    return [_alter(path, action) for action in actions]


def _alter(path: Path, action: exp.Expression) -> str:
    """`ALTER TABLE delta.`path` <action>`: Spark takes one action per statement."""
    return exp.Alter(this=_path_table(path), kind="TABLE", actions=[action]).sql(dialect="spark")


def _metadata(batch: BatchId) -> str:
    return json.dumps(
        {"pipeline": batch.pipeline, "query": batch.query, "batch_id": str(batch.batch)}
    )


class SparkDeltaSink(DeltaSink):
    """A lake table written with delta-spark: rows stay on the executors."""

    takes = "dataframe"

    def __init__(self, table: TableDef, lake: Path, spark: SparkSession) -> None:
        super().__init__(table, lake)
        self.spark = spark

    def __getstate__(self) -> dict[str, object]:
        # Over Spark Connect the writer is pickled to the server's Python process; writes use
        # the batch's own session there (`data.sparkSession`), never this one.
        return {**self.__dict__, "spark": None}

    def _create(self) -> None:
        # From the DDL file itself: its TBLPROPERTIES too (delta-rs refuses keys not Delta's).
        self.spark.sql(create_table_sql(self.table, self.path))

    def _alter(self, changes: TableChanges) -> None:
        for statement in alter_table_sql(self.table, self.path, changes):
            self.spark.sql(statement)

    def rebuild(self, pipeline: str, *, shared: bool) -> None:
        """As DeltaSink's; one pipeline's rows are deleted by Spark, on the executors (emptying
        a whole table moves no rows, and delta-rs keeps its NOT NULLs)."""
        if not shared or not (self.path / "_delta_log").is_dir():
            super().rebuild(pipeline, shared=shared)
            return
        with _session_conf(
            self.spark, {_USER_METADATA: json.dumps(full_refresh_metadata(pipeline))}
        ):
            self.spark.sql(delete_pipeline_sql(self.path, pipeline))

    def write(  # type: ignore[override]
        self, data: DataFrame, batch: BatchId, *, keys: pa.Table | None = None
    ) -> int:
        """Append or MERGE one batch's rows; Delta skips a batch the table already holds. A
        MERGE's key ranges come from `keys` (read here when not given)."""
        data = data.select(*self.table.column_names)
        if self.table.mode == "append":
            (
                data.write.format("delta")
                .mode("append")
                .option("txnAppId", batch.app_id)
                .option("txnVersion", batch.batch)
                .option("userMetadata", _metadata(batch))
                .save(str(self.path))
            )
            return -1
        # The batch's own session (a clone per streaming query): its settings and its view
        # touch no other query. MERGE as SQL, not delta-spark's DeltaTable, which over Spark
        # Connect needs a server plugin that is not published for this Delta.
        session = data.sparkSession
        conf = {
            _TXN_APP: batch.app_id,
            _TXN_VERSION: str(batch.batch),
            _USER_METADATA: _metadata(batch),
        }
        if keys is None:
            keys = data.select(*self.table.key).toArrow()
        view = f"_merge_{self.table.name}"
        with _session_conf(session, conf):
            data.createOrReplaceTempView(view)
            try:
                session.sql(merge_sql(self.table, self.path, view, key_bounds(self.table, keys)))
            finally:
                session.catalog.dropTempView(view)
        return -1


@contextmanager
def _session_conf(session: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """`conf` set in `session` for the statements of the block only."""
    for key, value in conf.items():
        session.conf.set(key, value)
    try:
        yield
    finally:
        for key in conf:
            session.conf.unset(key)


def key_bounds(table: TableDef, keys: pa.Table) -> list[tuple[str | None, str | None]]:
    """Each key's lowest and highest value in the batch (`keys`: its key columns), as text that
    Spark casts back to the key's type exactly; (None, None) for a type without such text, which
    only means no file is skipped on that key."""
    bounds: list[tuple[str | None, str | None]] = []
    for name in table.key:
        column = keys.column(name)
        if not _has_exact_text(column.type):
            bounds.append((None, None))
            continue
        low_high = pc.min_max(column)
        bounds.append((_as_text(low_high["min"].as_py()), _as_text(low_high["max"].as_py())))
    return bounds


def _has_exact_text(kind: pa.DataType) -> bool:
    # Arrow orders strings by their bytes, as Spark does; a float's text may not round-trip.
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    )


def _as_text(value: object) -> str | None:
    """A key value as a literal: a time with its offset, so that it means the same instant in
    any session time zone."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def merge_sql(
    table: TableDef, path: Path, source: str, bounds: list[tuple[str | None, str | None]]
) -> str:
    """The MERGE of a batch (view `source`, alias s) into the table (alias t) by its key.

    Besides key equality, each key's range in the batch (`bounds`) on the target side alone:
    Delta skips the files whose statistics lie outside it, so a MERGE reads and rewrites only
    files that can hold the batch's keys, not the whole table (flat cost as it grows)."""
    types = {c.name: c.ddl_type for c in table.columns}
    condition: exp.Expression | None = None
    for k, (low, high) in zip(table.key, bounds, strict=True):
        target = exp.column(k, "t", quoted=True)
        part: exp.Expression = target.eq(exp.column(k, "s", quoted=True))
        if low is not None and high is not None:
            part = exp.and_(
                part,
                exp.Between(
                    this=target.copy(),
                    low=exp.cast(exp.Literal.string(low), types[k]),
                    high=exp.cast(exp.Literal.string(high), types[k]),
                ),
            )
        condition = part if condition is None else exp.and_(condition, part)
    if table.mode == "add":
        update = exp.Update(
            expressions=[
                exp.column(c, "t", quoted=True).eq(sqlglot.parse_one(value, read="spark"))
                for c, value in added(table.summed).items()
            ]
        )
    else:
        update = exp.Update(expressions=[exp.Star()])
    merge = exp.Merge(
        this=exp.alias_(_path_table(path), "t", table=True),
        using=exp.alias_(exp.to_table(source), "s", table=True),
        on=condition,
        whens=exp.Whens(
            expressions=[
                exp.When(matched=True, source=False, then=update),
                exp.When(matched=False, source=False, then=exp.Insert(this=exp.Star())),
            ]
        ),
    )
    return merge.sql(dialect="spark")


def delete_pipeline_sql(path: Path, pipeline: str) -> str:
    """`DELETE FROM delta.`path` WHERE pipeline = '<pipeline>'`."""
    where = exp.column("pipeline").eq(exp.Literal.string(pipeline))
    return exp.delete(_path_table(path), where=where).sql(dialect="spark")
