"""`query`: ad-hoc, read-only SQL over the lake's Delta tables, known by name.

The SQL is Spark SQL. It is checked here (one query, nothing that writes, only the functions
on the allow-list of `engine.query.functions`) before any engine starts; the tables it names
are read with delta-rs as Arrow, at the latest version or at `--version` / `--as-of`, and
handed to an engine: DuckDB by default (`engine.query.duckdb`), Spark on request
(`run_query`, with variable substitution off). `EXPLAIN [mode] <query>` is Spark's plan of the
query, so only Spark answers it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from engine.definitions.syntax import SyntaxProblem, incomplete, parse_statements, syntax_problem
from engine.errors import UserError
from engine.lake import LATEST, Snapshot, read_arrow, table_path
from engine.lake.values import repair_text
from engine.query.dialect import SparkQuery, decommented
from engine.query.functions import check_bare_names, check_calls

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "READ_ONLY",
    "SUBSTITUTE",
    "explained_query",
    "parse_query",
    "read_tables",
    "referenced_tables",
    "run_query",
]

READ_ONLY = (
    "only SELECT, SHOW TABLES, SHOW COLUMNS, SHOW TBLPROPERTIES, DESCRIBE and EXPLAIN are "
    "allowed (query is read-only)"
)
# What may follow a query's body: moved from a lone VALUES to the SELECT that wraps it.
_QUERY_CLAUSES = ("order", "limit", "offset")
_EXPLAIN = re.compile(
    r"\s*EXPLAIN(?:\s+(?:EXTENDED|FORMATTED|CODEGEN|COST))?\s+(?P<query>.*)", re.I | re.S
)


def explained_query(sql: str) -> str | None:
    """The query of an `EXPLAIN [EXTENDED|FORMATTED|CODEGEN|COST] <query>` statement, else None."""
    explain = _EXPLAIN.fullmatch(decommented(sql))
    return explain["query"] if explain else None


def parse_query(sql: str) -> exp.Query:
    """The one read-only query in `sql` (Spark SQL), calling only allowed functions; anything
    else is a user error. For an EXPLAIN statement, its query."""
    sql = explained_query(sql) or sql
    try:
        trees = parse_statements(sql, SparkQuery)
    except sqlglot.errors.SqlglotError as err:
        raise UserError(f"query: {_where(syntax_problem(err))}") from None
    if len(trees) != 1:
        raise UserError(f"query: one statement at a time; {READ_ONLY}")
    tree = trees[0]
    if isinstance(tree, exp.Values):  # `VALUES (1, 2) [ORDER BY ...]` alone is a query too
        clauses = {k: tree.args.pop(k) for k in _QUERY_CLAUSES if tree.args.get(k)}
        tree = exp.select("*").from_(tree, copy=False)
        for key, clause in clauses.items():
            tree.set(key, clause)
    problem = incomplete(sql, tree, SparkQuery)
    if problem:
        raise UserError(f"query: {_where(problem)}")
    if not isinstance(tree, exp.Query) or tree.find(exp.DDL, exp.DML, exp.Command, exp.Set):
        raise UserError(f"query: {READ_ONLY}")
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise UserError(
                f"query: FROM {table.this.sql(dialect='spark')}: only the lake's tables can be "
                "read (no table functions)"
            )
        if table.args.get("db"):
            # `delta.`/path``, `parquet.`/path`` or `db.t`: the lake's tables go by their names.
            written = ".".join(part.sql(dialect="spark") for part in table.parts)
            raise UserError(
                f"query: FROM {written}: only the lake's tables can be read, by their names "
                f"alone (FROM {Path(table.name).name or table.name})"
            )
        alias = table.args.get("alias")
        if table.args.get("version"):
            clause = f"{table.name} {table.args['version'].sql(dialect='spark')}"
        elif alias and isinstance(alias.this, exp.Parameter):  # Delta's `table@v1`
            clause = f"{table.name}{_written(alias.this, sql)}"
        else:
            continue
        # The tables reach either engine as views of one snapshot, which have no versions.
        raise UserError(
            f"query: {clause}: give the version with --version N or --as-of TIMESTAMP (every "
            "table is read at it)"
        )
    for node in tree.find_all(exp.Placeholder, exp.Parameter):
        # DuckDB asked for values it was not given, or read `@x` as `$x`, and said "try
        # --engine spark", where Spark fails as well.
        if isinstance(node, exp.Placeholder):
            why = "a parameter, and query binds none: write the value in the SQL"
        else:
            why = "not Spark SQL here (no @ variables; ${...} is not substituted)"
        raise UserError(f"query: {_written(node, sql)}: {why}")
    check_calls(sql)  # only functions on the allow-list (engine/definitions/spark_functions.txt)
    return tree


def _where(problem: SyntaxProblem) -> str:
    where = f"line {problem.line}, col {problem.col}: " if problem.line else ""
    return where + problem.message


def _written(node: exp.Expression, sql: str) -> str:
    """`node` as the user wrote it: sqlglot reads `@x` and `${x}` alike, as `${x}`."""
    if isinstance(node, exp.Parameter):
        name = node.this.sql(dialect="spark")
        return f"@{name}" if f"@{name}" in sql else f"${{{name}}}"
    return node.sql(dialect="spark")


def referenced_tables(tree: exp.Query) -> list[str]:
    """The table names a query reads, without its CTEs and the names in hints."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    return sorted(
        {
            t.name
            for t in tree.find_all(exp.Table)
            if t.name.lower() not in ctes and not t.find_ancestor(exp.Hint)
        }
    )


