"""A pipeline's plan, made without Spark: its SQL steps in order, handlers, tables and derived
queries, and every problem found on the way as a finding with its file and line. `run` stops
on the first error; `lint` reports them all, with its column and streaming checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from sqlglot.errors import ParseError

from engine.definitions.durations import parse_duration
from engine.definitions.handler import StateHandler, TimeoutMode, load_handler_class
from engine.definitions.pipeline import HandlerSpec, Pipeline
from engine.definitions.sql import SqlError, SqlStep, load_step, order_steps
from engine.definitions.tables import TableDef, load_table
from engine.errors import UserError
from engine.plan.findings import Finding, from_sql_error, from_user_error
from engine.plan.queries import QueryPlan, plan_query
from engine.plan.stream_sql import check_stream_sql, downstream
from engine.plan.summed import summed_findings, summed_views

__all__ = [
    "Plan",
    "check_pipeline",
    "check_views",
    "load_files",
    "plan_pipeline",
]


@dataclass(frozen=True)
class Plan:
    """A checked pipeline: its SQL steps, handlers and tables, and the order to build views."""

    pipeline: Pipeline
    steps: Mapping[str, SqlStep]
    handlers: Mapping[str, tuple[HandlerSpec, StateHandler]]
    tables: Mapping[str, TableDef]
    order: tuple[str, ...]
    #: Per query: its streaming outputs and the steps run on each batch (engine/plan/queries.py).
    queries: Mapping[str, QueryPlan]


def load_files(folder: Path) -> tuple[list[SqlStep], list[Finding], set[str]]:
    """Load every `*.sql` file of folder: the steps, one finding per file that does not load
    (syntax, not one temp view, view named unlike its file), and the names (file stems) of
    those files, so that views reading them are not also reported."""
    steps: list[SqlStep] = []
    findings: list[Finding] = []
    broken: set[str] = set()
    paths = sorted(folder.glob("*.sql"))
    if not paths:
        why = "no .sql files" if folder.is_dir() else "no such folder (the spec's sql:)"
        findings.append(Finding(folder, None, None, "no-sql", why))
    for path in paths:
        try:
            steps.append(load_step(path))
        except SqlError as err:
            code = "view-name" if "must be named after its file" in err.message else "syntax"
            findings.append(from_sql_error(err, code, path))
            broken.add(path.stem.lower())
    return steps, findings, broken


def check_views(
    pipeline: Pipeline, steps: Sequence[SqlStep], broken: Iterable[str] = ()
) -> list[Finding]:
    """Unknown views (each step checked alone, so every such step is reported), a view
    defined twice, and cycles; all from `order_steps`' own errors."""
    findings: list[Finding] = []
    handlers = {h.name: [h.input] for h in pipeline.handlers}
    names = {s.name for s in steps} | set(handlers) | {pipeline.source.view.lower()} | set(broken)
    unknown: set[str] = set()
    for step in steps:
        try:
            order_steps([step], provided=names - {step.name})
        except SqlError as err:
            findings.append(from_sql_error(err, "unknown-view", step.path))
            unknown |= step.references - names
    for handler in pipeline.handlers:
        if handler.input.lower() not in names:
            message = f"handler {handler.name} reads unknown view '{handler.input}'"
            findings.append(Finding(pipeline.path, None, None, "unknown-view", message))
            unknown.add(handler.input.lower())
    try:
        order_steps(steps, provided=names | unknown, extra=handlers)
    except SqlError as err:
        code = "cycle" if err.message.startswith("cycle") else "duplicate-view"
        findings.append(from_sql_error(err, code, pipeline.path))
    return findings


def _load_handlers(
    pipeline: Pipeline,
) -> tuple[dict[str, tuple[HandlerSpec, StateHandler]], list[Finding]]:
    handlers: dict[str, tuple[HandlerSpec, StateHandler]] = {}
    findings: list[Finding] = []
    for spec in pipeline.handlers:
        try:
            handler = load_handler_class(spec.class_path, project=pipeline.project.root)(
                pipeline.settings
            )
            problem = _timeout_problem(handler)
        except (ValueError, ParseError) as err:
            problem = str(err)
        if problem:
            message = f"handler {spec.name}: {problem}"
            findings.append(Finding(pipeline.path, None, None, "handler", message))
            continue
        handlers[spec.name] = (spec, handler)
    return handlers, findings


