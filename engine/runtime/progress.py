"""Live progress per query and the end-of-run accounting, from Spark's progress events."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)

from engine.runtime.events import RunRecorder, watermark_time
from engine.runtime.expectations import views_of_metrics
from engine.runtime.handler_adapter import handler_counts

__all__ = ["ProgressListener", "QueryTotals"]


@dataclass
class QueryTotals:
    """What one query did in this run, summed over its batches."""

    batches: int = 0
    last_batch: int = -1
    source_rows: int = 0  # input records read, each counted once
    accepted: int = 0  # rows kept by deduplication (new keys)
    duplicates: int = 0
    late: int = 0  # rows behind the watermark, dropped by the deduplication or an aggregation
    sink_rows: int = 0  # rows Spark's own sink wrote (a query without foreachBatch)
    # The query has a deduplication step, so the three counts above mean something.
    deduplicates: bool = False
    #: An aggregation dropped some of `late`: Spark counts those after its partial aggregation,
    #: once per group and partition, so `late` is the least number of rows dropped.
    late_by_group: bool = False
    #: Expectations: rows checked and rows breaking each rule, per view (view -> name -> n).
    expectations: dict[str, Counter[str]] = field(default_factory=dict)
    #: What the handlers counted (`Step.counts`): handler -> name -> n.
    handler_counts: dict[str, Counter[str]] = field(default_factory=dict)

    def add_checks(self, checks: Mapping[str, Mapping[str, int]]) -> None:
        """Add one batch's expectation counts."""
        for view, counts in checks.items():
            self.expectations.setdefault(view, Counter()).update(counts)


def _dedupe_counts(operators: list[Any]) -> tuple[int, int, int] | None:
    # The planner allows one deduplication per query (engine/plan), so the first is it.
    for op in operators:
        if op.operatorName.startswith("dedupe"):
            duplicates = int(op.customMetrics.get("numDroppedDuplicateRows", 0))
            return op.numRowsUpdated, duplicates, op.numRowsDroppedByWatermark
    return None


class ProgressListener(StreamingQueryListener):
    """Prints one line per batch that did something, and sums totals per query name."""

    def __init__(
        self,
        out: TextIO = sys.stdout,
        *,
        quiet: bool = False,
        recorder: RunRecorder | None = None,
    ) -> None:
        self.out = out
        self.quiet = quiet
        #: Where each batch's progress is logged (the lake's event log).
        self.recorder = recorder
        # Each streaming output of a query is a branch that reads the source itself; Spark
        # counts every read, so input rows are divided by the branches to count records once.
        self.branches: dict[str, int] = {}
        self.totals: dict[str, QueryTotals] = {}
        #: Each query's latest run id (a restarted query gets a new one).
        self.runs: dict[str, str] = {}
        #: Run ids of the queries that ended: their last progress event came before.
        self._ended: set[str] = set()
        self._lock = threading.Lock()

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        name = event.name or str(event.id)
        with self._lock:
            self.totals.setdefault(name, QueryTotals())
            self.runs[name] = str(event.runId)

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        p = event.progress
        name = p.name or str(p.id)
        dedupe = _dedupe_counts(p.stateOperators)
        accepted, duplicates, late = dedupe or (0, 0, 0)
        if dedupe is None:
            # An aggregation (or a handler on event time) drops the rows behind its watermark
            # too: counted here, or such a row would leave no trace.
            late = sum(op.numRowsDroppedByWatermark for op in p.stateOperators)
        by_group = any(
            op.numRowsDroppedByWatermark and "statestoresave" in op.operatorName.lower()
            for op in p.stateOperators
        )
        state_rows = sum(op.numRowsTotal for op in p.stateOperators)
        watermark = watermark_time(p.eventTime.get("watermark"))
        branches = self.branches.get(name, 1)
        rows_in = p.numInputRows // branches
        rate = p.processedRowsPerSecond / branches
        checks = views_of_metrics(p.observedMetrics)
        counted = handler_counts(p.observedMetrics)
        if self.recorder is not None:
            # Before the totals: a run that waits for its last batch's totals finds it logged.
            figures = {"rows_in": rows_in, "state_rows": state_rows}
            if dedupe is not None:
                figures.update(duplicates=duplicates, late=late)
            elif p.stateOperators:
                figures.update(late=late)
            checks = self.recorder.batch(name, p, figures, checks, counted=counted)
        with self._lock:
            t = self.totals.setdefault(name, QueryTotals())
            t.batches += 1
            t.last_batch = max(t.last_batch, p.batchId)
            t.source_rows += rows_in
            t.accepted += accepted
            t.duplicates += duplicates
            t.late += late
            t.sink_rows += max(0, p.sink.numOutputRows)
            t.deduplicates |= dedupe is not None
            t.late_by_group |= by_group
            t.add_checks(checks)
            for handler, counts in counted.items():
                t.handler_counts.setdefault(handler, Counter()).update(counts)
        if not self.quiet and (rows_in or t.batches == 1):
            shown = watermark.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if watermark else "-"
            self.out.write(
                f"[{name}] batch {p.batchId}: {rows_in:,} rows in, "
                f"{rate:,.0f} rows/s, state {state_rows:,} rows, "
                f"watermark {shown}\n"
            )
            self.out.flush()

    def wait_for_end(self, run_id: str, timeout_s: float = 10.0) -> bool:
        """Progress events arrive asynchronously, and a query's come before its termination:
        wait until the run `run_id` of a stopped query has ended; False if it did not in time."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if run_id in self._ended:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        with self._lock:
            self._ended.add(str(event.runId))
