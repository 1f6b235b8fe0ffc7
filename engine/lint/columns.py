"""Unknown columns: each view's columns resolved from the source's and the handlers' output
schemas, and the columns each handler reads from its input view."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import MappingSchema

from engine.definitions.handler import load_handler_class
from engine.definitions.pipeline import Pipeline
from engine.definitions.sql import SqlStep, Watermark, position
from engine.definitions.tables import load_tables, view_misfits
from engine.errors import UserError
from engine.plan.findings import Finding, finding_at

__all__ = [
    "SOURCE_COLUMNS",
    "check_columns",
    "check_handlers",
    "check_table_fit",
    "schema_columns",
    "source_columns",
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


def check_table_fit(
    pipeline: Pipeline,
    steps: Sequence[SqlStep],
    views: Mapping[str, list[str] | None],
    found: Sequence[Finding] = (),
) -> list[Finding]:
    """Each table's view has every column of the table's DDL, and none the table lacks unless
    a step or handler reads the view: the run refuses both at its start, after Spark has
    started (a type the table would cut is left to that check, which has Spark's types). A
    view with a finding of its own already (`found`: an unknown column) is not held to it."""
    try:
        tables = load_tables(pipeline.tables_dir)
    except UserError:
        return []  # the plan's finding
    flawed = {f.path for f in found}
    paths = {s.name.lower(): s.path for s in steps}
    read = {r.lower() for s in steps for r in s.references}
    read |= {h.input.lower() for h in pipeline.handlers}
    findings: list[Finding] = []
    for name, view in ((t, v) for q in pipeline.queries for t, v in q.sinks.items()):
        columns, table = views.get(view.lower()), tables.get(name)
        if columns is None or table is None or paths.get(view.lower()) in flawed:
            continue
        fits = view_misfits(view, name, table.column_names, columns, read=view.lower() in read)
        findings += [Finding(table.path, None, None, "table-fit", m) for m in fits]
    return findings
