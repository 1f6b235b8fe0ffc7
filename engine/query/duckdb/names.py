"""Output columns without an alias get Spark-like names (`count(1)`, `sum(price)`, `hour(ts)`),
which DuckDB would name otherwise."""

from __future__ import annotations

from sqlglot import exp

__all__ = ["name_outputs"]

_WINDOWS = ("window", "session_window")


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
    return named.sql(dialect="spark", normalize_functions="lower")


def name_outputs(tree: exp.Expr) -> None:
    """The outer SELECT's unaliased outputs aliased as Spark names them."""
    if not isinstance(tree, exp.Select):
        return
    for projection in list(tree.expressions):
        if isinstance(projection, exp.Alias | exp.Column | exp.Star | exp.Dot):
            continue
        projection.replace(exp.alias_(projection.copy(), _spark_name(projection), quoted=True))
