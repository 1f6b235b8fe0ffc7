"""`runner.py lint`: check a pipeline's SQL without Spark, from sqlglot's parse trees alone.

The plan's own findings come first (`engine.plan.check_pipeline`: syntax, file/view naming,
unknown views, cycles, handlers that do not load, tables, sinks, query derivation), so `lint`
and `run` never disagree; then each check here is a small function returning `Finding`s:
unknown columns (resolved view by view from the source's columns and the handlers' output
schemas), handler columns, calls to names that are none of Spark's functions, and streaming
safety (state without a watermark, ORDER BY/LIMIT, non-deterministic keys).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import MappingSchema

from engine.definitions.handler import load_handler_class
from engine.definitions.pipeline import Pipeline, Registry
from engine.definitions.spark_functions import not_a_function, spark_functions
from engine.definitions.sql import (
    SparkStreaming,
    SqlError,
    SqlStep,
    Watermark,
    order_steps,
    position,
)
from engine.definitions.suites import load_suite_def
from engine.definitions.tables import load_tables
from engine.errors import UserError
from engine.plan import check_pipeline, load_files
from engine.plan.findings import Finding, finding_at, from_user_error
from engine.plan.stream_sql import downstream, streaming_views

__all__ = [
    "NONDETERMINISTIC",
    "SOURCE_COLUMNS",
    "Finding",
    "LintResult",
    "check_columns",
    "check_function_names",
    "check_handlers",
    "check_nondeterministic_keys",
    "check_state_watermarks",
    "check_suites",
    "lint_pipeline",
    "lint_pipelines",
    "schema_columns",
    "silenced",
    "source_columns",
    "unused_noqa",
]

#: The columns of the source view, by source kind (engine/sources).
SOURCE_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "files": ("value", "origin", "timestamp"),
    "kafka": ("key", "value", "topic", "partition", "offset", "timestamp", "origin"),
    "socket": ("value", "timestamp", "origin"),
    # A delta source adds these to its table's columns (source_columns).
    "delta": ("origin", "timestamp"),
}


def source_columns(pipeline: Pipeline) -> list[str] | None:
    """The source view's columns: by kind, and for a delta source its table's columns first
    (None when `tables/<table>.sql` does not define it: then its readers are not checked)."""
    src = pipeline.source
    extra = list(SOURCE_COLUMNS[src.kind])
    if src.kind != "delta":
        return extra
    try:
        table = load_tables(pipeline.tables_dir).get(str(src.table))
    except UserError:
        return None
    if table is None:
        return None
    return [*table.column_names, *(c for c in extra if c not in table.column_names)]


#: Functions whose result differs from call to call (lower-case Spark names).
NONDETERMINISTIC = frozenset(
    {
        "rand",
        "randn",
        "random",
        "uuid",
        "current_timestamp",
        "now",
        "current_date",
        "curdate",
        "localtimestamp",
        "monotonically_increasing_id",
        "shuffle",
    }
)


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


# `-- noqa` (every warning of the line) or `-- noqa: code, code` at the end of a line; `#` in
# YAML. Errors are not silenced: `run` would stop on them all the same.
_NOQA = re.compile(r"(?:--|#)\s*noqa\b(?::\s*(?P<codes>[\w-]+(?:\s*,\s*[\w-]+)*))?", re.I)


def silenced(finding: Finding) -> bool:
    """Whether the finding is a warning its line says to leave unsaid (`-- noqa: code`)."""
    if finding.severity != "warning" or finding.line is None:
        return False
    try:
        line = finding.path.read_text().splitlines()[finding.line - 1]
    except (OSError, IndexError, UnicodeDecodeError):
        return False
    said = _NOQA.search(line)
    if not said:
        return False
    codes = said["codes"]
    return codes is None or finding.code in {c.strip().lower() for c in codes.split(",")}


def unused_noqa(paths: Iterable[Path], quiet: Iterable[Finding]) -> list[Finding]:
    """A warning for each `-- noqa` (or code of one) in `paths` that silenced none of `quiet`:
    a stale one would hide the next warning of its line (ruff's RUF100)."""
    used: dict[tuple[Path, int | None], set[str]] = {}
    for finding in quiet:
        used.setdefault((finding.path.resolve(), finding.line), set()).add(finding.code)
    found: list[Finding] = []
    for path in paths:
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue  # a file that does not load is a finding of its own
        for number, line in enumerate(lines, 1):
            said = _NOQA.search(line)
            if not said:
                continue
            done = used.get((path.resolve(), number), set())
            codes = said["codes"]
            wanted = {c.strip().lower() for c in codes.split(",")} if codes else set()
            if (codes and wanted <= done) or (not codes and done):
                continue
            if codes:
                stale = sorted(wanted - done)
                one = len(stale) == 1
                message = (
                    f"noqa code{'' if one else 's'} {', '.join(stale)} silence{'s' if one else ''}"
                    f" no warning on this line; remove {'it' if one else 'them'}"
                )
            else:
                message = f"`{said[0]}` silences no warning on this line; remove it"
            found.append(Finding(path, number, said.start() + 1, "unused-noqa", message, "warning"))
    return found


def schema_columns(ddl: str) -> list[str]:
    """The top-level column names of a Spark DDL schema (`a STRING, b ARRAY<STRUCT<...>>`)."""
    struct = exp.DataType.build(f"STRUCT<{ddl}>", dialect="spark")
    return [field.name for field in struct.expressions]


def _without_watermarks(query: exp.Expression) -> exp.Expression:
    """A copy of query with each `rel WATERMARK ...` replaced by rel (carrying the alias)."""
    query = query.copy()
    for watermark in list(query.find_all(Watermark)):
        relation = watermark.this
        if watermark.args.get("alias"):
            relation.set("alias", watermark.args["alias"])
        watermark.replace(relation)
    return query


def _named_outputs(query: exp.Expression) -> list[str] | None:
    """Output names straight from the projections; None when one is a star."""
    selects = query.selects if isinstance(query, exp.Query) else []
    if not selects or any(s.is_star for s in selects):
        return None
    return [s.output_name for s in selects]


def _window_struct_fields(query: exp.Expression) -> None:
    """Spark names the struct of `GROUP BY window(ts, ...)` `window`, so `window.start` is a
    column there; make such references field lookups on the window() call itself."""
    for select in list(query.find_all(exp.Select)):
        group = select.args.get("group")
        calls = [
            call
            for call in (group.find_all(exp.Anonymous) if group else [])
            if call.name.lower() == "window"
        ]
        if not calls:
            continue
        for column in list(select.find_all(exp.Column)):
            if column.table.lower() == "window" and not column.args.get("db"):
                column.replace(exp.Dot(this=calls[0].copy(), expression=column.this.copy()))


def _unresolved(qualified: exp.Expression) -> list[exp.Column]:
    # As sqlglot's validate_qualify_columns, but every column, not just the first.
    found: dict[tuple[str, int | None, int | None], exp.Column] = {}
    for scope in traverse_scope(qualified):
        if not isinstance(scope.expression, exp.Select) or scope.pivots:
            continue
        laterals = scope.expression.args.get("laterals") or []
        if any(not (lateral.alias_column_names) for lateral in laterals):
            continue  # LATERAL VIEW f(...) without column names: Spark's `col`, `pos`, ...
        columns = list(scope.unqualified_columns)
        if not scope.is_correlated_subquery:
            columns += scope.external_columns
        for column in columns:
            found.setdefault((column.sql(), *position(column)), column)
    return list(found.values())


def _step_columns(
    step: SqlStep, views: Mapping[str, list[str] | None]
) -> tuple[list[Finding], list[str] | None]:
    """Findings for one step's columns and its output columns (None when unknown)."""
    query = _without_watermarks(step.tree.expression)
    if any(views.get(name) is None for name in step.references):
        return [], _named_outputs(query)  # reads a view whose columns are unknown
    findings: list[Finding] = []
    for watermark in step.tree.expression.find_all(Watermark):
        relation = watermark.this
        if not isinstance(relation, exp.Table):
            continue
        known = {c.lower() for c in views.get(relation.name.lower()) or []}
        for column in watermark.expression.find_all(exp.Column):
            if column.name.lower() not in known:
                message = f"unknown column '{column.name}' in WATERMARK of '{relation.name}'"
                findings.append(finding_at(step.path, column, "unknown-column", message))
    _window_struct_fields(query)
    schema = MappingSchema(
        {name: {c: "STRING" for c in cols} for name, cols in views.items() if cols is not None},
        dialect="spark",
    )
    try:
        qualified = qualify(
            query,
            schema=schema,
            dialect="spark",
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
    except OptimizeError as err:
        match = re.search(r"Unknown column: (\w+)|Column '(\w+)'", str(err))
        name = (match.group(1) or match.group(2)).lower() if match else None
        node = next(
            (c for c in step.tree.find_all(exp.Column) if name and c.name.lower() == name), None
        )
        if node is not None:
            findings.append(
                finding_at(step.path, node, "unknown-column", f"unknown column '{node.sql()}'")
            )
        return findings, _named_outputs(query)
    except Exception:  # a construct qualify cannot handle: the step is skipped, not guessed at
        return findings, _named_outputs(query)
    for column in _unresolved(qualified):
        name = f"{column.table}.{column.name}" if column.table else column.name
        message = f"unknown column '{name}'"
        findings.append(finding_at(step.path, column, "unknown-column", message))
    return findings, [s.output_name for s in qualified.selects]


def check_columns(
    pipeline: Pipeline, steps: Sequence[SqlStep], order: Sequence[str]
) -> tuple[list[Finding], dict[str, list[str] | None]]:
    """Unknown columns, view by view in `order`, from the source's columns (by kind) and the
    handlers' `output_schema`; also returns each view's output columns (None: unknown).

    Columns are resolved by sqlglot's `qualify` over a schema of the views known so far (every
    type a placeholder), so CTEs, subqueries, `*`, lambdas, LATERAL VIEW aliases and struct
    fields (`w.start` on a struct column) resolve as sqlglot does; functions unknown to sqlglot
    are opaque calls whose arguments are still checked. `window.start` after
    `GROUP BY window(...)` is read as a field of that call. Skipped, rather than risk a false
    finding: a step reading a view whose columns are unknown (a broken or skipped step, a
    handler that does not load), and a step sqlglot cannot qualify for another reason.
    """
    by_name = {s.name: s for s in steps}
    handlers = {h.name: h for h in pipeline.handlers}
    views: dict[str, list[str] | None] = {pipeline.source.view.lower(): source_columns(pipeline)}
    findings: list[Finding] = []
    for name in order:
        if name in handlers:
            try:
                views[name] = schema_columns(
                    load_handler_class(
                        handlers[name].class_path, project=pipeline.project.root
                    ).output_schema
                )
            except (ParseError, ValueError):
                views[name] = None  # the plan reports it
        elif name in by_name:
            step_findings, views[name] = _step_columns(by_name[name], views)
            findings += step_findings
    return findings, views


def check_handlers(pipeline: Pipeline, views: Mapping[str, list[str] | None]) -> list[Finding]:
    """Each handler's key, columns and order_by are columns of its input view (reported in
    the pipeline's yaml); a handler that does not load is the plan's finding."""
    findings: list[Finding] = []
    for spec in pipeline.handlers:
        known = views.get(spec.input.lower())
        try:
            cls = load_handler_class(spec.class_path, project=pipeline.project.root)
        except ValueError:
            continue
        if known is None:
            continue
        lowered = {c.lower() for c in known}
        wanted = [*cls.key, *getattr(cls, "columns", ()), *getattr(cls, "order_by", ())]
        for column in dict.fromkeys(wanted):
            if column.lower() not in lowered:
                message = (
                    f"handler {spec.name} reads unknown column '{column}' of view '{spec.input}'"
                )
                findings.append(Finding(pipeline.path, None, None, "unknown-column", message))
    return findings


def _watermarked(pipeline: Pipeline, steps: Sequence[SqlStep]) -> set[str]:
    """Names of the views with a WATERMARK in themselves or anywhere upstream."""
    return downstream(pipeline, steps, {s.name for s in steps if s.watermarks})


def _aggregation(query: exp.Expression) -> exp.Expression | None:
    """The first GROUP BY, DISTINCT or aggregate function of query (not in an OVER window)."""
    for node in query.walk(bfs=False):
        if isinstance(node, exp.Select):
            if node.args.get("group"):
                return node.args["group"]
            if node.args.get("distinct"):
                return node.args["distinct"]
        elif isinstance(node, exp.AggFunc) and not node.find_ancestor(exp.Window):
            return node
    return None


def check_state_watermarks(pipeline: Pipeline, steps: Sequence[SqlStep]) -> list[Finding]:
    """A streaming dedup (SELECT DISTINCT, or GROUP BY of any_value() columns) with no
    WATERMARK in itself or upstream keeps every key forever: an error. A streaming aggregation
    without one keeps one row per group forever: a warning, since a small key set (a status)
    makes that acceptable (order_totals, user_event_counts' input is watermarked)."""
    streaming, watermarked = streaming_views(pipeline, steps), _watermarked(pipeline, steps)
    findings: list[Finding] = []
    for step in steps:
        if step.name not in streaming or step.name in watermarked:
            continue
        query = step.tree.expression
        if step.distinct:
            node = query.find(exp.Table)  # the input that needs the watermark
            message = (
                "deduplication without a WATERMARK upstream keeps every row's key forever; "
                "add WATERMARK <event time> DELAY OF INTERVAL ... to its input"
            )
            findings.append(finding_at(step.path, node, "unbounded-dedup", message))
        elif (node := _aggregation(query)) is not None:
            message = (
                "aggregation without a WATERMARK upstream keeps one state row per group forever"
            )
            findings.append(
                finding_at(step.path, node, "unbounded-aggregation", message, severity="warning")
            )
    return findings


def _function_name(node: exp.Func) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()


def check_function_names(steps: Sequence[SqlStep]) -> list[Finding]:
    """Calls to a name that is none of Spark's built-ins (a misspelt `date_trun`), in a view or
    an expectation's condition: Spark stops the run there when it analyses the view; the close
    built-in is named where there is one. sqlglot builds the functions it knows as classes, so
    only other names are looked up."""
    known = spark_functions()
    findings: list[Finding] = []
    for step in steps:
        for call in _unknown_calls(step.tree):
            message = not_a_function(call.name, known)
            findings.append(finding_at(step.path, call, "unknown-function", message))
        for rule in step.expectations:
            condition = sqlglot.parse_one(rule.condition, read=SparkStreaming)
            for call in _unknown_calls(condition):
                message = f"expectation {rule.name}: {not_a_function(call.name, known)}"
                findings.append(Finding(step.path, rule.line, None, "unknown-function", message))
    return findings


def _unknown_calls(tree: exp.Expression) -> list[exp.Func]:
    known = spark_functions()
    return [
        call
        for call in tree.find_all(exp.Anonymous, exp.AnonymousAggFunc)
        if call.name.lower() not in known and not isinstance(call.parent, exp.Dot)
    ]


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


def check_nondeterministic_keys(steps: Sequence[SqlStep]) -> list[Finding]:
    """Non-deterministic functions (NONDETERMINISTIC) in GROUP BY keys (which include the keys
    of the any_value() dedup form) or in a SELECT DISTINCT's projections: each replay or
    duplicate would get a new key, so nothing is ever grouped or deduplicated. A GROUP BY that
    names a projection's alias is not followed (Spark resolves input columns first)."""
    findings: list[Finding] = []
    for step in steps:
        for select in step.tree.expression.find_all(exp.Select):
            keys: list[exp.Expression] = []
            if select.args.get("distinct"):
                keys += select.selects
            if select.args.get("group"):
                keys += select.args["group"].expressions
            seen: set[int] = set()
            for key in keys:
                for func in key.find_all(exp.Func):
                    name = _function_name(func)
                    if name in NONDETERMINISTIC and id(func) not in seen:
                        seen.add(id(func))
                        message = f"non-deterministic {name}() in a grouping or deduplication key"
                        findings.append(
                            finding_at(step.path, func, "nondeterministic-key", message)
                        )
    return findings


#: The current time, which a batch sees as its streaming part does (pin_batch_time).
_PINNED_TIME = frozenset({"current_timestamp", "now", "current_date"})


def check_expectations(
    steps: Sequence[SqlStep], views: Mapping[str, list[str] | None]
) -> list[Finding]:
    """Unknown columns in the conditions of expectations: a condition reads its own view's
    columns (or a lambda's variables, or fields of those). A DROP ROW rule must be
    deterministic: the view and the rows it drops are judged apart, and must agree."""
    findings: list[Finding] = []
    for step in steps:
        for rule in step.expectations:
            if rule.action != "drop":
                continue
            condition = sqlglot.parse_one(rule.condition, read=SparkStreaming)
            for func in condition.find_all(exp.Func):
                name = _function_name(func)
                if name in NONDETERMINISTIC - _PINNED_TIME:
                    message = (
                        f"expectation {rule.name}: non-deterministic {name}() in a DROP ROW rule; "
                        "the rows the view drops and those sent to quarantine could differ"
                    )
                    findings.append(
                        Finding(step.path, rule.line, None, "nondeterministic-rule", message)
                    )
        columns = views.get(step.name)
        if not step.expectations or columns is None:
            continue
        known = {c.lower() for c in columns}
        for rule in step.expectations:
            condition = sqlglot.parse_one(rule.condition, read=SparkStreaming)
            variables = {
                v.name.lower() for lam in condition.find_all(exp.Lambda) for v in lam.expressions
            }
            for column in condition.find_all(exp.Column):
                root = column.parts[0].name.lower()  # a struct field's column
                if root not in known and root not in variables:
                    message = (
                        f"expectation {rule.name}: unknown column '{column.sql()}' of view "
                        f"'{step.name}'"
                    )
                    findings.append(Finding(step.path, rule.line, None, "unknown-column", message))
    return findings


def lint_pipeline(pipeline: Pipeline) -> tuple[int, list[Finding]]:
    """All checks on one pipeline: the number of SQL files and the findings, sorted."""
    loaded = load_files(pipeline.sql_dir)
    steps, _, broken = loaded
    _, findings = check_pipeline(pipeline, loaded=loaded)
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
    findings += check_expectations(steps, views)
    findings += check_state_watermarks(pipeline, steps)
    findings += check_nondeterministic_keys(steps)
    findings += check_function_names(steps)
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
