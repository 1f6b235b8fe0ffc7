"""The quality suites of a pipeline's tables, read against the tables' DDL."""

from __future__ import annotations

from engine.definitions.pipeline import Pipeline
from engine.definitions.suites import load_suite_def
from engine.definitions.tables import load_tables
from engine.errors import UserError
from engine.plan.findings import Finding, from_user_error

__all__ = ["check_suites"]


def check_suites(pipeline: Pipeline) -> list[Finding]:
    """The quality suites of the pipeline's tables, read as `quality` reads them but without
    Great Expectations: keys, derived columns and the columns each expectation names, against
    the table's DDL (a table whose DDL does not load is the plan's finding already)."""
    try:
        tables = load_tables(pipeline.tables_dir)
    except UserError:
        return []
    findings: list[Finding] = []
    for name in pipeline.tables:
        path = pipeline.project.suites / f"{name}.yaml"
        if name not in tables or not path.exists():
            continue
        try:
            load_suite_def(path, tables[name].arrow_schema)
        except UserError as err:
            findings.append(from_user_error(err, "suite", path))
    return findings