def read_tables(tree: exp.Query, lake: Path, snapshot: Snapshot = LATEST) -> dict[str, pa.Table]:
    """The tables a query names, read with delta-rs as Arrow; an unknown name is a user error.

    Text that is not valid UTF-8 arrives with its bad bytes as `\\xNN` escapes
    (engine/lake/values.py): DuckDB's string functions fail on such bytes, and this is how every
    engine prints them anyway.
    """
    read: dict[str, pa.Table] = {}
    for name in referenced_tables(tree):
        table = snapshot.open(name, table_path(lake, name))
        read[name] = repair_text(read_arrow(table))
    return read


def _spark_tables(
    spark: SparkSession, tree: exp.Query, lake: Path, snapshot: Snapshot
) -> dict[str, Any]:
    """The tables a query names as Spark DataFrames: read by Spark's own Delta reader where
    the session has it, else from delta-rs snapshots."""
    from engine.runtime.session import has_delta

    if not has_delta(spark):
        return {n: spark.createDataFrame(d) for n, d in read_tables(tree, lake, snapshot).items()}
    frames = {}
    for name in referenced_tables(tree):
        path = table_path(lake, name)
        reader = spark.read.format("delta")
        if snapshot != LATEST:
            # The version as delta-rs picks it, so both engines read the same one and refuse a
            # missing one alike (Spark's timestampAsOf also refuses a time after the last commit).
            reader = reader.option("versionAsOf", snapshot.open(name, path).version())
        frames[name] = reader.load(str(path))
    return frames


def _printable(frame: Any) -> Any:
    """The query's columns as pyspark's Arrow conversion can take them and both engines print
    them: a VARIANT as its JSON text (Arrow would get the binary encoding, and a NULL one fails),
    and Spark's NULL type inside an array, map or struct (`map()`, `array_repeat(NULL, 2)`,
    which the conversion refuses) as STRING, which holds only NULLs there."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import VariantType

    fields = frame.schema.fields
    columns, changed = [], False
    for i, field in enumerate(fields):
        column = F.col(f"_{i}")
        if isinstance(field.dataType, VariantType):
            column, changed = F.to_json(column), True
        elif (typed := _void_as_string(field.dataType)) is not None:
            column, changed = column.cast(typed), True
        columns.append(column.alias(field.name))
    if not changed:
        return frame
    return frame.toDF(*(f"_{i}" for i in range(len(fields)))).select(*columns)  # names may repeat


def _void_as_string(kind: Any) -> Any:
    """`kind` with each NULL type inside it as STRING; None when it has none inside."""
    from pyspark.sql.types import ArrayType, MapType, NullType, StringType, StructField, StructType

    def replaced(inner: Any) -> Any:
        return StringType() if isinstance(inner, NullType) else _void_as_string(inner)

    if isinstance(kind, ArrayType):
        element = replaced(kind.elementType)
        return None if element is None else ArrayType(element, kind.containsNull)
    if isinstance(kind, MapType):
        key, value = replaced(kind.keyType), replaced(kind.valueType)
        if key is None and value is None:
            return None
        return MapType(key or kind.keyType, value or kind.valueType, kind.valueContainsNull)
    if isinstance(kind, StructType):
        inner = [replaced(f.dataType) for f in kind.fields]
        if all(t is None for t in inner):
            return None
        return StructType(
            [
                StructField(f.name, t or f.dataType, f.nullable, f.metadata)
                for f, t in zip(kind.fields, inner, strict=True)
            ]
        )
    return None


# Spark replaces `${env:HOME}`, `${system:user.name}` and `${spark.x}` in SQL text before
# parsing it unless this is off: a query's text must reach Spark as it was checked.
SUBSTITUTE = "spark.sql.variable.substitute"


def run_query(spark: SparkSession, sql: str, lake: Path, snapshot: Snapshot = LATEST) -> pa.Table:
    """Register the tables the query names as Spark views at the snapshot and run it on
    Spark, with variable substitution off (the session's setting is restored after)."""
    from pyspark.errors import PySparkException

    from engine.runtime.errors import spark_error_line

    tree = parse_query(sql)
    before = spark.conf.get(SUBSTITUTE)
    spark.conf.set(SUBSTITUTE, "false")
    try:
        frames = _spark_tables(spark, tree, lake, snapshot)
        check_bare_names(tree, [c for f in frames.values() for c in f.columns])
        for name, frame in frames.items():
            frame.createOrReplaceTempView(name)
        return _printable(spark.sql(sql)).toArrow()
    except PySparkException as err:
        raise UserError(f"query: {spark_error_line(err)}") from None
    finally:
        spark.conf.set(SUBSTITUTE, before)
