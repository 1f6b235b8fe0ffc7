"""Delta sinks written with delta-rs: append or MERGE by key, idempotent per (query, batch)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa
from deltalake import (
    CommitProperties,
    DeltaTable,
    Schema,
    Transaction,
    write_deltalake,
)

from engine.definitions.tables import TableDef
from engine.lake import dataset, scanner
from engine.lake.guard import claim_table
from engine.plan.table_changes import TableChanges, lake_table_changes
from engine.sinks import BatchId

__all__ = ["DeltaSink", "added", "commit_properties", "full_refresh_metadata"]


def added(columns: Sequence[str]) -> dict[str, str]:
    """An `add` table's MERGE update: each summed column is the row's value plus the batch's
    (a NULL adds nothing), over the aliases t (table) and s (batch), as merge predicates are."""
    return {c: f"coalesce(t.{c} + s.{c}, t.{c}, s.{c})" for c in columns}


def commit_properties(batch: BatchId) -> CommitProperties:
    """Commit info that makes a retried batch a no-op and shows up in table history."""
    return CommitProperties(
        app_transactions=[Transaction(app_id=batch.app_id, version=batch.batch)],
        custom_metadata={
            "pipeline": batch.pipeline,
            "query": batch.query,
            "batch_id": str(batch.batch),
        },
    )


def full_refresh_metadata(pipeline: str) -> dict[str, str]:
    """Commit info of a --full-refresh's emptying commit: `history` names its pipeline and
    marks it as a full refresh (to Delta it is a plain WRITE or DELETE)."""
    return {"pipeline": pipeline, "full_refresh": "true"}


class DeltaSink:
    """One Delta table under the lake folder, created from its definition on first use,
    written with delta-rs from the driver (the embedded path)."""

    takes: Literal["arrow", "dataframe"] = "arrow"
    order = 1
    transactional = True

    def __init__(self, table: TableDef, lake: Path) -> None:
        self.table = table
        self.path = lake / table.name
        self.name = table.name
        self.where = table.path
        self.columns = table.columns
        self.quarantine = table.role == "quarantine"
        # An `add` table's view groups by the key (engine/plan/summed.py): one row each.
        self.unique_key = table.key if table.mode == "merge" else ()
        self.merge_key = table.key if table.mode != "append" else ()

    def claim(self, *, pipeline: str, query: str, checkpoint: Path) -> None:
        """From now on the table is this checkpoint's (engine/lake/guard.py)."""
        claim_table(self.path, pipeline=pipeline, query=query, checkpoint=checkpoint)

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
        it gained, drop the NOT NULLs it lost, set changed comments, widen types
        (engine/plan/table_changes.py; the run refused anything else)."""
        changes = lake_table_changes(self.table, self.path)
        if changes is None:
            self._create()
            return
        if changes.add or changes.relax or changes.recomment:
            self._alter(changes)
        if changes.widen:
            self._rewrite_wider()

    def _create(self) -> None:
        self.open()

    def _alter(self, changes: TableChanges) -> None:
        table = DeltaTable(str(self.path))
        if changes.add:
            # Nullable: the rows already there have none. The DDL's comment goes along.
            declared = self.table.arrow_schema
            new = pa.schema([declared.field(c.name).with_nullable(True) for c in changes.add])
            table.alter.add_columns(Schema.from_arrow(new).fields)
        for name in changes.relax:
            table.alter.drop_column_not_null(name)
        for column in changes.recomment:
            table.alter.set_column_metadata(column.name, {"comment": column.comment})

    def _rewrite_wider(self) -> None:
        """Rewrite every row with the DDL's wider types, batch by batch, in one overwrite
        commit; not Delta's in-place type widening, which delta-rs cannot read."""
        rows = dataset(DeltaTable(str(self.path)))
        declared = self.table.arrow_schema
        wider = pa.schema(
            [declared.field(f.name) if f.name in declared.names else f for f in rows.schema]
        )
        batches = (batch.cast(wider) for batch in scanner(rows).to_batches())
        self._overwrite(pa.RecordBatchReader.from_batches(wider, batches))

    def rebuild(self, pipeline: str, *, shared: bool) -> None:
        """Remove the table's rows for `pipeline`'s --full-refresh, all of them (the table then
        has the DDL's schema) or, `shared` with other pipelines, its own (its `pipeline`
        column), in a new version that names the pipeline in `history`: the old versions stay
        readable by time travel."""
        if not DeltaTable.is_deltatable(str(self.path)):
            return
        named = CommitProperties(custom_metadata=full_refresh_metadata(pipeline))
        if shared:
            quoted = pipeline.replace("'", "''")
            DeltaTable(str(self.path)).delete(f"pipeline = '{quoted}'", commit_properties=named)
            return
        self._overwrite(self.table.arrow_schema.empty_table(), commit_properties=named)

    def _overwrite(
        self,
        rows: pa.Table | pa.RecordBatchReader,
        *,
        commit_properties: CommitProperties | None = None,
    ) -> None:
        # delta-rs keeps the NOT NULLs of the Arrow schema (a Spark DataFrame write would
        # make every column nullable, and Delta cannot make them NOT NULL again).
        write_deltalake(
            str(self.path),
            rows,
            mode="overwrite",
            schema_mode="overwrite",
            partition_by=list(self.table.partition_by) or None,
            commit_properties=commit_properties,
        )

    def conform(self, data: pa.Table) -> pa.Table:
        """Select and cast the declared columns; fail on a NULL in a NOT NULL column."""
        schema = self.table.arrow_schema
        data = data.select(schema.names)
        for f in schema:
            if not f.nullable and data.column(f.name).null_count:
                raise ValueError(f"table {self.table.name}: NULL in NOT NULL column {f.name}")
        return data.cast(schema)

    def holds(self, batch: BatchId) -> bool:
        """Whether the table already holds this batch (or a later one) of this writer."""
        done = DeltaTable(str(self.path)).transaction_version(batch.app_id)
        return done is not None and done >= batch.batch

    def write(self, data: pa.Table, batch: BatchId, *, keys: pa.Table | None = None) -> int:
        """Write one batch's rows, skipping a batch the table already has; returns rows written.
        (`keys` are in `data` already.)"""
        dt = self.open()
        done = dt.transaction_version(batch.app_id)
        if data.num_rows == 0 or (done is not None and done >= batch.batch):
            return 0
        data = self.conform(data)
        if self.table.mode == "append":
            write_deltalake(dt, data, mode="append", commit_properties=commit_properties(batch))
        else:
            predicate = " AND ".join(f"t.{k} = s.{k}" for k in self.table.key)
            merge = dt.merge(
                data,
                predicate,
                source_alias="s",
                target_alias="t",
                commit_properties=commit_properties(batch),
            )
            if self.table.mode == "add":
                merge = merge.when_matched_update(updates=added(self.table.summed))
            else:
                merge = merge.when_matched_update_all()
            merge.when_not_matched_insert_all().execute()
        return data.num_rows