def _timeout_problem(handler: StateHandler) -> str | None:
    """Why the handler's timeout cannot be set up (its properties read settings lazily, so
    they are read now): a bad setting, a mode that is none of the three, its own code failing."""
    try:
        mode, _ = handler.timeout_mode, handler.timeout
    except ValueError as err:
        return str(err)
    except Exception as err:  # the handler's code, not ours: say what it raised and where
        return f"{type(err).__name__}: {err} (reading its timeout_mode and timeout)"
    if mode not in get_args(TimeoutMode):
        return f"timeout_mode must be none, event_time or processing_time, not {mode!r}"
    return None


def _watermark_findings(
    pipeline: Pipeline,
    steps: Sequence[SqlStep],
    handlers: Mapping[str, tuple[HandlerSpec, StateHandler]],
) -> list[Finding]:
    """Event-time timers fire on the watermark: Spark refuses such a handler (naming its own
    DataFrame API) when no view at or above its input declares one."""
    watermarked = downstream(pipeline, steps, {s.name for s in steps if s.watermarks})
    return [
        Finding(
            pipeline.path,
            None,
            None,
            "handler",
            f"handler {name}: timeout_mode event_time needs a watermark on its input: add "
            f"WATERMARK col DELAY OF INTERVAL ... to the FROM of view {spec.input} or a view "
            "above it",
        )
        for name, (spec, handler) in handlers.items()
        if handler.timeout_mode == "event_time" and spec.input.lower() not in watermarked
    ]


def _once_findings(pipeline: Pipeline, handlers: Mapping[str, tuple[HandlerSpec, StateHandler]]):
    if pipeline.source.kind == "socket":
        # A socket has no end and cannot replay: AvailableNow would read nothing.
        yield (
            f"--once: pipeline {pipeline.name} reads a socket, which has no end; run without "
            "--once and stop it with Ctrl-C, or read Kafka (--conf source.kind=kafka)"
        )
    for name, (_, handler) in handlers.items():
        # Spark keeps planning batches while processing-time timers are pending, so an
        # AvailableNow run would never end (docs/decisions.md).
        if handler.timeout_mode == "processing_time":
            yield (
                f"--once: handler {name} uses processing-time timeouts, which only a "
                "continuous run fires; run without --once or use event-time timeouts"
            )


def _load_tables(pipeline: Pipeline) -> tuple[dict[str, TableDef], list[Finding]]:
    tables: dict[str, TableDef] = {}
    findings: list[Finding] = []
    for path in sorted(pipeline.tables_dir.glob("*.sql")):
        try:
            tables[path.stem] = load_table(path)
        except UserError as err:
            findings.append(from_user_error(err, "table", path))
    return tables, findings


def _sink_findings(
    pipeline: Pipeline, tables: Mapping[str, TableDef], views: set[str]
) -> list[Finding]:
    problems: list[str] = []
    for query in pipeline.queries:
        where = f"query {query.name}"
        for table, view in query.sinks.items():
            if table not in tables:
                if not (pipeline.tables_dir / f"{table}.sql").is_file():
                    # A file that is there but broken has its own finding, naming the cause.
                    problems.append(f"{where}: unknown table '{table}' (tables/{table}.sql)")
            elif view.lower() not in views:
                problems.append(f"{where}: table {table} reads unknown view '{view}'")
        for topic, view in query.topics.items():
            if view.lower() not in views:
                problems.append(f"{where}: topic {topic} reads unknown view '{view}'")
        if query.topics and "bootstrap.servers" not in pipeline.kafka:
            problems.append(f"{where}: writes Kafka topics but the pipeline has no kafka: block")
    return [Finding(pipeline.path, None, None, "sink", p) for p in problems]


def _expectation_findings(
    steps: Sequence[SqlStep], tables: Mapping[str, TableDef], pipeline: Pipeline
) -> list[Finding]:
    """Rules go on stateless views (a kept or dropped row is one the file's query made); a
    rule that drops rows needs a quarantine table to send them to."""
    findings: list[Finding] = []
    quarantine = _quarantine_table(pipeline, tables)
    for step in steps:
        if not step.expectations:
            continue
        first = step.expectations[0]
        if step.distinct or step.aggregates:
            message = (
                f"expectation {first.name}: rules go on a view without DISTINCT or GROUP BY; "
                f"declare them on a view that {step.name} reads, or one that reads it"
            )
            findings.append(Finding(step.path, first.line, None, "expectation", message))
        elif step.drops and quarantine is None:
            rule = next(e for e in step.expectations if e.action == "drop")
            message = (
                f"expectation {rule.name} drops rows to quarantine, but pipeline "
                f"{pipeline.name} writes no table with 'lake.role' = 'quarantine'"
            )
            findings.append(Finding(step.path, rule.line, None, "expectation", message))
    return findings


