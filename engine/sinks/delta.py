"""Delta sinks written with delta-rs: append or MERGE by key, idempotent per (query, batch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import (
    CommitProperties,
    DeltaTable,
    Field,
    Schema,
    Transaction,
    write_deltalake,
)

from engine.definitions.tables import TableDef
from engine.plan.table_changes import TableChanges, lake_table_changes

__all__ = ["BatchId", "DeltaSink"]


@dataclass(frozen=True)
class BatchId:
    """Who writes: the app id (pipeline, query, checkpoint) and Spark's batch id."""

    app_id: str
    batch: int
    pipeline: str
    query: str

    def commit_properties(self) -> CommitProperties:
        """Commit info that makes a retried batch a no-op and shows up in table history."""
        return CommitProperties(
            app_transactions=[Transaction(app_id=self.app_id, version=self.batch)],
            custom_metadata={
                "pipeline": self.pipeline,
                "query": self.query,
                "batch_id": str(self.batch),
            },
        )


class DeltaSink:
    """One Delta table under the lake folder, created from its definition on first use,
    written with delta-rs from the driver (the embedded path)."""

    #: The form `write` takes a batch in: Arrow, collected to the driver.
    takes = "arrow"

    def __init__(self, table: TableDef, lake: Path) -> None:
        self.table = table
        self.path = lake / table.name

    def open(self) -> DeltaTable:
        """The Delta table, created empty with the declared schema if missing."""
        if DeltaTable.is_deltatable(str(self.path)):
            return DeltaTable(str(self.path))
        return DeltaTable.create(
            str(self.path),
            schema=self.table.arrow_schema,
            mode="ignore",
            partition_by=list(self.table.partition_by) or None,
            name=self.table.name,
            description=self.table.description or None,
        )

    def prepare(self) -> None:
        """Before the first batch: create the table, or bring it to its DDL: add the columns
        it gained, drop the NOT NULLs it lost, widen types (engine/plan/table_changes.py; the run
        refused anything else)."""
        changes = lake_table_changes(self.table, self.path)
        if changes is None:
            self._create()
            return
        if changes.add or changes.relax:
            self._alter(changes)
        if changes.widen:
            self._rewrite_wider()

    def _create(self) -> None:
        self.open()

    def _alter(self, changes: TableChanges) -> None:
        table = DeltaTable(str(self.path))
        if changes.add:
            # Schema.from_arrow gives each new column its Delta type; the DDL's comment goes
            # along as Spark keeps it.
            new = pa.schema([pa.field(c.name, c.type) for c in changes.add])
            comments = {c.name: c.comment for c in changes.add}
            fields = [
                Field(f.name, f.type, nullable=True, metadata={"comment": comments[f.name]})
                if comments[f.name]
                else f
                for f in Schema.from_arrow(new).fields
            ]
            table.alter.add_columns(fields)
        for name in changes.relax:
            table.alter.drop_column_not_null(name)

    def _rewrite_wider(self) -> None:
        """Rewrite every row with the DDL's wider types, batch by batch, in one overwrite
        commit; not Delta's in-place type widening, which delta-rs cannot read."""
        rows = DeltaTable(str(self.path)).to_pyarrow_dataset()
        declared = self.table.arrow_schema
        wider = pa.schema(
            [declared.field(f.name) if f.name in declared.names else f for f in rows.schema]
        )
        batches = (batch.cast(wider) for batch in rows.to_batches())
        self._overwrite(pa.RecordBatchReader.from_batches(wider, batches))

    def rebuild(self, *, pipeline: str | None) -> None:
        """Remove the table's rows, all of them (the table then has the DDL's schema) or one
        pipeline's (its `pipeline` column), in a new version: the old versions stay readable
        by time travel."""
        if not DeltaTable.is_deltatable(str(self.path)):
            return
        if pipeline is not None:
            quoted = pipeline.replace("'", "''")
            DeltaTable(str(self.path)).delete(f"pipeline = '{quoted}'")
            return
        self._overwrite(self.table.arrow_schema.empty_table())

    def _overwrite(self, rows: pa.Table | pa.RecordBatchReader) -> None:
        # delta-rs keeps the NOT NULLs of the Arrow schema (a Spark DataFrame write would
        # make every column nullable, and Delta cannot make them NOT NULL again).
        write_deltalake(
            str(self.path),
            rows,
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=list(self.table.partition_by) or None,
        )

    def conform(self, data: pa.Table) -> pa.Table:
        """Select and cast the declared columns; fail on a NULL in a NOT NULL column."""
        schema = self.table.arrow_schema
        data = data.select(schema.names)
        for f in schema:
            if not f.nullable and data.column(f.name).null_count:
                raise ValueError(f"table {self.table.name}: NULL in NOT NULL column {f.name}")
        return data.cast(schema)

    def has(self, batch: BatchId) -> bool:
        """Whether the table already holds this batch (or a later one) of this writer."""
        done = DeltaTable(str(self.path)).transaction_version(batch.app_id)
        return done is not None and done >= batch.batch

    def write(self, data: pa.Table, batch: BatchId) -> int:
        """Write one batch's rows, skipping a batch the table already has; returns rows written."""
        dt = self.open()
        done = dt.transaction_version(batch.app_id)
        if data.num_rows == 0 or (done is not None and done >= batch.batch):
            return 0
        data = self.conform(data)
        if self.table.mode == "append":
            write_deltalake(dt, data, mode="append", commit_properties=batch.commit_properties())
        else:
            predicate = " AND ".join(f"t.{k} = s.{k}" for k in self.table.key)
            (
                dt.merge(
                    data,
                    predicate,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=batch.commit_properties(),
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        return data.num_rows
