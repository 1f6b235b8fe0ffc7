"""One streaming query writing several tables: a tagged union of views, split per batch."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from functools import cached_property, reduce
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.errors import UserError
from engine.kafka_sink import TopicSink
from engine.sinks import BatchId, DeltaSink
from engine.tables import TableDef

Sink = DeltaSink | TopicSink

__all__ = ["MultiTableWriter", "tag_views"]


def _struct_ddl(table: TableDef) -> str:
    return "STRUCT<" + ", ".join(f"{c.name}: {c.ddl_type}" for c in table.columns) + ">"


def tag_views(views: Sequence[tuple[TableDef, str, DataFrame]]) -> DataFrame:
    """Union the views into one stream: column `_sink` says which table a row is for.

    Row i's table columns sit in struct `_s<i>`; the other structs are NULL. One query then
    reads its source once per batch and commits every table under the same batch id.
    """
    tagged = []
    for i, (table, view, df) in enumerate(views):
        missing = [c.name for c in table.columns if c.name not in df.columns]
        if missing:
            raise UserError(
                f"{table.path}: view '{view}' lacks column(s) {', '.join(missing)} "
                f"of table {table.name}"
            )
        own = F.struct(*[F.col(c.name).cast(c.ddl_type).alias(c.name) for c in table.columns])
        structs = [
            own.alias(f"_s{j}") if j == i else F.lit(None).cast(_struct_ddl(t)).alias(f"_s{j}")
            for j, (t, _, _) in enumerate(views)
        ]
        tagged.append(df.select(F.lit(i).alias("_sink"), *structs))
    return reduce(DataFrame.unionByName, tagged)


class MultiTableWriter:
    """The foreachBatch function of a query: writes each table's and topic's rows.

    Topics go first, so alerts leave as soon as the batch is computed. Tables are idempotent
    per batch; a topic is not, so when every table already holds the batch (an earlier attempt
    got that far, hence past the topics) the topics are not sent again. Only the first batch
    a writer sees, or one it has seen before, can be such a replay, so only then are the
    tables' transaction logs read.
    """

    def __init__(
        self, *, pipeline: str, query: str, sinks: Sequence[Sink], checkpoint: Path
    ) -> None:
        self.pipeline = pipeline
        self.query = query
        self.sinks = list(sinks)
        self.checkpoint = checkpoint
        self.rows: Counter[str] = Counter()  # rows the batches carried, per table
        self.written: Counter[str] = Counter()  # rows committed (0 for a batch already written)
        self._last_batch: int | None = None
        self._lock = threading.Lock()

    @cached_property
    def app_id(self) -> str:
        """Delta transaction id: a new checkpoint is a new writer, so its batch 0 is written."""
        query_id = json.loads((self.checkpoint / "metadata").read_text())["id"]
        return f"{self.pipeline}.{self.query}.{query_id}"

    def _held(self, batch: BatchId) -> set[int]:
        """The sinks (by index) whose table already holds the batch: all tables when topics
        must not be sent again, since the tables are written after the topics."""
        if self._last_batch is not None and batch.batch > self._last_batch:
            return set()  # a batch this writer has not seen: no table can hold it
        tables = {i for i, s in enumerate(self.sinks) if isinstance(s, DeltaSink)}
        held = {i for i in tables if self.sinks[i].has(batch)}
        if tables and held == tables:
            held |= {i for i, s in enumerate(self.sinks) if isinstance(s, TopicSink)}
        return held

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        batch = BatchId(self.app_id, batch_id, self.pipeline, self.query)
        held = self._held(batch)
        self._last_batch = batch_id if self._last_batch is None else max(self._last_batch, batch_id)
        # Every sink reads a slice of the batch: compute it once.
        df.persist()
        try:
            counts = {r["_sink"]: r["count"] for r in df.groupBy("_sink").count().collect()}
            order = sorted(enumerate(self.sinks), key=lambda e: isinstance(e[1], DeltaSink))
            for i, sink in order:
                rows = counts.get(i, 0)
                if rows and i not in held:
                    part = df.where(F.col("_sink") == i).select(f"_s{i}.*")
                    sink.write(part.toArrow() if sink.takes == "arrow" else part, batch)
                with self._lock:
                    self.rows[sink.table.name] += rows
                    self.written[sink.table.name] += 0 if i in held else rows
        finally:
            df.unpersist()
