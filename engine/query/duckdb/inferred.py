"""The types sqlglot infers for a query's expressions from the tables' schemas, for the
rewrites that depend on an operand's type, which the SQL alone does not give."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

__all__ = ["TIMES", "Schema", "mark_types", "operand_type", "schema_of"]

_TYPES = "spark_operand_types"
_PLACE = "spark_typed_place"

#: The types of dates and times, as sqlglot names them.
TIMES = frozenset(
    exp.DataType.Type[t]
    for t in ("DATE", "TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "TIMESTAMPNTZ", "DATETIME")
)
#: Table, column, SQL type (`DOUBLE`, `DECIMAL(10, 2)`, ... `UNKNOWN` for what is not inferred).
Schema = Mapping[str, Mapping[str, str]]


def mark_types(tree: exp.Expr, schema: Schema, kinds: tuple[type[exp.Expr], ...]) -> None:
    """Marks each node of `tree` of these kinds with the types of its operands, found on its
    twin in a typed copy (the node's first: a `GROUP BY 1` there repeats the expression it
    names); none where the copy cannot be qualified or lost the node. A mark goes with the
    node's copies, as the rewrites move it."""
    nodes = [n for n in tree.walk() if type(n) in kinds]
    for place, node in enumerate(nodes):
        node.meta[_PLACE] = place  # copied with the node, so its twin carries it
    try:
        typed = annotate_types(
            qualify(tree.copy(), schema=schema, dialect="spark", validate_qualify_columns=False),
            schema=schema,
            dialect="spark",
        )
    except sqlglot.errors.SqlglotError:
        return
    twins: dict[int, exp.Expr] = {}
    for twin in typed.walk():
        if type(twin) in kinds and _PLACE in twin.meta:
            twins.setdefault(twin.meta[_PLACE], twin)
    for place, node in enumerate(nodes):
        twin = twins.get(place)
        if twin is None or type(twin) is not type(node):
            continue
        node.meta[_TYPES] = {
            name: [_type(a) for a in arg] if isinstance(arg, list) else _type(arg)
            for name, arg in twin.args.items()
        }


def operand_type(node: exp.Expr, name: str, place: int = 0) -> exp.DataType.Type | None:
    """The type `mark_types` found for `node`'s operand `name` (the one at `place` in a list
    such as `expressions`), or None."""
    found = node.meta.get(_TYPES, {}).get(name)
    if isinstance(found, list):
        return found[place] if place < len(found) else None
    return found


def _type(arg: object) -> exp.DataType.Type | None:
    if isinstance(arg, exp.Neg):  # -2.5 is a DECIMAL as 2.5 is (sqlglot said DOUBLE)
        return _type(arg.this)
    if isinstance(arg, exp.Literal) and not arg.is_string and not arg.is_int:
        # Spark reads 0.125 as a DECIMAL (sqlglot says DOUBLE), 1e3 as a DOUBLE
        return exp.DataType.Type.DOUBLE if "e" in arg.name.lower() else exp.DataType.Type.DECIMAL
    kind = arg.type if isinstance(arg, exp.Expr) else None
    return kind.this if kind is not None else None


def schema_of(tables: Mapping[str, pa.Table]) -> Schema:
    """The tables' column types as SQL, for sqlglot's type inference (UNKNOWN for the kinds it
    does not need)."""
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
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return f"ARRAY<{sql(t.value_type)}>"
        if pa.types.is_map(t):
            return f"MAP<{sql(t.key_type)}, {sql(t.item_type)}>"
        if pa.types.is_struct(t):
            fields = ", ".join(f"`{f.name}` {sql(f.type)}" for f in t)
            return f"STRUCT<{fields}>"
        return next((name for test, name in scalar.items() if test(t)), "UNKNOWN")

    return {name: {f.name: sql(f.type) for f in table.schema} for name, table in tables.items()}
