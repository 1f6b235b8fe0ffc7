"""The types sqlglot infers for a query's expressions from the tables' schemas, for the
rewrites that depend on an operand's type, which the SQL alone does not give."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

__all__ = ["Schema", "schema_of", "typed_twins"]

#: Table, column, SQL type (`DOUBLE`, `DECIMAL(10, 2)`, ... `UNKNOWN` for what is not inferred).
Schema = Mapping[str, Mapping[str, str]]


def typed_twins(
    tree: exp.Expr, schema: Schema, kinds: tuple[type[exp.Expr], ...]
) -> dict[type[exp.Expr], list[tuple[exp.Expr, exp.Expr]]]:
    """Each node of `tree` of these kinds with its twin in a typed copy (whose operands carry
    `.type`), by kind; none of a kind where the copy cannot be qualified or holds another
    number of them (then no pairing is trusted)."""
    try:
        typed = annotate_types(
            qualify(tree.copy(), schema=schema, dialect="spark", validate_qualify_columns=False),
            schema=schema,
            dialect="spark",
        )
    except sqlglot.errors.SqlglotError:
        return {kind: [] for kind in kinds}
    twins = {}
    for kind in kinds:
        nodes = [n for n in tree.find_all(kind) if type(n) is kind]
        copies = [n for n in typed.find_all(kind) if type(n) is kind]
        twins[kind] = list(zip(nodes, copies, strict=True)) if len(nodes) == len(copies) else []
    return twins


def schema_of(tables: Mapping[str, pa.Table]) -> Schema:
    """The tables' column types as SQL, for sqlglot's type inference (nested ones unknown)."""
    scalar = {
        pa.types.is_float64: "DOUBLE",
        pa.types.is_float32: "FLOAT",
        pa.types.is_integer: "BIGINT",
        pa.types.is_string: "STRING",
        pa.types.is_large_string: "STRING",
        pa.types.is_boolean: "BOOLEAN",
        pa.types.is_timestamp: "TIMESTAMP",
        pa.types.is_date: "DATE",
    }

    def sql(t: pa.DataType) -> str:
        if pa.types.is_decimal(t):
            return f"DECIMAL({t.precision}, {t.scale})"
        return next((name for test, name in scalar.items() if test(t)), "UNKNOWN")

    return {name: {f.name: sql(f.type) for f in table.schema} for name, table in tables.items()}
