"""What a run wrote, per query and table, and the report printed at its end."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

from engine.lake.batch_records import RunRecords
from engine.plan import Plan
from engine.runtime.expectations import DROPPED, ROWS
from engine.runtime.progress import ProgressListener, QueryTotals
from engine.sinks.writer import MultiTableWriter

__all__ = ["RunResult"]


# Where lines the accounting cannot see go, and how to see them.
_UNSEEN = (
    "rows a WHERE drops before the deduplication, or lost; filter after it, or with a DROP ROW "
    "expectation, to count them"
)


@dataclass
class RunResult:
    """Per query: the writer (rows per table) and the listener's totals."""

    writers: dict[str, MultiTableWriter] = field(default_factory=dict)
    listener: ProgressListener | None = None
    #: The plan run: which views have expectations, and where they sit.
    plan: Plan | None = None
    #: Queries writing straight to Kafka that the stop cut in the middle of a batch.
    cut: set[str] = field(default_factory=set)
    #: Rows per topic of the queries that write straight to Kafka (Spark counted them).
    direct: dict[str, Counter[str]] = field(default_factory=dict)
    #: What the writers recorded per batch (engine/lake/batch_records.py).
    records: RunRecords = field(default_factory=RunRecords)
    #: A `--once` run stopped (Ctrl-C, SIGTERM) before it had read all its input.
    cut_short: bool = False

    def _totals(self, query: str) -> tuple[Counter[str], Counter[str]]:
        if query in self.direct:  # Spark's count: every row it carried, it wrote
            return self.direct[query], self.direct[query]
        return self.records.totals(self.writers[query].checkpoint)

    def rows(self, query: str) -> Counter[str]:
        """Rows the query's batches carried in this run, per table or topic."""
        return self._totals(query)[0]

    def written(self, query: str) -> Counter[str]:
        """Rows the query committed in this run, per table or topic."""
        return self._totals(query)[1]

    def report(self, out: TextIO) -> None:
        """Print rows per table and, where a query deduplicates, the input-line accounting."""
        for name, writer in self.writers.items():
            t = self.listener.totals.get(name) if self.listener else None
            written = self.written(name)
            # In the order the writer writes them (topics first).
            sinks = [s.name for s in sorted(writer.sinks, key=lambda s: s.order)]
            ordered = [k for k in sinks if k in written] + [k for k in written if k not in sinks]
            tables = ", ".join(f"{k} {written[k]:,}" for k in ordered) or "none"
            out.write(f"query {name}: {t.batches if t else 0} batches; rows written: {tables}\n")
            # The query that writes quarantine sees every input line, so it can account for them.
            rejects = [s.name for s in writer.sinks if s.quarantine]
            if t:
                self._report_checks(name, t, out)
            if t and t.deduplicates and rejects:
                carried = self.rows(name)
                quarantined = sum(carried[r] for r in rejects)
                # Rows dropped below the deduplication were already counted as events.
                after = self.plan.queries[name].drops_after_dedup if self.plan else ()
                quarantined -= sum(t.expectations.get(v, {}).get(DROPPED, 0) for v in after)
                missing = t.source_rows - (t.accepted + quarantined + t.duplicates + t.late)
                out.write(
                    f"query {name}: input lines {t.source_rows:,} = {t.accepted:,} events + "
                    f"{quarantined:,} quarantined + {t.duplicates:,} duplicates dropped + "
                    f"{t.late:,} late dropped"
                    + (f" (NOT ACCOUNTED FOR: {missing:,}: {_UNSEEN})" if missing else "")
                    + "\n"
                )
            elif t and t.late_by_group:
                out.write(
                    f"query {name}: at least {t.late:,} late dropped (rows behind the watermark; "
                    "Spark counts an aggregation's once per group and partition)\n"
                )
            elif t and t.late:
                out.write(f"query {name}: {t.late:,} late dropped (rows behind the watermark)\n")
        for name in sorted(self.cut):
            out.write(
                f"query {name}: the stop cut its running batch short; the messages that batch "
                "sent are not counted above, and a restart sends them again\n"
            )
        for totals in self.listener.totals.values() if self.listener else ():
            for handler, counts in totals.handler_counts.items():
                counted = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
                out.write(f"handler {handler}: {counted}\n")
        if self.cut_short:
            out.write("run stopped before all input was read; the next run goes on from there\n")

    def _report_checks(self, query: str, totals: QueryTotals, out: TextIO) -> None:
        """One line per view with expectations: rows checked and dropped, and each rule."""
        for view, counts in totals.expectations.items():
            step = self.plan.steps.get(view) if self.plan else None
            if step is None:
                continue
            rules = ", ".join(
                f"{e.name} {counts.get(e.name, 0):,} broken ({e.action})" for e in step.expectations
            )
            dropped = f", {counts[DROPPED]:,} dropped" if DROPPED in counts else ""
            out.write(
                f"query {query}: expectations of {view}: {counts.get(ROWS, 0):,} rows"
                f"{dropped}; {rules}\n"
            )
