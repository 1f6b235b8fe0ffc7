"""`session_window(ts, gap)` in a GROUP BY, as Spark groups a batch of rows into sessions.

A row's session starts at its time and lasts `gap`; sessions of the same other grouping keys
that overlap or touch are one, from their first time to their last time plus the gap, and a
row without a time is in none. DuckDB has no such window, so the query's FROM and WHERE become
a subquery that numbers each key's sessions in time order (a new one where a time is past the
latest before it plus the gap) and gives each row its session as `start`, `end`; the query
then groups by that column. Only a query reading one table (no joins), with the gap written as
a literal and the window itself in its GROUP BY (or the place of a selected one), is
translated; any other is refused with the hint.
"""

from __future__ import annotations

from sqlglot import exp

from engine.definitions.durations import parse_duration
from engine.errors import UserError
from engine.query.duckdb.sql import SPARK_HINT, duckdb_expr

__all__ = ["session_windows"]

_TIME, _NEW, _ID, _WINDOW = "__sw_t", "__sw_new", "__sw_id", "__sw"


def session_windows(tree: exp.Expr) -> None:
    """Each SELECT that groups by `session_window(...)`, grouped by its rows' sessions."""
    for select in reversed(list(tree.find_all(exp.Select))):  # innermost first
        calls = [c for c in _session_calls(select) if c.find_ancestor(exp.Select) is select]
        if calls:
            _group_by_sessions(select, calls)


def _session_calls(select: exp.Select) -> list[exp.Anonymous]:
    return [c for c in select.find_all(exp.Anonymous) if c.name.lower() == "session_window"]


def _refuse(why: str) -> UserError:
    return UserError(f"query: session_window(): {why} on the DuckDB engine ({SPARK_HINT})")


def _group_by_sessions(select: exp.Select, calls: list[exp.Anonymous]) -> None:
    first = calls[0]
    if any(c != first for c in calls) or len(first.expressions) != 2:
        raise _refuse("one session_window(time, gap) per query is translated")
    time, gap = first.expressions
    if not (isinstance(gap, exp.Literal) and gap.is_string):
        raise _refuse("a gap written as a literal like '5 minutes' is translated")
    try:
        interval = parse_duration(gap.name).interval_sql()
    except ValueError:
        raise _refuse(f"the gap {gap.name!r} is not a duration") from None
    source = select.args.get("from_")
    if source is None or select.args.get("joins") or select.args.get("laterals"):
        raise _refuse("a query reading one table, without joins, is translated")
    keys = _other_keys(select, first)
    alias = source.this.alias_or_name

    # Innermost: the rows the query reads, with their time and keys; none without a time.
    rows = exp.select("*", exp.alias_(duckdb_expr("CAST(__0 AS TIMESTAMPTZ)", time), _TIME))
    rows = rows.select(*(exp.alias_(k.copy(), f"__sw_k{i}") for i, k in enumerate(keys)))
    rows = rows.from_(source.this.copy()).where(exp.not_(time.copy().is_(exp.null())))
    if (where := select.args.get("where")) is not None:
        rows = rows.where(where.this.copy())
    by_key = ", ".join(f"__sw_k{i}" for i in range(len(keys)))
    partition = f"PARTITION BY {by_key} " if keys else ""
    latest = (
        f"max({_TIME}) OVER ({partition}ORDER BY {_TIME} "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    )
    numbered = _reading(
        f"SELECT *, sum({_NEW}) OVER ({partition}ORDER BY {_TIME} ROWS UNBOUNDED PRECEDING) "
        f"AS {_ID} FROM (SELECT *, CASE WHEN {_TIME} <= {latest} + {interval} THEN 0 ELSE 1 "
        f"END AS {_NEW} FROM __rows)",
        rows,
    )
    session = f"PARTITION BY {by_key + ', ' if keys else ''}{_ID}"
    windowed = _reading(
        f'SELECT *, struct_pack(start := min({_TIME}) OVER ({session}), "end" := '
        f"max({_TIME}) OVER ({session}) + {interval}) AS {_WINDOW} FROM __rows",
        numbered,
    )
    for call in calls:
        call.replace(exp.column(_WINDOW))
    select.set("where", None)
    select.set("from_", exp.From(this=windowed.subquery(alias)))


def _reading(template: str, rows: exp.Select) -> exp.Select:
    """The DuckDB query `template` reading `rows` where it names the table `__rows`."""
    query = duckdb_expr(template)
    next(t for t in query.find_all(exp.Table) if t.name == "__rows").replace(rows.subquery())
    return query


def _other_keys(select: exp.Select, call: exp.Anonymous) -> list[exp.Expr]:
    """The GROUP BY's expressions other than the session window, places read as the selected
    expressions; the window itself must be among them (Spark groups by `session_window(...)
    .start` without merging sessions: each row's own window)."""
    group = select.args.get("group")
    projections = [p.unalias() for p in select.expressions]
    keys, grouped = [], False
    for key in group.expressions if group else []:
        if isinstance(key, exp.Literal) and key.is_int and 0 < int(key.name) <= len(projections):
            key = projections[int(key.name) - 1]
        if key == call:
            grouped = True
        else:
            keys.append(key)
    if not grouped:
        raise _refuse("the window itself must be in the GROUP BY")
    return keys
