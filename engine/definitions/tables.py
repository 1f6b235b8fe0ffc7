"""Delta table definitions: one `tables/<name>.sql` DDL file per table."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import pyarrow as pa
import sqlglot
from sqlglot import exp

from engine.definitions.syntax import syntax_problem
from engine.errors import UserError

__all__ = ["Column", "TableDef", "load_tables", "view_misfits"]

#: append: rows added; merge: rows replaced by key; add: by key, the other columns summed
#: into the row already there (for counts and sums computed per batch).
WriteMode = Literal["append", "merge", "add"]
TableRole = Literal["data", "quarantine"]

_SCALARS: Mapping[exp.DataType.Type, pa.DataType] = {
    exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.DOUBLE: pa.float64(),
    exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.DATE: pa.date32(),
    # Delta's TIMESTAMP is microseconds, adjusted to UTC.
    exp.DataType.Type.TIMESTAMP: pa.timestamp("us", tz="UTC"),
    exp.DataType.Type.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
}


@dataclass(frozen=True)
class Column:
    """A column of a table definition."""

    name: str
    type: pa.DataType
    nullable: bool
    comment: str
    ddl_type: str


@dataclass(frozen=True)
class TableDef:
    """A Delta table: schema, write mode, merge key and partitioning, from its DDL file."""

    name: str
    path: Path
    columns: tuple[Column, ...]
    mode: WriteMode
    key: tuple[str, ...] = ()
    partition_by: tuple[str, ...] = ()
    description: str = ""
    #: "quarantine" for the table of rejected input (`'lake.role' = 'quarantine'`): the run
    #: counts its rows in the input-line accounting.
    role: TableRole = "data"

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The table's schema as Arrow, the form delta-rs writes; a column's DDL comment is its
        field's `comment` metadata, which delta-rs keeps in the Delta schema, as Spark does."""
        return pa.schema(
            [
                pa.field(
                    c.name,
                    c.type,
                    nullable=c.nullable,
                    metadata={"comment": c.comment} if c.comment else None,
                )
                for c in self.columns
            ]
        )

    @property
    def column_names(self) -> list[str]:
        """Column names in declared order."""
        return [c.name for c in self.columns]

    @property
    def summed(self) -> list[str]:
        """The columns an `add` table sums into the row already there: all but the key."""
        return [c.name for c in self.columns if c.name not in self.key]


def _arrow_type(dtype: exp.DataType, where: Path) -> pa.DataType:
    # Spark's writer checks a VARCHAR's length and a STRUCT field's NOT NULL on every row;
    # delta-rs's writes neither, so a table would take rows on one writer it refuses on the other.
    if dtype.this == exp.DataType.Type.VARCHAR and dtype.expressions:
        raise UserError(
            f"{where}: {dtype.sql(dialect='spark')}: a length is not supported; use STRING"
        )
    if dtype.this == exp.DataType.Type.STRUCT:
        _check_names([f.name for f in dtype.expressions], where, "STRUCT field")
        for f in dtype.expressions:
            for c in f.args.get("constraints") or []:
                raise UserError(
                    f"{where}: STRUCT field {f.name}: {c.sql(dialect='spark')}: not supported; "
                    "a STRUCT's fields have a name and a type"
                )
    if dtype.this in _SCALARS:
        return _SCALARS[dtype.this]
    if dtype.this == exp.DataType.Type.ARRAY:
        return pa.list_(_arrow_type(dtype.expressions[0], where))
    if dtype.this == exp.DataType.Type.STRUCT:
        return pa.struct(
            [pa.field(f.name, _arrow_type(f.args["kind"], where)) for f in dtype.expressions]
        )
    if dtype.this == exp.DataType.Type.MAP:
        key, value = dtype.expressions
        return pa.map_(_arrow_type(key, where), _arrow_type(value, where))
    raise UserError(
        f"{where}: unsupported column type {dtype.sql(dialect='spark')} (supported: STRING, "
        "BIGINT, INT, SMALLINT, DOUBLE, FLOAT, BOOLEAN, DATE, TIMESTAMP, and ARRAY, STRUCT and "
        "MAP of them)"
    )


