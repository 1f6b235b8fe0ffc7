"""What the rewrites share: templates of DuckDB SQL over the query's own nodes, and the hint
of a refusal."""

from __future__ import annotations

import functools
import re

import sqlglot
from sqlglot import exp

__all__ = ["SPARK_HINT", "STOP", "duckdb_expr", "is_duckdb_own"]

#: Ends a refusal, or an error of DuckDB's, where Spark would give the answer.
SPARK_HINT = "try --engine spark"
#: The function the rewrites stop a query with, as Spark stops, registered by `run.connect`:
#: DuckDB's own `error()` is volatile, which DuckDB refuses in a window's PARTITION BY and
#: ORDER BY (`rank() OVER (ORDER BY sum(x))`).
STOP = "spark_stop"

_OWN = "duckdb_own"
_OPERAND = re.compile(r"__(\d+)")


@functools.cache
def _template(sql: str) -> exp.Expr:
    """`sql` parsed once, its nodes marked as DuckDB's own."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for node in tree.walk():
        node.meta[_OWN] = True
    for bracket in tree.find_all(exp.Bracket):
        # sqlglot reads a literal index as counting from 0 and writes it back from 1; any
        # other index (`__1 + 1`) it writes as it is unless told it counts from 1 already.
        if not all(index.is_int for index in bracket.expressions):
            bracket.set("offset", 1)
    return tree


def duckdb_expr(sql: str, *operands: exp.Expr) -> exp.Expr:
    """An expression written in DuckDB SQL in which `__0`, `__1`, ... stand for `operands`
    (each in parentheses). The operands stay the query's nodes, so the later rewrites still
    see them as Spark's; the template's own nodes are marked (`is_duckdb_own`)."""
    tree = _template(sql).copy()
    for column in list(tree.find_all(exp.Column)):
        if not column.table and (place := _OPERAND.fullmatch(column.name)):
            column.replace(exp.Paren(this=operands[int(place[1])].copy()))
    return tree


def is_duckdb_own(node: exp.Expr) -> bool:
    """Whether `node` is a rewrite's own DuckDB SQL, not the query's, for a rewrite to leave
    alone (a cast, a regexp_replace)."""
    return bool(node.meta.get(_OWN))
