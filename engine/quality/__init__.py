"""`quality`: validate the lake's Delta tables with their Great Expectations suites, and report."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from engine.definitions.tables import load_tables
from engine.errors import UserError
from engine.lake import lake_tables
from engine.project import PROJECT, Project, shown
from engine.quality.history import log_results, table_history
from engine.quality.html import write_report_html
from engine.quality.report import (
    Outcome,
    QualityReport,
    TableResult,
    default_report_dir,
    jsonable,
)
from engine.quality.scope import read_scope
from engine.quality.state import Passed, load_state, save_state, suite_digest
from engine.quality.suites import load_suites
from engine.quality.validator import Validator

__all__ = ["Outcome", "QualityReport", "TableResult", "default_report_dir", "validate_lake"]

#: Validations per table in the report page's pass/fail strip.
_HISTORY = 10


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
    files = sorted(p.stem for p in project.suites.glob("*.yaml"))
    for name in tables if named else ():
        if name not in files:
            have = ", ".join(files)
            raise UserError(
                f"quality: no suite {_suite_file(project, name)} in {shown(project.root)}/ "
                f"(have: {have}; --pipelines FOLDER/pipelines reads another project's)"
            )
        if name not in present:
            raise UserError(f"quality: table '{name}' is not in the lake {lake}")
    names = list(dict.fromkeys(tables)) or sorted({*defs, *files})
    # Only the suites of the tables checked: a mistake in another table's suite is for a check
    # of that table (and `lint`) to name; it stopped every pipeline's `run --quality`.
    schemas = {n: t.arrow_schema for n, t in defs.items()}
    suites = load_suites(schemas, project.suites, only=names)
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
    state = load_state(state_path)
    now = now or dt.datetime.now(dt.UTC)
    validator = Validator(report.report_dir / "data_docs")
    for name in (n for n in names if n not in report.skipped):
        digest = suite_digest(suites[name])
        last = state.get(name) if since_last else None
        # The rows that passed were held to the suite as it was then: a rule added since has
        # never seen them, so a changed suite checks the whole table.
        changed = last is not None and last.suite != digest
        since = last.version if last is not None and not changed else None
        version, scope, data = read_scope(defs[name], present[name], since)
        missing = [c for c in defs[name].arrow_schema.names if c not in data.schema.names]
        if missing:
            # The DDL was edited and the pipeline has not run since: its checks of the new
            # columns would fail on a column that is not there (a KeyError, exit 1).
            why = (
                f"column(s) {', '.join(missing)} of tables/{name}.sql not in the table yet "
                "(the next run of its pipeline adds them)"
            )
            if named and tables:  # asked for by name
                raise UserError(f"quality: table '{name}': {why}")
            report.skipped[name] = why
            continue
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
            state[name] = Passed(version, digest)
    report.report_dir.mkdir(parents=True, exist_ok=True)
    validator.build_docs()
    summary = {
        "validated_at": now.isoformat(),
        "lake": str(lake),
        "passed": report.passed,
        "skipped": report.skipped,
        "tables": {r.table: jsonable(asdict(r)) for r in report.results},
    }
    report.summary_path.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    # Logged before the page is written, so the page's history ends with this validation.
    log_results(lake, report.results, now)
    write_report_html(
        summary,
        report.report_dir,
        report.docs_index.parent,
        table_history(lake, [r.table for r in report.results]),
        last=_HISTORY,
    )
    save_state(state_path, state)
    return report