def _quarantine_table(pipeline: Pipeline, tables: Mapping[str, TableDef]) -> str | None:
    """The pipeline's table of rejected input, if it writes one."""
    written = [t for q in pipeline.queries for t in q.sinks]
    return next((t for t in written if t in tables and tables[t].role == "quarantine"), None)


def _plan_queries(
    pipeline: Pipeline,
    steps: Mapping[str, SqlStep],
    order: Sequence[str],
    quarantine: str | None,
    summed: frozenset[str],
) -> dict[str, QueryPlan]:
    """Each query's plan; the rows a view drops are written by the first query that writes
    quarantine and computes the view; `summed` aggregations run on each batch."""
    queries: dict[str, QueryPlan] = {}
    dropped: frozenset[str] = frozenset()
    for spec in pipeline.queries:
        plan = plan_query(
            pipeline,
            spec,
            steps,
            order,
            quarantine=quarantine,
            dropped_elsewhere=dropped,
            summed=summed,
        )
        queries[spec.name] = plan
        dropped |= set(plan.drops)
    computed = {v for p in queries.values() for v in (*p.streaming_steps, *p.batch_steps)}
    for view in order:
        if view in computed and view not in dropped and view in steps and steps[view].drops:
            raise UserError(
                f"{steps[view].path}: view {view} drops rows (ON VIOLATION DROP ROW), but no "
                f"query that computes it writes the quarantine table {quarantine}"
            )
    return queries


def _errors(findings: Sequence[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


Loaded = tuple[list[SqlStep], list[Finding], set[str]]


def check_pipeline(
    pipeline: Pipeline, *, once: bool = False, loaded: Loaded | None = None
) -> tuple[Plan | None, list[Finding]]:
    """Plan the pipeline, collecting every problem as a finding; the plan is None when any
    finding is an error. `once` adds the checks of an `--once` run; `loaded` is what
    `load_files` already read of the SQL folder, so a caller that needs it parses it once."""
    steps, loaded_findings, broken = loaded or load_files(pipeline.sql_dir)
    if not steps and not broken:
        # No SQL folder: every view a table or handler reads would be reported as unknown.
        return None, list(loaded_findings)
    findings = list(loaded_findings)
    findings += check_views(pipeline, steps, broken)
    findings += check_stream_sql(pipeline, steps)
    handlers, handler_findings = _load_handlers(pipeline)
    findings += handler_findings
    if once:
        findings += [
            Finding(pipeline.path, None, None, "once", m)
            for m in _once_findings(pipeline, handlers)
        ]
    delay = pipeline.settings.get("watermark_delay", "").strip()
    if delay:
        try:
            parse_duration(delay)
        except ValueError as err:
            message = f"setting watermark_delay: {err}"
            findings.append(Finding(pipeline.path, None, None, "setting", message))
    tables, table_findings = _load_tables(pipeline)
    findings += table_findings
    views = {s.name for s in steps} | {h.name.lower() for h in pipeline.handlers} | broken
    findings += _sink_findings(pipeline, tables, views)
    findings += _expectation_findings(steps, tables, pipeline)
    by_name = {s.name: s for s in steps}
    findings += summed_findings(pipeline, by_name, tables)
    findings += _watermark_findings(pipeline, steps, handlers)
    if _errors(findings):
        return None, findings
    order = order_steps(
        steps, provided=[pipeline.source.view], extra={h.name: [h.input] for h in pipeline.handlers}
    )
    try:
        queries = _plan_queries(
            pipeline,
            by_name,
            order,
            _quarantine_table(pipeline, tables),
            summed_views(pipeline, tables),
        )
    except UserError as err:
        return None, [*findings, from_user_error(err, "query", pipeline.path)]
    return Plan(pipeline, by_name, handlers, tables, tuple(order), queries), findings


def plan_pipeline(pipeline: Pipeline, *, once: bool = False) -> Plan:
    """The pipeline's plan; its first error (in file order) is raised as a UserError."""
    plan, findings = check_pipeline(pipeline, once=once)
    if plan is None:
        raise min((f for f in findings if f.severity == "error"), key=Finding.sort_key).error()
    return plan
