"""Output columns without an alias get Spark-like names (`count(1)`, `sum(price)`, `hour(ts)`),
which DuckDB would name otherwise."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["grouped_windows", "name_inline_tables", "name_outputs"]

_WINDOWS = ("window", "session_window")
# The names sqlglot gives the CTEs it writes for pipe syntax's steps.
_PIPE_STEP = "__tmp"


def _spark_name(projection: exp.Expr) -> str:
    """Roughly the name Spark gives an unaliased output expression."""
    if isinstance(projection, exp.Count) and isinstance(projection.this, exp.Star):
        return "count(1)"
    if isinstance(projection, exp.Explode):
        return "col"
    if isinstance(projection, exp.Anonymous) and projection.name.lower() in _WINDOWS:
        return projection.name.lower()
    named = projection.copy()
    for paren in list(named.find_all(exp.Paren)):
        paren.replace(paren.this)
    for column in list(named.find_all(exp.Column)):
        column.replace(exp.column(column.name))
    for literal in list(named.find_all(exp.Literal)):
        if literal.is_string:
            literal.replace(exp.var(literal.name))
    for binary in list(named.find_all(exp.Binary)):
        if not isinstance(binary, exp.Dot):
            binary.replace(exp.Paren(this=binary.copy()))
    if isinstance(named, exp.Binary) and not isinstance(named, exp.Dot):
        named = exp.Paren(this=named)
    # Not its comments: `sum(price) /* total */` is named `sum(price)`, as Spark names it.
    return named.sql(dialect="spark", normalize_functions="lower", comments=False)


def name_inline_tables(tree: exp.Expr) -> None:
    """`VALUES (1, 2)` without column names has Spark's `col1`, `col2` (DuckDB's are `col0`,
    `col1`)."""
    for values in list(tree.find_all(exp.Values)):
        alias = values.args.get("alias")
        if (alias and alias.columns) or not values.expressions:
            continue
        first = values.expressions[0]
        width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
        columns = [exp.to_identifier(f"col{i}") for i in range(1, width + 1)]
        name = alias.this if alias and alias.this else exp.to_identifier("inline_table")
        values.set("alias", exp.TableAlias(this=name, columns=columns))


def name_outputs(tree: exp.Expr) -> None:
    """The outer SELECT's unaliased outputs aliased as Spark names them, and those of the steps
    of pipe syntax (`|> AGGREGATE count(*)`), which sqlglot writes as CTEs the outer one reads."""
    if not isinstance(tree, exp.Select):
        return
    piped = [c.this for c in tree.find_all(exp.CTE) if c.alias.startswith(_PIPE_STEP)]
    for select in (tree, *(s for s in piped if isinstance(s, exp.Select))):
        for projection in list(select.expressions):
            if isinstance(projection, exp.Alias | exp.Column | exp.Star | exp.Dot):
                continue
            named = exp.alias_(projection.copy(), _spark_name(projection), quoted=True)
            projection.replace(named)


def grouped_windows(tree: exp.Expr) -> None:
    """`window.start`, `window` (and `session_window`'s) in a SELECT that groups by that call
    name the call's column, as in Spark: they become the call (DuckDB knew no table `window`)."""
    for select in list(tree.find_all(exp.Select)):
        group = select.args.get("group")
        calls = {
            c.name.lower(): c
            for c in (group.expressions if group else [])
            if isinstance(c, exp.Anonymous) and c.name.lower() in _WINDOWS
        }
        if not calls:
            continue
        read = {t.alias_or_name.lower() for t in select.find_all(exp.Table)}
        for column in list(select.find_all(exp.Column)):
            if column.find_ancestor(exp.Select) is not select:
                continue
            table, name = column.table.lower(), column.name
            if table in calls and table not in read:  # window.start
                named = exp.Dot(this=calls[table].copy(), expression=exp.to_identifier(name))
            elif not table and name.lower() in calls and name.lower() not in read:  # window
                named = calls[name.lower()].copy()
            else:
                continue
            if column.parent is select:  # an output keeps the name Spark gives it
                named = exp.alias_(named, name, quoted=True)
            column.replace(named)
