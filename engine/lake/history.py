"""`history`: a Delta table's commits, newest first, with the pipeline batch that wrote each."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from engine.lake import commit_time, lake_tables
from engine.lake.guard import open_table
from engine.errors import UserError

__all__ = ["HISTORY_SCHEMA", "rows_written", "table_history"]

HISTORY_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("operation", pa.string()),
        ("rows_written", pa.int64()),
        ("pipeline", pa.string()),
        ("query", pa.string()),
        ("batch_id", pa.int64()),
    ]
)


def rows_written(operation: str, metrics: Mapping[str, Any]) -> int | None:
    """Rows a commit wrote, from delta-rs' operationMetrics (Spark's names as a fallback):
    added rows for a WRITE, inserted + updated target rows for a MERGE; None when unknown."""
    if "num_added_rows" in metrics:  # delta-rs WRITE (append, overwrite)
        return int(metrics["num_added_rows"])
    for inserted, updated in (
        ("num_target_rows_inserted", "num_target_rows_updated"),  # delta-rs MERGE
        ("numTargetRowsInserted", "numTargetRowsUpdated"),  # delta-spark MERGE
    ):
        if operation == "MERGE" and inserted in metrics:
            return int(metrics[inserted]) + int(metrics.get(updated, 0))
    for key in ("numOutputRows", "num_output_rows"):  # Spark's Delta writer, other operations
        if key in metrics:
            return int(metrics[key])
    return None


def _batch_id(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _writer_of(commit: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pipeline, query and batch_id a sink recorded: top-level keys of a delta-rs commit,
    or the JSON userMetadata of a delta-spark one."""
    if "pipeline" in commit:
        return commit
    try:
        meta = json.loads(commit.get("userMetadata") or "{}")
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def _commit_time(table: Path, commit: Mapping[str, Any]) -> dt.datetime:
    """When a version was committed, as `--as-of` compares it (what delta-rs and Delta's own
    time travel use), else, its commit file cleaned up, the time the writer recorded."""
    recorded = dt.datetime.fromtimestamp(commit["timestamp"] / 1000, tz=dt.UTC)
    return commit_time(table, commit["version"]) or recorded


def table_history(lake: Path, name: str, *, last: int | None = None) -> pa.Table:
    """The commits of one lake table, newest first (the `last` newest only, if given), with the
    batch that wrote each."""
    tables = lake_tables(lake)
    if name not in tables:
        known = ", ".join(tables) or "none"
        raise UserError(f"history: unknown table '{name}' in {lake} (tables: {known})")
    history = open_table(name, tables[name]).history(limit=last)
    commits = sorted(history, key=lambda c: -c["version"])
    rows = [
        {
            "version": c["version"],
            "timestamp": _commit_time(tables[name], c),
            # A --full-refresh's emptying commit is a plain WRITE or DELETE to Delta.
            "operation": f"{c.get('operation')} (full refresh)"
            if w.get("full_refresh")
            else c.get("operation"),
            "rows_written": rows_written(c.get("operation", ""), c.get("operationMetrics") or {}),
            "pipeline": w.get("pipeline"),
            "query": w.get("query"),
            "batch_id": _batch_id(w.get("batch_id")),
        }
        for c in commits
        for w in [_writer_of(c)]
    ]
    return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)
