"""What a validation found, table by table, and where its report files are."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from engine.lake.values import json_safe

__all__ = ["Outcome", "QualityReport", "TableResult", "default_report_dir", "jsonable"]


def default_report_dir(lake: Path) -> Path:
    """Where reports go unless `--report` says otherwise."""
    return lake / "_quality"


@dataclass(frozen=True)
class Outcome:
    """One expectation's result."""

    expectation: str
    success: bool
    unexpected_count: int | None
    observed_value: Any = None
    #: A few of the values that broke it, as JSON text (`"GBP"`, `-4.0`); no NULLs.
    examples: tuple[str, ...] = ()

    def describe(self) -> str:
        """E.g. `expect_column_values_to_be_in_set(currency) 1 unexpected (e.g. "GBP")`."""
        if self.unexpected_count is None:
            return f"{self.expectation} observed {self.observed_value}"
        seen = f" (e.g. {', '.join(self.examples)})" if self.examples else ""
        return f"{self.expectation} {self.unexpected_count} unexpected{seen}"


@dataclass(frozen=True)
class TableResult:
    """The validation of one table at one Delta version."""

    table: str
    version: int
    scope: str
    rows: int
    passed: bool
    expectations: list[Outcome] = field(default_factory=list)

    def line(self) -> str:
        """The one line printed per table."""
        rows = f"{self.rows:,} row{'' if self.rows == 1 else 's'}"
        where = f"version {self.version}, {self.scope}, {rows}"
        if not self.rows:  # no expectation ran: "0 expectations" read as an empty suite
            return f"{self.table}: passed (no rows to check; version {self.version}, {self.scope})"
        failed = [o for o in self.expectations if not o.success]
        if not failed:
            return f"{self.table}: passed ({len(self.expectations)} expectations; {where})"
        detail = "; ".join(o.describe() for o in failed)
        return f"{self.table}: FAILED {len(failed)} of {len(self.expectations)}: {detail} ({where})"


@dataclass
class QualityReport:
    """Every table's result, and where the report files are."""

    report_dir: Path
    results: list[TableResult] = field(default_factory=list)
    #: Tables left out, each with why: `not in the lake`, or `no suite quality/suites/T.yaml`.
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when every validated table passed."""
        return all(r.passed for r in self.results)

    @property
    def summary_path(self) -> Path:
        """The machine-readable summary."""
        return self.report_dir / "summary.json"

    @property
    def page(self) -> Path:
        """The report page a person opens (self-contained HTML)."""
        return self.report_dir / "index.html"

    @property
    def docs_index(self) -> Path:
        """The Data Docs home page."""
        return self.report_dir / "data_docs" / "index.html"

    def print(self, out: TextIO) -> None:
        """One line per table, then where the report is."""
        for name, why in self.skipped.items():
            out.write(f"{name}: skipped ({why})\n")
        for r in self.results:
            out.write(r.line() + "\n")
        out.write(
            f"quality report: {self.page} (summary: {self.summary_path}; "
            f"Data Docs: {self.docs_index})\n"
        )


def jsonable(value: Any) -> Any:
    """`value` as strict JSON reads it back: non-finite floats (an observed value can be one)
    as `engine.lake.values.json_safe` spells them, anything else JSON lacks as text."""
    return json.loads(json.dumps(json_safe(value), default=str, allow_nan=False))
