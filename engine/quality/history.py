"""Validations in the lake's event log: one event per table validated, and each table's
checks and rows written over time for the report page."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from engine.lake.event_log import Event, EventLog
from engine.quality.html import Check, TableHistory
from engine.quality.report import TableResult

__all__ = ["log_results", "table_history"]


def table_history(lake: Path, tables: Sequence[str]) -> dict[str, TableHistory]:
    """Each table's validations and rows written over time, from the lake's event log."""
    events = EventLog(lake).read()
    events = events.filter(pc.is_in(events["kind"], pa.array(["batch", "quality"])))
    checks: dict[str, list[Check]] = {t: [] for t in tables}
    written: dict[str, list[tuple[dt.datetime, int]]] = {t: [] for t in tables}
    for row in events.to_pylist():
        details = json.loads(row["details"] or "{}")
        if row["kind"] == "quality" and row["table_name"] in checks:
            checks[row["table_name"]].append(
                Check(
                    at=row["event_time"],
                    passed=row["status"] == "passed",
                    rows=row["rows_in"] or 0,
                    whole=str(details.get("scope", "")).startswith("whole table"),
                    failed=tuple(details.get("failed", [])),
                )
            )
        elif row["kind"] == "batch":
            # A recovered batch has no figures; a batch that wrote nothing here adds no point.
            for table, rows in (details.get("rows_written") or {}).items():
                if table in written and rows:
                    total = (written[table][-1][1] if written[table] else 0) + rows
                    written[table].append((row["event_time"], total))
    return {
        t: TableHistory(
            checks=checks[t],
            written=written[t],
            counted=[(c.at, c.rows) for c in checks[t] if c.whole],
        )
        for t in tables
    }


def log_results(lake: Path, results: Sequence[TableResult], now: dt.datetime) -> None:
    """One `quality` event per validated table in the lake's event log (run id: this
    validation), so pass/fail over time is a query."""
    run_id = f"quality-{now:%Y%m%dT%H%M%S%fZ}"
    events = [
        Event(
            kind="quality",
            run_id=run_id,
            rows_in=r.rows,
            status="passed" if r.passed else "failed",
            table_name=r.table,
            event_time=now,
            details={
                "version": r.version,
                "scope": r.scope,
                "expectations": len(r.expectations),
                "failed": [o.describe() for o in r.expectations if not o.success],
            },
        )
        for r in results
    ]
    if events:
        EventLog(lake).append(events)
