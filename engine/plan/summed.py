"""Aggregations summed per batch into an `add` table (no Spark).

A view that writes a table with `'lake.mode' = 'add'` is a `GROUP BY` of the table's key with
only `count()` and `sum()`: it runs on each micro-batch, like a stateless view, and the table
adds each batch's counts to the row already there. So the query keeps no state for it, and
the view can sit below a stateful step another output of the query needs (a deduplication
feeding handlers) without a second copy of that step in another query.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from engine.definitions.pipeline import Pipeline
from engine.definitions.sql import SqlStep, position
from engine.definitions.tables import TableDef
from engine.plan.findings import Finding

__all__ = ["summed_findings", "summed_views"]

_ADDITIVE = (exp.Count, exp.Sum)


def _add_tables(pipeline: Pipeline, tables: Mapping[str, TableDef]) -> dict[str, str]:
    """View -> the `add` table it writes."""
    return {
        view.lower(): table
        for query in pipeline.queries
        for table, view in query.sinks.items()
        if table in tables and tables[table].mode == "add"
    }


def _problem(
    view: str, table: TableDef, steps: Mapping[str, SqlStep], pipeline: Pipeline
) -> tuple[str, exp.Expression | None] | None:
    """Why `view` cannot be summed into `table` (and where in its file), or None."""
    step = steps.get(view)
    what = f"table {table.name} has lake.mode 'add', so view {view}"
    if step is None or not step.aggregates:
        return f"{what} must be a GROUP BY of count() and sum() by the table's key", None
    query = step.tree.expression
    for column in query.selects:
        for call in column.find_all(exp.AggFunc):
            name = call.sql_name().lower()
            if not isinstance(call, _ADDITIVE):
                return f"{what} may only count() and sum(), which add up; not {name}()", call
            if call.find(exp.Distinct):
                # Distinct values of two batches may be the same ones: their counts do not add.
                return (
                    f"{what} may only count() and sum(), which add up; not {name}(DISTINCT)",
                    call,
                )
        summed = column.unalias()
        while isinstance(summed, exp.Filter):  # count(*) FILTER (WHERE ...) adds up too
            summed = summed.this
        if summed.find(exp.AggFunc) and not isinstance(summed, _ADDITIVE):
            # A ratio or a product of a batch's sums is not the ratio of the totals.
            return (
                f"{what}: column {column.alias_or_name} must be one count() or sum(), which "
                "add up; compute ratios and the like where the table is read",
                column,
            )
    if query.args.get("having") is not None:
        return f"{what} cannot filter with HAVING: a batch sees part of each group", None
    keys = [s.alias_or_name for s in query.selects if not any(s.find_all(exp.AggFunc))]
    if sorted(keys) != sorted(table.key):
        return (
            f"{what} must group by the table's key ({', '.join(table.key)}), "
            f"not ({', '.join(keys)})",
            None,
        )
    readers = [s.name for s in steps.values() if view in s.references]
    readers += [h.name for h in pipeline.handlers if h.input.lower() == view]
    topics = (t for q in pipeline.queries for t, v in q.topics.items() if v.lower() == view)
    readers += [f"topic {t}" for t in topics]
    if readers:
        return f"{what} holds one batch's sums, which {', '.join(readers)} cannot read", None
    return None


def summed_views(pipeline: Pipeline, tables: Mapping[str, TableDef]) -> frozenset[str]:
    """The views run on each batch and summed into their `add` table (planned only once
    `summed_findings` found nothing against them)."""
    return frozenset(_add_tables(pipeline, tables))


def summed_findings(
    pipeline: Pipeline, steps: Mapping[str, SqlStep], tables: Mapping[str, TableDef]
) -> list[Finding]:
    """An error for each view that writes an `add` table but cannot be summed per batch."""
    findings: list[Finding] = []
    for view, table in _add_tables(pipeline, tables).items():
        found = _problem(view, tables[table], steps, pipeline)
        if found is None:
            continue
        message, node = found
        step = steps.get(view)
        path = step.path if step else tables[table].path
        line, col = position(node) if node is not None else (None, None)
        findings.append(Finding(path, line, col, "table", message))
    return findings
