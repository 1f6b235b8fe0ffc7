"""How a table's DDL file differs from the Delta table in the lake, and whether Delta can
follow: new columns, widened types and columns' comments are applied, anything else is
refused (no Spark).

Types are compared as Spark's short type names (`bigint`, `array<struct<a:int>>`), read from
the DDL's Arrow types on one side and from the Delta log's JSON schema on the other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from engine.definitions.tables import Column, TableDef

__all__ = [
    "TableChanges",
    "arrow_type_name",
    "delta_type_name",
    "lake_table_changes",
    "table_changes",
]

_DELTA_NAMES: Mapping[str, str] = {
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
}

#: Type changes Delta's type widening applies in place (the table feature `typeWidening`).
WIDENINGS: frozenset[tuple[str, str]] = frozenset(
    {
        ("tinyint", "smallint"),
        ("tinyint", "int"),
        ("tinyint", "bigint"),
        ("smallint", "int"),
        ("smallint", "bigint"),
        ("int", "bigint"),
        ("float", "double"),
        ("tinyint", "double"),
        ("smallint", "double"),
        ("int", "double"),
    }
)


def delta_type_name(dtype: str | Mapping[str, Any]) -> str:
    """A type of a Delta log's schema as Spark's short name (nullability left out)."""
    if isinstance(dtype, str):
        return _DELTA_NAMES.get(dtype, dtype)
    kind = dtype["type"]
    if kind == "array":
        return f"array<{delta_type_name(dtype['elementType'])}>"
    if kind == "map":
        return f"map<{delta_type_name(dtype['keyType'])},{delta_type_name(dtype['valueType'])}>"
    fields = ",".join(f"{f['name']}:{delta_type_name(f['type'])}" for f in dtype["fields"])
    return f"struct<{fields}>"


_ARROW_NAMES: Mapping[pa.DataType, str] = {
    pa.string(): "string",
    pa.int64(): "bigint",
    pa.int32(): "int",
    pa.int16(): "smallint",
    pa.int8(): "tinyint",
    pa.float64(): "double",
    pa.float32(): "float",
    pa.bool_(): "boolean",
    pa.date32(): "date",
    pa.timestamp("us", tz="UTC"): "timestamp",
}


def arrow_type_name(dtype: pa.DataType) -> str:
    """A table definition's Arrow type as Spark's short name."""
    if pa.types.is_list(dtype):
        return f"array<{arrow_type_name(dtype.value_type)}>"
    if pa.types.is_map(dtype):
        return f"map<{arrow_type_name(dtype.key_type)},{arrow_type_name(dtype.item_type)}>"
    if pa.types.is_struct(dtype):
        fields = ",".join(f"{f.name}:{arrow_type_name(f.type)}" for f in dtype)
        return f"struct<{fields}>"
    return _ARROW_NAMES[dtype]


@dataclass(frozen=True)
class TableChanges:
    """What a run does to an existing table: columns to add, types to widen, NOT NULLs to
    drop; and `refused`, the differences Delta cannot apply to the rows already there."""

    table: str
    add: tuple[Column, ...] = ()
    #: (column as now declared, its type in the table)
    widen: tuple[tuple[Column, str], ...] = ()
    relax: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    #: Columns whose DDL comment is not the table's (DESCRIBE shows the table's).
    recomment: tuple[Column, ...] = ()

    @property
    def evolves(self) -> bool:
        """Whether the run changes the table's schema."""
        return bool(self.add or self.widen or self.relax or self.recomment)

    def describe(self) -> str:
        """The schema changes as one phrase, e.g. `add column x STRING; widen y INT -> BIGINT`."""
        parts = [f"add column {c.name} {c.ddl_type}" for c in self.add]
        parts += [f"widen {c.name} {old.upper()} -> {c.ddl_type}" for c, old in self.widen]
        parts += [f"allow NULL in {name}" for name in self.relax]
        parts += [f"comment on {c.name}" for c in self.recomment]
        return "; ".join(parts)


def table_changes(table: TableDef, schema_json: str, partition_by: Sequence[str]) -> TableChanges:
    """Compare the DDL with the table's Delta schema (`schema_json`, the log's form) and its
    partition columns."""
    existing = {f["name"]: f for f in json.loads(schema_json)["fields"]}
    declared = {c.name: c for c in table.columns}
    where = f"{table.path}"
    add, widen, relax, refused, recomment = [], [], [], [], []
    for name, field in existing.items():
        if name not in declared:
            refused.append(
                f"{where}: column {name} is gone (dropped or renamed), but the table has it"
            )
            continue
        column = declared[name]
        old, new = delta_type_name(field["type"]), arrow_type_name(column.type)
        if old != new:
            if (old, new) in WIDENINGS:
                widen.append((column, old))
            else:
                refused.append(f"{where}: column {name} changed type from {old} to {new}")
        if field["nullable"] and not column.nullable:
            refused.append(f"{where}: column {name} became NOT NULL; the table may hold NULLs")
        elif not field["nullable"] and column.nullable:
            relax.append(name)
        # A comment the DDL dropped stays: only a comment written is one to set.
        if column.comment and column.comment != field.get("metadata", {}).get("comment"):
            recomment.append(column)
    for name, column in declared.items():
        if name in existing:
            continue
        if not column.nullable:
            refused.append(
                f"{where}: new column {name} is NOT NULL, but the rows already there have "
                "no value for it (declare it nullable)"
            )
        else:
            add.append(column)
    if tuple(partition_by) != table.partition_by:
        old, new = (", ".join(columns) or "none" for columns in (partition_by, table.partition_by))
        refused.append(f"{where}: partitioning changed from ({old}) to ({new})")
    return TableChanges(
        table.name, tuple(add), tuple(widen), tuple(relax), tuple(refused), tuple(recomment)
    )


def lake_table_changes(table: TableDef, path: Path) -> TableChanges | None:
    """`table_changes` against the table at `path`, read with delta-rs; None when missing."""
    if not DeltaTable.is_deltatable(str(path)):
        return None
    delta = DeltaTable(str(path))
    return table_changes(table, delta.schema().to_json(), delta.metadata().partition_columns)
