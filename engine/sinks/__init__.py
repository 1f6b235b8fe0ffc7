"""Where a query's rows go: Delta tables (delta-rs or Spark) and Kafka topics, one protocol.

The writer (`engine.sinks.writer`) knows sinks only through `Sink`: it writes them in `order`,
asks a sink whether it `holds` a batch already, and counts the rows of the ones that hold
rejected input (`quarantine`) for the run's accounting.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import pyarrow as pa

from engine.definitions.tables import Column

__all__ = ["BatchId", "Sink"]


@dataclass(frozen=True)
class BatchId:
    """Who writes: the app id (pipeline, query, checkpoint) and Spark's batch id."""

    app_id: str
    batch: int
    pipeline: str
    query: str


class Sink(Protocol):
    """A target of a query's batches."""

    #: The name shown in the run's report: the table's name, or `kafka:<topic>`.
    name: str
    #: The declaration the error messages point at (a table's DDL, the pipeline's spec).
    where: Path
    #: The columns a batch's rows are selected and cast to, in order.
    columns: tuple[Column, ...]
    #: Lower first within a batch: topics (0) go before tables (1), so alerts leave first.
    order: int
    #: Whether the rows are rejected input (the quarantine table).
    quarantine: bool
    #: Whether each batch's id is kept with its rows (a Delta table's transactions), so that
    #: `holds` can tell and the lake guard checks it; topics go first since they cannot.
    transactional: bool
    #: The form `write` takes a batch in: Arrow collected to the driver, or a Spark DataFrame.
    takes: Literal["arrow", "dataframe"]
    #: Columns whose values a batch may hold once each (a merged table's key: MERGE fails on
    #: two rows for one key, or inserts both where the table has none); empty for any rows.
    unique_key: tuple[str, ...]
    #: The columns a MERGE matches a batch's rows on (a merged or `add` table's key); empty
    #: where rows are appended or sent.
    merge_key: tuple[str, ...]

    def holds(self, batch: BatchId) -> bool:
        """Whether this batch was written before (always False where not `transactional`)."""
        ...

    def claim(self, *, pipeline: str, query: str, checkpoint: Path) -> None:
        """Called before the first batch of each start of the query: a table records its
        writer."""
        ...

    def write(self, data: Any, batch: BatchId, *, keys: pa.Table | None = None) -> int:
        """Write one batch's rows (skipping a batch already held); returns rows written.
        `keys`: the batch's `merge_key` columns, where the writer read them."""
        ...
