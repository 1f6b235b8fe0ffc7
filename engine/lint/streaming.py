"""Streaming safety: state that a missing watermark keeps forever, and grouping or
deduplication keys that differ from call to call."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlglot import exp

from engine.definitions.pipeline import Pipeline
from engine.definitions.sql import SqlStep
from engine.lint.functions import call_name
from engine.plan.findings import Finding, finding_at
from engine.plan.stream_sql import downstream, streaming_views

__all__ = ["NONDETERMINISTIC", "check_nondeterministic_keys", "check_state_watermarks"]

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


def check_state_watermarks(
    pipeline: Pipeline, steps: Sequence[SqlStep], *, summed: Collection[str] = ()
) -> list[Finding]:
    """A streaming dedup (SELECT DISTINCT, or GROUP BY of any_value() columns) with no
    WATERMARK in itself or upstream keeps every key forever: an error. A streaming aggregation
    without one keeps one row per group forever: a warning, since a small key set (a status)
    makes that acceptable (order_totals, user_event_counts' input is watermarked). The
    `summed` views (`add` tables) run on each batch and keep no state."""
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
        elif step.name not in summed and (node := _aggregation(query)) is not None:
            message = (
                "aggregation without a WATERMARK upstream keeps one state row per group forever"
            )
            findings.append(
                finding_at(step.path, node, "unbounded-aggregation", message, severity="warning")
            )
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
                    name = call_name(func)
                    if name in NONDETERMINISTIC and id(func) not in seen:
                        seen.add(id(func))
                        message = f"non-deterministic {name}() in a grouping or deduplication key"
                        findings.append(
                            finding_at(step.path, func, "nondeterministic-key", message)
                        )
    return findings
