"""The lake's event log: a Delta table `_event_log` of what every run did (start and stop with
settings and versions, each batch's progress, errors, quality results), queried like any table.

Batch events are idempotent like the tables: each is written in a Delta transaction of its
query's writer (`engine.lake.guard.writer_id`) at the batch's id, so a replayed or recovered
batch is logged once.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from engine.lake import read_arrow

__all__ = ["EVENT_LOG", "SCHEMA", "Event", "EventKind", "EventLog", "event_lines", "written_to"]

EVENT_LOG = "_event_log"
EventKind = Literal["run_start", "run_stop", "batch", "error", "quality"]
_UTC_US = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        pa.field("event_time", _UTC_US, nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("pipeline", pa.string()),
        pa.field("query", pa.string()),
        pa.field("batch_id", pa.int64()),
        #: The table a quality event is about.
        pa.field("table_name", pa.string()),
        pa.field("rows_in", pa.int64()),
        pa.field("rows_out", pa.int64()),
        pa.field("duplicates", pa.int64()),
        pa.field("late", pa.int64()),
        pa.field("state_rows", pa.int64()),
        pa.field("watermark", _UTC_US),
        pa.field("duration_ms", pa.int64()),
        pa.field("status", pa.string()),
        pa.field("message", pa.string()),
        #: Everything else, as JSON: settings and versions, rows per table, durations, results.
        pa.field("details", pa.string()),
    ]
)


@dataclass(frozen=True)
class Event:
    """One row of the event log; unset figures are NULL."""

    kind: EventKind
    run_id: str
    pipeline: str | None = None
    query: str | None = None
    batch_id: int | None = None
    table_name: str | None = None
    rows_in: int | None = None
    rows_out: int | None = None
    duplicates: int | None = None
    late: int | None = None
    state_rows: int | None = None
    watermark: dt.datetime | None = None
    duration_ms: int | None = None
    status: str | None = None
    message: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    event_time: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def row(self) -> dict[str, Any]:
        """The event as a row of SCHEMA."""
        values = {name: getattr(self, name) for name in SCHEMA.names}
        values["details"] = json.dumps(self.details, sort_keys=True, default=str)
        return values


class EventLog:
    """The `_event_log` table of a lake, written with delta-rs from the driver."""

    def __init__(self, lake: Path) -> None:
        self.path = lake / EVENT_LOG

    def _table(self) -> DeltaTable:
        if DeltaTable.is_deltatable(str(self.path)):
            return DeltaTable(str(self.path))
        return DeltaTable.create(
            str(self.path),
            schema=SCHEMA,
            mode="ignore",
            name=EVENT_LOG,
            description="What every run of every pipeline did (python runner.py log)",
        )

    def logged(self, app_id: str) -> int | None:
        """The newest batch of this writer in the log (None: none yet)."""
        if not DeltaTable.is_deltatable(str(self.path)):
            return None
        return DeltaTable(str(self.path)).transaction_version(app_id)

    def append(self, events: Sequence[Event], *, batch: tuple[str, int] | None = None) -> bool:
        """Append events in one commit; with `batch` (writer id, batch id) only once per batch.
        Returns whether anything was written."""
        table = self._table()
        if batch is not None:
            done = table.transaction_version(batch[0])
            if done is not None and done >= batch[1]:
                return False
        data = pa.Table.from_pylist([e.row() for e in events], schema=SCHEMA)
        props = None
        if batch is not None:
            props = CommitProperties(app_transactions=[Transaction(*batch)])
        write_deltalake(table, data, mode="append", commit_properties=props)
        return True

    def read(
        self,
        *,
        pipeline: str | None = None,
        tables: Collection[str] = (),
        last: int | None = None,
    ) -> pa.Table:
        """The events, oldest first: if `pipeline` is named, its own events and the quality
        results of `tables` (the tables it writes) only; the newest `last` only if given."""
        if not DeltaTable.is_deltatable(str(self.path)):
            return SCHEMA.empty_table()
        data = read_arrow(DeltaTable(str(self.path)))
        rows = sorted(data.to_pylist(), key=lambda r: (r["event_time"], r["kind"]))
        if pipeline is not None:
            rows = [r for r in rows if _belongs(r, pipeline, tables)]
        if last is not None:
            rows = rows[-last:] if last > 0 else []
        return pa.Table.from_pylist(rows, schema=SCHEMA)


def _belongs(row: Mapping[str, Any], pipeline: str, tables: Collection[str]) -> bool:
    """Whether an event is the pipeline's: a validation is of a table, not of a run, so its
    event names no pipeline and belongs to every pipeline that writes the table (a shared
    `quarantine` to each of them)."""
    if row["kind"] == "quality":
        return row["table_name"] in tables
    return row["pipeline"] == pipeline


def written_to(events: pa.Table) -> set[str]:
    """The tables (and `kafka:` topics) the batches and runs among `events` wrote rows to."""
    return {
        name
        for row in events.to_pylist()
        if row["kind"] in ("batch", "run_stop")
        for name in (json.loads(row["details"] or "{}").get("rows_written") or {})
    }


def _count(n: int | None, word: str) -> str | None:
    return None if n is None else f"{n:,} {word}"


def _checks(view: str, counts: Mapping[str, int], rules: Mapping[str, Sequence[str]]) -> str:
    """A view's expectations in a batch, as the run's report line counts them: rows checked,
    dropped (by its DROP ROW rules, each with its broken rows), and the warn rules broken
    (their rows kept). `rules` lists the view's rules by action (`drop`, `warn`) as the
    batch's event recorded them; a rule it does not list (an event logged before actions were
    recorded) is named apart, without saying what it did."""
    broken = {name: n for name, n in counts.items() if name not in ("rows", "dropped") and n}

    def listed(names: Iterable[str]) -> str:
        return ", ".join(f"{name} {broken[name]:,}" for name in names if name in broken)

    drops, warns = list(rules.get("drop", ())), list(rules.get("warn", ()))
    parts = [f"{view}: {counts.get('rows', 0):,} checked"]
    if "dropped" in counts:
        dropped = listed(drops)
        parts.append(f"{counts['dropped']:,} dropped" + (f" ({dropped})" if dropped else ""))
    if warned := listed(warns):
        parts.append(f"warned: {warned}")
    if other := listed(name for name in broken if name not in (*drops, *warns)):
        parts.append(f"broken: {other}")
    return ", ".join(parts)


def _summary(row: Mapping[str, Any]) -> str:
    details = json.loads(row["details"] or "{}")
    kind = row["kind"]
    if kind == "batch":
        parts = [
            _count(row["rows_in"], "in"),
            _count(row["rows_out"], "out"),
            _count(row["duplicates"], "duplicates") if row["duplicates"] else None,
            _count(row["late"], "late") if row["late"] else None,
            _count(row["state_rows"], "state rows"),
            f"watermark {row['watermark']:%Y-%m-%d %H:%M:%S}" if row["watermark"] else None,
            f"{row['duration_ms']:,} ms" if row["duration_ms"] is not None else None,
            "recovered after a stop (no figures)" if details.get("recovered") else None,
            *(
                _checks(view, counts, details.get("rules", {}).get(view, {}))
                for view, counts in details.get("expectations", {}).items()
            ),
        ]
        return ", ".join(p for p in parts if p)
    if kind == "run_start":
        run = ", ".join(f"{k} {v}" for k, v in sorted(details.get("run", {}).items()))
        return f"{run}; {row['message']}" if row["message"] else run
    if kind == "quality":
        failed = "; ".join(details.get("failed", []))
        return f"{row['table_name']}: {row['status']}" + (f" ({failed})" if failed else "")
    written = details.get("rows_written") or {}
    rows = ", ".join(f"{name} {n:,}" for name, n in written.items())
    said = " ".join(p for p in (row["status"], row["message"]) if p)
    return f"{said}; rows written: {rows}" if rows else said


def event_lines(events: pa.Table) -> list[str]:
    """One readable line per event: time, pipeline and query, kind and batch, what happened."""
    lines = []
    for row in events.to_pylist():
        where = ".".join(p for p in (row["pipeline"], row["query"]) if p) or "-"
        kind = row["kind"] + (f" {row['batch_id']}" if row["batch_id"] is not None else "")
        time = row["event_time"].astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{time}  {where:<24} {kind:<12} {_summary(row)}".rstrip())
    return lines
