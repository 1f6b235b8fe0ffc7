"""One streaming query writing several tables: a tagged union of views, split per batch."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from functools import cached_property, reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
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
    got that far, hence past the topics) the topics are not sent again.
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
        self._lock = threading.Lock()

    @cached_property
    def app_id(self) -> str:
        """Delta transaction id: a new checkpoint is a new writer, so its batch 0 is written."""
        query_id = json.loads((self.checkpoint / "metadata").read_text())["id"]
        return f"{self.pipeline}.{self.query}.{query_id}"

    def _topics_due(self, batch: BatchId) -> bool:
        """False when every table already holds the batch: its topics were sent before."""
        if not any(isinstance(s, TopicSink) for s in self.sinks):
            return False  # nothing to send; spares reading the tables' logs every batch
        tables = [s for s in self.sinks if isinstance(s, DeltaSink)]
        return not tables or not all(s.has(batch) for s in tables)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        data = df.toArrow()
        batch = BatchId(self.app_id, batch_id, self.pipeline, self.query)
        order = sorted(enumerate(self.sinks), key=lambda e: isinstance(e[1], DeltaSink))
        send_topics = self._topics_due(batch)
        for i, sink in order:
            if isinstance(sink, TopicSink) and not send_topics:
                continue
            part = data.filter(pc.equal(data.column("_sink"), i)).column(f"_s{i}")
            rows = (
                pa.Table.from_struct_array(part)
                if len(part)
                else sink.table.arrow_schema.empty_table()
            )
            written = sink.write(rows, batch)
            with self._lock:
                self.rows[sink.table.name] += rows.num_rows
                self.written[sink.table.name] += written
