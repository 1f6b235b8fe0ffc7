"""The foreachBatch of a query: each batch's rows written to its tables and topics."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from engine.errors import UserError
from engine.lake.batch_records import BatchRecord, read_record, write_record
from engine.lake.guard import batch_time_ms, record_batch, writer_id
from engine.sinks import BatchId, Sink

__all__ = ["MultiTableWriter"]


class MultiTableWriter:
    """The foreachBatch function of a query: writes each table's and topic's rows.

    Topics go first, so alerts leave as soon as the batch is computed. Tables are idempotent
    per batch; a topic is not, so when every table already holds the batch (an earlier attempt
    got that far, hence past the topics) the topics are not sent again. Only the first batch
    a writer sees, or one it has seen before, can be such a replay, so only then are the
    tables' transaction logs read.
    """

    def __init__(
        self,
        *,
        pipeline: str,
        query: str,
        sinks: Sequence[Sink],
        checkpoint: Path,
        views: Callable[[DataFrame, int], tuple[list[DataFrame], dict[str, dict[str, int]]]],
    ) -> None:
        self.pipeline = pipeline
        #: From a batch's rows and its timestamp (ms) to one DataFrame per sink, and the
        #: expectation counts of the views computed on the batch (engine/runtime/batch_views.py).
        self.views = views
        self.query = query
        self.sinks = list(sinks)
        self.checkpoint = checkpoint
        self._last_batch: int | None = None

    @cached_property
    def app_id(self) -> str:
        """Delta transaction id: a new checkpoint is a new writer, so its batch 0 is written."""
        return writer_id(self.pipeline, self.query, self.checkpoint)

    def _held(self, batch: BatchId) -> set[int]:
        """The sinks (by index) whose table already holds the batch: all tables when topics
        must not be sent again, since the tables are written after the topics."""
        if self._last_batch is not None and batch.batch > self._last_batch:
            return set()  # a batch this writer has not seen: no table can hold it
        tells = {i for i, s in enumerate(self.sinks) if s.transactional}
        held = {i for i in tells if self.sinks[i].holds(batch)}
        if tells and held == tells:
            held |= set(range(len(self.sinks)))  # the others were written before them
        return held

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        batch = BatchId(self.app_id, batch_id, self.pipeline, self.query)
        if self._last_batch is None:
            for sink in self.sinks:
                sink.claim(pipeline=self.pipeline, query=self.query, checkpoint=self.checkpoint)
        held = self._held(batch)
        self._last_batch = batch_id if self._last_batch is None else max(self._last_batch, batch_id)
        # Every sink reads the batch's rows: compute them once.
        df.persist()
        try:
            at = batch_time_ms(self.checkpoint, batch_id)
            parts, checks = self.views(df, at if at is not None else int(time.time() * 1000))
            order = sorted(enumerate(self.sinks), key=lambda e: e[1].order)
            # An attempt of this run that failed may have written some tables already.
            earlier = read_record(self.checkpoint, batch_id)
            record = BatchRecord(written=dict(earlier.written) if earlier else {}, checks=checks)
            filled = []
            for i, sink in order:
                rows = self._write(sink, parts[i], batch, held=i in held)
                record.rows[sink.name] = rows
                record.written[sink.name] = record.written.get(sink.name, 0) + (
                    0 if i in held else rows
                )
                # After each sink, so a failure further on leaves what was committed.
                write_record(self.checkpoint, batch_id, record)
                if rows and sink.transactional:
                    filled.append(sink.name)
            # Before Spark commits the batch: a table that later lacks it is noticed.
            record_batch(self.checkpoint, filled, batch_id)
        finally:
            df.unpersist()

    def restart(self) -> None:
        """Before the query starts again after a failure: the sinks are claimed again at its
        first batch, and a topic sink opens a new producer there."""
        self._last_batch = None

    @staticmethod
    def _write(sink: Sink, part: DataFrame, batch: BatchId, *, held: bool) -> int:
        """Write one sink's rows unless its table holds the batch; returns the rows."""
        if sink.takes == "arrow":
            data = part.toArrow()
            if data.num_rows and not held:
                _refuse_repeated_keys(sink, data)
                sink.write(data, batch)
            return data.num_rows
        part.persist()
        try:
            # A merged table's key columns on the driver cost about what the count they replace
            # costs; a grouping job in Spark cost 3 to 5 times that, and the MERGE takes its
            # key ranges from them too (docs/decisions.md).
            keys = part.select(*sink.merge_key).toArrow() if sink.merge_key else None
            rows = part.count() if keys is None else keys.num_rows
            if rows and not held:
                if keys is not None:
                    _refuse_repeated_keys(sink, keys)
                sink.write(part, batch, keys=keys)
            return rows
        finally:
            part.unpersist()


def _refuse_repeated_keys(sink: Sink, data: pa.Table) -> None:
    """Stop the batch, naming one key it holds twice, where the sink takes one row per key."""
    if not sink.unique_key:
        return
    key = list(sink.unique_key)
    keyed = data.select(key).drop_null()  # a NULL key matches no row: MERGE inserts it
    counts = keyed.group_by(key).aggregate([([], "count_all")])
    repeated = counts.filter(pc.field("count_all") > 1).slice(0, 1).to_pylist()
    if not repeated:
        return
    count = repeated[0].pop("count_all")
    found = " and ".join(
        f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in repeated[0].items()
    )
    raise UserError(
        f"{sink.where}: table {sink.name} is merged by its key ({', '.join(key)}), and a batch "
        f"has {count} rows with {found}: its view must give one row per key in a batch (group "
        "it by the key), or make the table lake.mode 'append'"
    )
