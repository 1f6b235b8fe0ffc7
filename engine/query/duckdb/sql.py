"""What the rewrites share: DuckDB SQL read into sqlglot, and the hint of a refusal."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

__all__ = ["SPARK_HINT", "duckdb_expr", "duckdb_sql"]

#: Ends a refusal, or an error of DuckDB's, where Spark would give the answer.
SPARK_HINT = "try --engine spark"


def duckdb_expr(sql: str) -> exp.Expr:
    """An expression written in DuckDB SQL (the rewrites that are shorter as text)."""
    return sqlglot.parse_one(sql, read="duckdb")


def duckdb_sql(node: exp.Expr) -> str:
    """`node` as DuckDB SQL in parentheses, to stand as an operand in a rewrite's text."""
    return f"({node.sql(dialect='duckdb')})"