# Delta without column mapping (which delta-rs does not write) takes none of these in a name.
_NAME_CHARACTERS = re.compile(r"[ ,;{}()\n\t=]")


def _check_names(names: list[str], where: Path, what: str) -> None:
    """Names both writers take: none twice in any case (Spark's names are case-insensitive)
    and none with a character Delta refuses; delta-rs took the characters without a word."""
    seen: set[str] = set()
    for name in names:
        if _NAME_CHARACTERS.search(name):
            raise UserError(
                f"{where}: {what} {name!r}: a name here has no space and none of , ; {{ }} ( ) ="
            )
        if name.lower() in seen:
            raise UserError(f"{where}: {what} '{name}' is there twice (names ignore case)")
        seen.add(name.lower())


def _column(cdef: exp.ColumnDef, where: Path) -> Column:
    constraints = [c.args.get("kind") for c in cdef.args.get("constraints") or []]
    for c in constraints:
        if not isinstance(c, exp.NotNullColumnConstraint | exp.CommentColumnConstraint):
            _unsupported(where, f"column {cdef.name}: {c.sql(dialect='spark')}")
    comment = next(
        (c.this.this for c in constraints if isinstance(c, exp.CommentColumnConstraint)), ""
    )
    not_null = any(isinstance(c, exp.NotNullColumnConstraint) for c in constraints)
    dtype = cdef.args["kind"]
    return Column(
        name=cdef.name,
        type=_arrow_type(dtype, where),
        nullable=not not_null,
        comment=comment,
        ddl_type=dtype.sql(dialect="spark"),
    )


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


#: The TBLPROPERTIES a table definition takes: what the lake does with the table.
_PROPERTIES = ("lake.mode", "lake.key", "lake.role")


def _unsupported(where: Path, clause: str, hint: str = "") -> None:
    """Refuse a clause this tool would not honour on both of its Delta writers (Spark and
    delta-rs): it is not dropped without a word."""
    raise UserError(
        f"{where}: {clause}: not supported; a table here has typed columns with NOT NULL and "
        f"COMMENT, PARTITIONED BY, and TBLPROPERTIES {', '.join(map(repr, _PROPERTIES))}{hint}"
    )


def _check_clauses(tree: exp.Create, where: Path) -> None:
    if not isinstance(tree.this, exp.Schema) or tree.expression is not None:
        _unsupported(where, "CREATE TABLE without its columns, or AS SELECT")
    if tree.args.get("replace"):
        _unsupported(where, "CREATE OR REPLACE", " (a table is created once, then altered)")
    for element in tree.this.expressions:
        if not isinstance(element, exp.ColumnDef):
            _unsupported(where, element.sql(dialect="spark"))
    properties = tree.args["properties"].expressions if tree.args.get("properties") else []
    if not any(isinstance(prop, exp.FileFormatProperty) for prop in properties):
        raise UserError(f"{where}: the table is a Delta table: write USING DELTA after its columns")
    for prop in properties:
        if isinstance(prop, exp.PartitionedByProperty):
            continue
        if isinstance(prop, exp.FileFormatProperty) and prop.name.upper() == "DELTA":
            continue
        if type(prop) is exp.Property and prop.name in _PROPERTIES:
            continue
        clause = prop.sql(dialect="spark")
        if type(prop) is exp.Property:
            clause = f"TBLPROPERTIES '{prop.name}'"
        hint = " (its description is the comment above CREATE TABLE)"
        _unsupported(where, clause, hint if isinstance(prop, exp.SchemaCommentProperty) else "")


def _header_comment(text: str) -> str:
    lines = [ln[2:].strip() for ln in text.splitlines() if ln.startswith("--")]
    return " ".join(lines)


