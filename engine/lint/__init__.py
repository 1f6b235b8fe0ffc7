"""`runner.py lint`: check a pipeline's SQL without Spark, from sqlglot's parse trees alone.

The plan's own findings come first (`engine.plan.check_pipeline`: syntax, file/view naming,
unknown views, cycles, handlers that do not load, tables, sinks, query derivation), so `lint`
and `run` never disagree; then each check, a small function returning `Finding`s in a module
of this package: unknown columns (`columns`, resolved view by view from the source's columns
and the handlers' output schemas), expectations' conditions (`expectations`), calls to names
that are none of Spark's functions (`functions`), streaming safety (`streaming`: state without
a watermark, non-deterministic keys) and the tables' quality suites (`suites`); `noqa` keeps
the warnings a line's comment silences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.definitions.pipeline import Pipeline, Registry
from engine.definitions.sql import SqlError, order_steps
from engine.lint.columns import check_columns, check_handlers, check_table_fit, schema_columns
from engine.lint.expectations import check_expectations
from engine.lint.functions import check_function_names
from engine.lint.noqa import silenced, unused_noqa
from engine.lint.streaming import check_nondeterministic_keys, check_state_watermarks
from engine.lint.suites import check_suites
from engine.plan import check_pipeline, load_files
from engine.plan.findings import Finding
from engine.plan.summed import summed_views

__all__ = ["Finding", "LintResult", "lint_pipeline", "lint_pipelines", "schema_columns"]


@dataclass(frozen=True)
class LintResult:
    """The findings of a lint run and what it looked at."""

    pipelines: int
    files: int
    findings: tuple[Finding, ...]
    #: Warnings a `-- noqa: code` comment on their line silenced.
    silenced: int = 0

    @property
    def errors(self) -> int:
        """How many findings are errors (the exit code is 1 when any)."""
        return sum(f.severity == "error" for f in self.findings)

    def summary(self) -> str:
        """The last line of the report."""

        def count(n: int, word: str) -> str:
            return f"{n or 'no'} {word}{'' if n == 1 else 's'}"

        head = f"lint: {count(self.pipelines, 'pipeline')}, {count(self.files, 'SQL file')}"
        tail = f" ({self.silenced} silenced by noqa)" if self.silenced else ""
        if not self.findings:
            return f"{head}, no findings{tail}"
        warnings = len(self.findings) - self.errors
        return f"{head}, {count(self.errors, 'error')}, {count(warnings, 'warning')}{tail}"


def lint_pipeline(pipeline: Pipeline, *, suites: bool = True) -> tuple[int, list[Finding]]:
    """All checks on one pipeline (its tables' quality suites too, unless not `suites`): the
    number of SQL files and the findings, sorted."""
    loaded = load_files(pipeline.sql_dir)
    steps, _, broken = loaded
    plan, findings = check_pipeline(pipeline, loaded=loaded)
    try:
        order = order_steps(
            steps,
            provided=[
                pipeline.source.view,
                *broken,
                *(r for s in steps for r in s.references),
                *(h.input for h in pipeline.handlers),
            ],
            extra={h.name: [h.input] for h in pipeline.handlers},
        )
    except SqlError:
        order = []  # a cycle (already reported): columns cannot be resolved in order
    column_findings, views = check_columns(pipeline, steps, order)
    findings += column_findings
    findings += check_handlers(pipeline, views)
    findings += check_table_fit(pipeline, steps, views, column_findings)
    findings += check_expectations(steps, views)
    summed = summed_views(pipeline, plan.tables) if plan else frozenset()
    findings += check_state_watermarks(pipeline, steps, summed=summed)
    findings += check_nondeterministic_keys(steps)
    findings += check_function_names(steps)
    if suites:
        findings += check_suites(pipeline)
    files = len(list(pipeline.sql_dir.glob("*.sql")))
    return files, sorted(set(findings), key=Finding.sort_key)


def lint_pipelines(registry: Registry, names: Sequence[str] = ()) -> LintResult:
    """Lint the named pipelines (default: all of the registry); an unknown name is a
    UserError, raised before anything is linted."""
    pipelines = [registry.get(name) for name in (names or registry.names())]
    files, findings = 0, []
    for pipeline in pipelines:
        count, found = lint_pipeline(pipeline)
        files += count
        findings += found
    # As a set: pipelines share tables (quarantine), and a suite's finding is said once.
    quiet = {f for f in findings if silenced(f)}
    commented = [f for p in pipelines for f in (p.path, *sorted(p.sql_dir.glob("*.sql")))]
    stale = unused_noqa(commented, quiet)
    shown = sorted((set(findings) - quiet) | set(stale), key=Finding.sort_key)
    return LintResult(len(pipelines), files, tuple(shown), silenced=len(quiet))
