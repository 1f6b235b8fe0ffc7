"""A run's events in the lake's event log (engine/lake/event_log.py): its start with settings
and versions, each batch's progress, errors and its stop. Logging never stops a pipeline: a
failure to write the log is said once on the run's output."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal, TextIO

from engine.errors import first_line
from engine.lake.batch_records import BatchRecord, RunRecords
from engine.lake.event_log import Event, EventLog
from engine.lake.guard import last_committed
from engine.sinks.writer import MultiTableWriter

__all__ = ["RunRecorder", "versions", "watermark_time"]

_PACKAGES = ("streamlake", "pyspark", "delta-spark", "deltalake", "sqlglot")


def versions() -> dict[str, str]:
    """The versions of the engine and the libraries that shape what it writes."""
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def watermark_time(text: str | None) -> dt.datetime | None:
    """A progress event's watermark as a time; None before the first, which Spark shows as 1970."""
    if not text:
        return None
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return None if when.timestamp() <= 0 else when


class RunRecorder:
    """Writes one run of one pipeline to the event log of its lake."""

    def __init__(
        self,
        lake: Path,
        pipeline: str,
        out: TextIO,
        *,
        rules: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    ) -> None:
        self.log = EventLog(lake)
        self.pipeline = pipeline
        #: Per view with expectations, its rules' names by action (`by_action`): logged with
        #: the view's counts, which alone do not say whether a broken rule dropped its rows.
        self.rules = rules or {}
        self.run_id = uuid.uuid4().hex
        self.out = out
        #: The query writers, by query name: their ids make batch events idempotent.
        self.writers: dict[str, MultiTableWriter] = {}
        #: What each batch's writer recorded beside its checkpoint, taken as batches are logged.
        self.records = RunRecords()
        self._warned = False
        self._lock = threading.Lock()

    def _event(self, kind: Any, **fields: Any) -> Event:
        return Event(kind=kind, run_id=self.run_id, pipeline=self.pipeline, **fields)

    def _append(self, events: Sequence[Event], batch: tuple[str, int] | None = None) -> None:
        with self._lock:
            try:
                self.log.append(events, batch=batch)
            except Exception as err:  # the data matters more than its log
                if not self._warned:
                    self._warned = True
                    self.out.write(f"event log: not written ({first_line(err)})\n")

    def start(self, details: Mapping[str, Any], *, changes: Sequence[str] = ()) -> None:
        """The run starts: its settings, what it does to the lake and what changed in the
        logic since the last run (`changes`), and the batches a stop left unlogged."""
        message = "; ".join(changes) or None
        self._append([self._event("run_start", status="started", message=message, details=details)])
        for name, writer in self.writers.items():
            self._recover(name, writer)

    def _recover(self, query: str, writer: MultiTableWriter) -> None:
        # A stop between Spark's commit of a batch and its event leaves the batch unlogged;
        # it will not run again, so it is logged now, without figures.
        committed = last_committed(writer.checkpoint)
        if committed is None:
            return  # a new checkpoint: its id (part of the writer's) does not exist yet
        logged = self.log.logged(writer.app_id)
        if logged is not None and logged >= committed:
            return
        first = 0 if logged is None else logged + 1
        events = [
            self._event("batch", query=query, batch_id=b, details={"recovered": True})
            for b in range(first, committed + 1)
        ]
        self._append(events, batch=(writer.app_id, committed))

    def batch(
        self,
        query: str,
        progress: Any,
        figures: Mapping[str, int],
        checks: Mapping[str, Mapping[str, int]],
        *,
        counted: Mapping[str, Mapping[str, int]] | None = None,
    ) -> dict[str, dict[str, int]]:
        """One batch's progress (Spark's `StreamingQueryProgress`), our counts of it, and the
        expectation and handler counts Spark observed; returns the expectation counts with the
        writer's own added (the views computed on the batch); all are logged."""
        checks = {view: dict(counts) for view, counts in checks.items()}
        writer = self.writers.get(query)
        if writer is None:
            return checks
        record = self.records.take(writer.checkpoint, progress.batchId) or BatchRecord()
        # The same rows, where a view is computed in both parts of the query.
        checks.update(record.checks)
        written = record.written
        rows_out = sum(written.values()) if written else max(0, progress.sink.numOutputRows)
        rules = {view: self.rules[view] for view in checks if view in self.rules}
        event = self._event(
            "batch",
            query=query,
            batch_id=progress.batchId,
            rows_in=figures["rows_in"],
            rows_out=rows_out,
            duplicates=figures.get("duplicates"),
            late=figures.get("late"),
            state_rows=figures["state_rows"],
            watermark=watermark_time(progress.eventTime.get("watermark")),
            duration_ms=progress.batchDuration,
            details={
                "rows_written": written,
                "durations_ms": dict(progress.durationMs),
                **({"expectations": checks} if checks else {}),
                **({"rules": rules} if rules else {}),
                **({"handler_counts": dict(counted)} if counted else {}),
            },
        )
        self._append([event], batch=(writer.app_id, progress.batchId))
        return checks

    def error(
        self,
        query: str | None,
        message: str,
        *,
        status: Literal["failed", "waiting", "resumed"] = "failed",
    ) -> None:
        """A query failed or stopped to be retried ("failed"), or its running source waits on
        its broker ("waiting") and got an answer again ("resumed")."""
        self._append([self._event("error", query=query, status=status, message=message)])

    def stop(self, *, status: str, message: str | None = None, rows: Mapping[str, int]) -> None:
        """The run ends: how, and the rows it wrote per table."""
        event = self._event(
            "run_stop", status=status, message=message, details={"rows_written": dict(rows)}
        )
        self._append([event])