def load_table(path: Path) -> TableDef:
    """Parse one `CREATE TABLE ... USING DELTA` file into a table definition."""
    text = path.read_text()
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.SqlglotError as err:
        problem = syntax_problem(err)
        where = ":".join(str(p) for p in (path, problem.line, problem.col) if p is not None)
        raise UserError(f"{where}: {problem.message}") from None
    if not isinstance(tree, exp.Create) or tree.kind != "TABLE":
        raise UserError(f"{path}: expected one CREATE TABLE statement")
    _check_clauses(tree, path)
    name = tree.this.this.name
    if name != path.stem:
        raise UserError(f"{path}: table '{name}' must be named after its file '{path.stem}'")
    columns = tuple(_column(c, path) for c in tree.this.expressions if isinstance(c, exp.ColumnDef))
    _check_names([c.name for c in columns], path, "column")
    props: dict[str, str] = {}
    partition_by: tuple[str, ...] = ()
    for prop in tree.args["properties"].expressions if tree.args.get("properties") else []:
        if isinstance(prop, exp.PartitionedByProperty):
            partition_by = tuple(e.name for e in prop.this.expressions)
        elif type(prop) is exp.Property:
            props[prop.name] = prop.args["value"].name
    mode = props.get("lake.mode", "append")
    if mode not in ("append", "merge", "add"):
        raise UserError(f"{path}: lake.mode must be 'append', 'merge' or 'add', not '{mode}'")
    role = props.get("lake.role", "data")
    if role not in ("data", "quarantine"):
        raise UserError(f"{path}: lake.role must be 'data' or 'quarantine', not '{role}'")
    key = tuple(k.strip() for k in props.get("lake.key", "").split(",") if k.strip())
    if mode != "append" and not key:
        raise UserError(f"{path}: a merged table needs TBLPROPERTIES ('lake.key' = 'col, ...')")
    names = {c.name for c in columns}
    for col in (*key, *partition_by):
        if col not in names:
            raise UserError(f"{path}: key or partition column '{col}' is not a column")
    for column in columns:
        if column.name in partition_by and pa.types.is_nested(column.type):
            # Spark refuses it at creation (INVALID_PARTITION_COLUMN_DATA_TYPE), delta-rs not.
            raise UserError(
                f"{path}: partition column '{column.name}' is {column.ddl_type}: a partition "
                "column has a plain type"
            )
    words = [c for c in columns if c.name not in key and not _is_number(c.type)]
    if mode == "add" and words:
        raise UserError(
            f"{path}: lake.mode 'add' sums every column but the key; "
            f"column '{words[0].name}' is {words[0].ddl_type}"
        )
    return TableDef(
        name=name,
        path=path,
        columns=columns,
        mode=mode,  # type: ignore[arg-type]
        key=key,
        partition_by=partition_by,
        description=_header_comment(text),
        role=role,  # type: ignore[arg-type]
    )


def load_tables(folder: Path) -> dict[str, TableDef]:
    """All table definitions in the folder, by name."""
    return {p.stem: load_table(p) for p in sorted(folder.glob("*.sql"))}


def view_misfits(
    view: str, target: str, declared: Sequence[str], given: Sequence[str], *, read: bool
) -> list[str]:
    """Why a view's columns (`given`) do not fit the columns its table or topic declares: one
    it lacks, or one the target lacks that is lost unseen unless a step reads the view
    (`read`). Names in any case, as Spark selects them. `lint` asks with the columns it
    resolves, the run with Spark's."""
    have = {c.lower() for c in given}
    wanted = {c.lower() for c in declared}
    problems = []
    missing = [c for c in declared if c.lower() not in have]
    if missing:
        problems.append(f"view '{view}' lacks column(s) {', '.join(missing)} of table {target}")
    extra = [c for c in given if c.lower() not in wanted]
    if extra and not read:
        problems.append(
            f"view '{view}' has column(s) {', '.join(extra)} that table {target} lacks: "
            "declare them in the table or leave them out of the view"
        )
    return problems
