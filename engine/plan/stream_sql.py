"""SQL that means something else on a stream than on a table, refused by the plan (no Spark).

Spark checks a streaming query for sorts, limits, window functions and joins of two streams.
This engine runs the views below the stateful steps (and every view of a pipeline without one)
on each micro-batch, where Spark does not check them, and where each would answer for that
batch's rows alone: a top 2 per batch, a row number that starts again every batch, a join
whose rows never meet when they arrive in different batches. So the plan refuses them in
every view that reads the source, as Spark would on a stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from sqlglot import exp

from engine.definitions.pipeline import Pipeline
from engine.definitions.sql import SqlStep
from engine.plan.findings import Finding, finding_at

__all__ = ["check_stream_sql", "downstream", "streaming_views"]


def downstream(pipeline: Pipeline, steps: Sequence[SqlStep], seeds: set[str]) -> set[str]:
    """`seeds` and every view that reads one of them, directly or through other views."""
    reads = {s.name: set(s.references) for s in steps}
    reads.update({h.name: {h.input.lower()} for h in pipeline.handlers})
    found = set(seeds)
    changed = True
    while changed:
        changed = False
        for name, inputs in reads.items():
            if name not in found and inputs & found:
                found.add(name)
                changed = True
    return found


def streaming_views(pipeline: Pipeline, steps: Sequence[SqlStep]) -> set[str]:
    """Names of the views that read the source, directly or through other views."""
    source = pipeline.source.view.lower()
    return downstream(pipeline, steps, {source}) - {source}


def check_stream_sql(pipeline: Pipeline, steps: Sequence[SqlStep]) -> list[Finding]:
    """ORDER BY, LIMIT, window functions (OVER), and joins, INTERSECT or EXCEPT of two
    streams, in a view that reads the source: one error finding each."""
    streaming = streaming_views(pipeline, steps)
    findings: list[Finding] = []
    for step in steps:
        if step.name in streaming:
            findings += (
                finding_at(step.path, node, code, message)
                for node, code, message in _refused(step.tree.expression, streaming)
            )
    return findings


_COMPLETE_ONLY = "in a streaming view: only in complete mode, which this engine does not use"


def _refused(
    query: exp.Expression, streaming: set[str]
) -> Iterator[tuple[exp.Expression, str, str]]:
    """(node, code, message) for each construct refused in one view's query."""
    reads = _Reads(query, streaming)
    for select in query.find_all(exp.Query):
        for clause, label in (("order", "ORDER BY"), ("limit", "LIMIT")):
            node = select.args.get(clause)
            if node is not None:
                yield node, "complete-mode-only", f"{label} {_COMPLETE_ONLY}"
    for window in query.find_all(exp.Window):
        if isinstance(window.parent, exp.Select) and window in window.parent.args.get(
            "windows", []
        ):
            continue  # a named window's definition (WINDOW w AS ...): its uses are reported
        yield (
            window,
            "window-function",
            "window function (OVER) in a streaming view: Spark refuses it on a stream, and "
            "here it would see one micro-batch's rows; use window() or session_window() in a "
            "GROUP BY, or a state handler",
        )
    for select in query.find_all(exp.Select):
        relations = [select.args.get("from_"), *(select.args.get("joins") or [])]
        streams = [r for r in relations if r is not None and reads.views(r)]
        for relation in streams[1:]:
            yield (
                relation,
                "stream-join",
                _combined("join", reads.views(streams[0]), reads.views(relation)),
            )
        for subquery in _predicates(select):
            if streams and reads.views(subquery):
                yield (
                    subquery,
                    "stream-join",
                    _combined("subquery", reads.views(streams[0]), reads.views(subquery)),
                )
    for operation in query.find_all(exp.Intersect, exp.Except):
        left, right = reads.views(operation.left), reads.views(operation.right)
        if left and right:
            label = "INTERSECT" if isinstance(operation, exp.Intersect) else "EXCEPT"
            yield operation.right, "stream-join", _combined(label, left, right)


def _combined(how: str, left: Iterable[str], right: Iterable[str]) -> str:
    names = ", ".join(sorted({*left, *right}))
    return (
        f"{how} of streaming views ({names}): this engine runs a view on each micro-batch, so "
        "rows of different batches would never meet (Spark keeps both sides in state); "
        "combine such rows in a state handler"
    )


def _predicates(select: exp.Select) -> list[exp.Expression]:
    """The subqueries of a SELECT outside its FROM and JOINs (IN, EXISTS, scalar), own only."""
    relations = [select.args.get("from_"), *(select.args.get("joins") or [])]
    found = []
    for node in select.find_all(exp.Subquery, exp.Exists):
        if node.parent_select is select and not any(_within(node, r) for r in relations):
            found.append(node)
    return found


def _within(node: exp.Expression, ancestor: exp.Expression | None) -> bool:
    parent = node.parent
    while parent is not None and parent is not ancestor:
        parent = parent.parent
    return parent is not None


class _Reads:
    """The streaming views a part of one view's query reads, through its CTEs too."""

    def __init__(self, query: exp.Expression, streaming: set[str]) -> None:
        self.streaming = streaming
        self.ctes = {cte.alias_or_name.lower(): cte.this for cte in query.find_all(exp.CTE)}

    def views(self, node: exp.Expression, seen: frozenset[str] = frozenset()) -> set[str]:
        found: set[str] = set()
        for table in node.find_all(exp.Table):
            name = table.name.lower()
            if table.args.get("db") or not name:
                continue  # a path or catalog table (delta.`/path`): not a view of the pipeline
            if name in self.ctes and name not in seen:
                found |= self.views(self.ctes[name], seen | {name})
            elif name in self.streaming:
                found.add(name)
        return found
