"""`quality`: validate the lake's Delta tables with their Great Expectations suites, and report."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TextIO

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
from deltalake import DeltaTable

from engine.definitions.suites import FINITE_SUFFIX
from engine.definitions.tables import TableDef, load_tables
from engine.errors import UserError
from engine.lake import dataset, lake_tables, read_arrow, scanner
from engine.lake.event_log import Event, EventLog
from engine.lake.guard import open_table
from engine.lake.values import json_safe
from engine.project import PROJECT, Project, shown
from engine.quality.html import Check, TableHistory, write_report_html
from engine.quality.suites import Suite, load_suites

__all__ = ["Outcome", "QualityReport", "TableResult", "default_report_dir", "validate_lake"]

_DOCS_SITE = "quality"
#: Validations per table in the report page's pass/fail strip.
_HISTORY = 10
_COLUMN_ARGS = ("column", "column_A", "column_B", "column_list")


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


def _label(config: Any) -> str:
    kwargs = config.kwargs
    cols: list[str] = []
    for arg in _COLUMN_ARGS:
        value = kwargs.get(arg)
        cols.extend(value if isinstance(value, list) else [value] if value else [])
    return f"{config.type}({', '.join(cols)})"


class _Validator:
    """An ephemeral GX context (nothing written to the project) whose Data Docs go to a folder."""

    def __init__(self, docs_dir: Path) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self._gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.enable_analytics(False)
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        # The ephemeral context's default site lives in a temp folder; only ours is wanted.
        for site in list(self.context.list_data_docs_sites()):
            self.context.delete_data_docs_site(site)
        self.context.add_data_docs_site(
            _DOCS_SITE,
            {
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(docs_dir),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        self.source = self.context.data_sources.add_pandas("lake")

    def validate(self, suite: Suite, frame: pd.DataFrame) -> list[Outcome]:
        """Run the suite over the frame; results are kept for Data Docs."""
        gx = self._gx
        gx_suite = self.context.suites.add(gx.ExpectationSuite(name=suite.table))
        for e in suite.expectations:
            gx_suite.add_expectation(e.copy())
        batch = self.source.add_dataframe_asset(suite.table).add_batch_definition_whole_dataframe(
            "current"
        )
        definition = self.context.validation_definitions.add(
            gx.ValidationDefinition(name=suite.table, data=batch, suite=gx_suite)
        )
        result = definition.run(
            batch_parameters={"dataframe": frame}, result_format={"result_format": "SUMMARY"}
        )
        # A finiteness helper's broken values are all `false`: they would say nothing.
        helpers = {column + FINITE_SUFFIX for column in suite.finite}
        return [
            Outcome(
                expectation=_label(r.expectation_config),
                success=bool(r.success),
                unexpected_count=r.result.get("unexpected_count"),
                observed_value=r.result.get("observed_value"),
                examples=()
                if r.expectation_config.kwargs.get("column") in helpers
                else _examples(r.result.get("partial_unexpected_list") or []),
            )
            for r in result.results
        ]

    def build_docs(self) -> None:
        """Write the Data Docs site for everything validated."""
        self.context.build_data_docs(site_names=[_DOCS_SITE])


def _rows_since(path: Path, version: int) -> pa.Table:
    """Rows of the data files added after `version` (an appended table only adds files)."""
    current = dataset(DeltaTable(str(path)))
    old = {f.path for f in dataset(DeltaTable(str(path), version=version)).get_fragments()}
    new = [f for f in current.get_fragments() if f.path not in old]
    return scanner(
        pds.FileSystemDataset(new, current.schema, current.format, current.filesystem)
    ).to_table()


def _first_rewrite(path: Path, since: int, version: int) -> int | None:
    """The first version after `since` (up to `version`) that removed data files: a rewrite
    (an overwrite, such as the one that widens a column's type, a delete, a compaction), after
    which the files added since `since` hold old rows too. A commit whose log file is gone
    (cleaned up after a checkpoint) cannot be told apart, so it counts as one."""
    log = path / "_delta_log"
    for v in range(since + 1, version + 1):
        try:
            lines = (log / f"{v:020d}.json").read_text().splitlines()
        except FileNotFoundError:
            return v
        if any("remove" in json.loads(line) for line in lines if line.strip()):
            return v
    return None


def _read(table: TableDef, path: Path, since: int | None) -> tuple[int, str, pa.Table]:
    delta = open_table(table.name, path)
    version = delta.version()
    if since is None or since > version:  # never validated, or the table was recreated
        return version, "whole table", read_arrow(delta)
    if table.mode != "append":
        # A merge rewrites rows in place: the only sound check of a key is the whole table.
        return version, "whole table (merged)", read_arrow(delta)
    if since == version:
        return version, f"no rows added since version {since}", table.arrow_schema.empty_table()
    rewrite = _first_rewrite(path, since, version)
    if rewrite is not None:
        # Delta counts every row of a rewritten file as added, so the rows appended since
        # `since` are not known apart from the old ones: the whole table is the sound check.
        scope = f"whole table (version {rewrite} rewrote its files after version {since})"
        return version, scope, read_arrow(delta)
    return version, f"rows added since version {since}", _rows_since(path, since)


def _examples(values: list[Any], *, most: int = 3, width: int = 40) -> tuple[str, ...]:
    """Up to `most` distinct values that broke an expectation, as short JSON text: enough to
    tell a typo from a new code without opening the report. NULLs say nothing (the
    expectation's name does)."""
    shown: list[str] = []
    for value in values:
        value = value.item() if hasattr(value, "item") else value  # numpy's scalars
        # A float as JSON would print it, NaN and Infinity bare.
        text = json.dumps(value) if isinstance(value, float) else json.dumps(_jsonable(value))
        text = text if len(text) <= width else f"{text[: width - 3]}..."
        if not _missing(value) and text not in shown:
            shown.append(text)
        if len(shown) == most:
            break
    return tuple(shown)


def _missing(value: Any) -> bool:
    # pandas, which GX validates with, reads None, NaN and NaT alike as missing.
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array value
        return False


def _jsonable(value: Any) -> Any:
    # Observed values can be NaN or infinite: the summary stays JSON (engine/lake/values.py).
    return json.loads(json.dumps(json_safe(value), default=str, allow_nan=False))


class _Passed(NamedTuple):
    """A table's last validation that passed: the version, and the suite it passed."""

    version: int
    suite: str | None  # None: recorded before suites were (the next check is of the whole table)


def _suite_digest(suite: Suite) -> str:
    """What a suite checks: its file and the float columns it adds checks for."""
    text = suite.path.read_bytes() + "\n".join(suite.finite).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def _load_state(path: Path) -> dict[str, _Passed]:
    if not path.is_file():
        return {}
    try:
        return {
            k: _Passed(int(v["version"]), v.get("suite"))
            for k, v in json.loads(path.read_text()).items()
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{path}: not a quality state file (delete it to start over)") from None


def _suite_file(project: Project, table: str) -> str:
    """The suite a table would have, as the user finds it (relative to the project)."""
    path = project.suites / f"{table}.yaml"
    return str(path.relative_to(project.root) if path.is_relative_to(project.root) else path)


def validate_lake(
    lake: Path,
    report_dir: Path | None = None,
    tables: Sequence[str] = (),
    *,
    named: bool = True,
    since_last: bool = False,
    now: dt.datetime | None = None,
    project: Project = PROJECT,
) -> QualityReport:
    """Validate `tables` (default: every table the project declares) and write the reports.
    A table not in the lake, or without a suite, is skipped and said so, unless `named` (the
    user asked for these tables by name: then it is a user error, as is, then, none of them in
    the lake). Only a validation that passed moves the version `since_last` starts from on."""
    present = lake_tables(lake)
    defs = load_tables(project.tables)
    suites = load_suites({n: t.arrow_schema for n, t in defs.items()}, project.suites)
    for name in tables if named else ():
        if name not in suites:
            have = ", ".join(suites)
            raise UserError(
                f"quality: no suite {_suite_file(project, name)} in {shown(project.root)}/ "
                f"(have: {have}; --pipelines FOLDER/pipelines reads another project's)"
            )
        if name not in present:
            raise UserError(f"quality: table '{name}' is not in the lake {lake}")
    names = list(dict.fromkeys(tables)) or sorted({*defs, *suites})
    if named and not present.keys() & set(names):
        # A report that checked nothing would pass: a lake given wrong must not look healthy.
        # (After a run, `named` False, its tables are there unless it writes only topics.)
        raise UserError(
            f"quality: none of the tables to check is in the lake {lake} (runs write them)"
        )
    report = QualityReport(report_dir or default_report_dir(lake))
    for name in names:
        if name not in present:
            report.skipped[name] = "not in the lake"
        elif name not in suites:
            report.skipped[name] = f"no suite {_suite_file(project, name)}"
    state_path = report.report_dir / "state.json"
    state = _load_state(state_path)
    now = now or dt.datetime.now(dt.UTC)
    validator = _Validator(report.report_dir / "data_docs")
    for name in (n for n in names if n not in report.skipped):
        digest = _suite_digest(suites[name])
        last = state.get(name) if since_last else None
        # The rows that passed were held to the suite as it was then: a rule added since has
        # never seen them, so a changed suite checks the whole table.
        changed = last is not None and last.suite != digest
        since = last.version if last is not None and not changed else None
        version, scope, data = _read(defs[name], present[name], since)
        if changed:
            scope = f"whole table (its suite changed since version {last.version})"
        outcomes = (
            validator.validate(suites[name], suites[name].frame(data, now)) if len(data) else []
        )
        result = TableResult(
            table=name,
            version=version,
            scope=scope,
            rows=len(data),
            passed=all(o.success for o in outcomes),
            expectations=outcomes,
        )
        report.results.append(result)
        if result.passed:
            # A failed validation leaves the version where it was: --since-last checks its
            # rows again next time, until they pass (or the table is checked whole).
            state[name] = _Passed(version, digest)
    report.report_dir.mkdir(parents=True, exist_ok=True)
    validator.build_docs()
    summary = {
        "validated_at": now.isoformat(),
        "lake": str(lake),
        "passed": report.passed,
        "skipped": report.skipped,
        "tables": {r.table: _jsonable(asdict(r)) for r in report.results},
    }
    report.summary_path.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    # Logged before the page is written, so the page's history ends with this validation.
    _log_results(lake, report.results, now)
    write_report_html(
        summary,
        report.report_dir,
        report.docs_index.parent,
        _table_history(lake, [r.table for r in report.results]),
        last=_HISTORY,
    )
    state_path.write_text(
        json.dumps({k: v._asdict() for k, v in sorted(state.items())}, indent=2) + "\n"
    )
    return report


def _table_history(lake: Path, tables: Sequence[str]) -> dict[str, TableHistory]:
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


def _log_results(lake: Path, results: Sequence[TableResult], now: dt.datetime) -> None:
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
