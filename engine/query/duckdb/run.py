"""A query run on an in-memory DuckDB over the lake's tables, its result typed as Spark's.

The tables' times are registered as TIMESTAMPs (their UTC wall clock) and the result's come
back as UTC times, so a time turned into text reads as Spark's, with no '+00'; integral
DECIMAL(38, 0) results (DuckDB's HUGEINT sums) come back as BIGINT, as in Spark.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from duckdb.sqltypes import SQLNULL, VARCHAR

from engine.errors import UserError, did_you_mean, first_line
from engine.lake import LATEST, Snapshot
from engine.lake.values import replace_leaves
from engine.query import explained_query, parse_query, read_tables
from engine.query.duckdb.aggregates import SUM_OVERFLOW
from engine.query.duckdb.arrays import OUT_OF_BOUNDS, SEQUENCE_BOUNDARIES
from engine.query.duckdb.inferred import schema_of
from engine.query.duckdb.numbers import CAST_MALFORMED, DIVIDE_BY_ZERO, REMAINDER_BY_ZERO
from engine.query.duckdb.sql import SPARK_HINT, STOP
from engine.query.duckdb.text import URL_UNDECODABLE
from engine.query.duckdb.translate import to_duckdb_sql
from engine.query.functions import check_bare_names

__all__ = ["connect", "run_duckdb"]


def _retype(table: pa.Table, leaf: Callable[[pa.DataType], pa.DataType | None]) -> pa.Table:
    """`table` with each column's types that `leaf` maps to another cast, at any depth."""
    for i, field in enumerate(table.schema):
        kind = replace_leaves(field.type, leaf)
        if kind is not None:
            table = table.set_column(i, field.with_type(kind), table.column(i).cast(kind))
    return table


def _wall_clock(table: pa.Table) -> pa.Table:
    """The lake's times (UTC) as DuckDB TIMESTAMPs, their UTC wall clock, as Spark's are in a
    UTC session: a TIMESTAMPTZ would turn into text with '+00' (CAST(t AS STRING), concat)."""
    return _retype(
        table, lambda t: pa.timestamp(t.unit) if pa.types.is_timestamp(t) and t.tz else None
    )


def _spark_types(result: pa.Table) -> pa.Table:
    """DuckDB's HUGEINT (sum of integers) arrives as DECIMAL(38, 0); Spark gives BIGINT. A
    TIMESTAMP is a UTC time, as Spark's are."""
    result = _retype(
        result, lambda t: pa.timestamp(t.unit, "UTC") if pa.types.is_timestamp(t) else None
    )
    for i, field in enumerate(result.schema):
        if pa.types.is_decimal(field.type) and field.type.scale == 0 and field.type.precision == 38:
            try:
                column = pc.cast(result.column(i), pa.int64())
            except pa.ArrowInvalid:
                continue
            result = result.set_column(i, field.name, column)
    return result


# DuckDB's words for a query Spark cannot analyse either: a column or table alias its tables
# do not have, a name two of them have, a column neither grouped nor aggregated.
_REFUSED_BY_SPARK_TOO = re.compile(
    r'not found in FROM clause|does not have a column named|Referenced table ".*" not found'
    r"|Ambiguous reference to column|must appear in the GROUP BY clause"
)
# The stops the rewrites make where Spark stops too: no hint to try it.
_AS_ON_SPARK = (
    DIVIDE_BY_ZERO,
    REMAINDER_BY_ZERO,
    CAST_MALFORMED,
    SEQUENCE_BOUNDARIES,
    URL_UNDECODABLE,
    OUT_OF_BOUNDS,
    SUM_OVERFLOW,
    # DuckDB's own: arithmetic past its type's range, and a cast past the target's range
    "Overflow in ",
    "out of range for the destination type",
)


def _stop(message: str | None) -> None:
    raise ValueError(message)


# How DuckDB words a failure of `_stop`, before its message.
_STOPPED = re.compile(r"Python exception occurred while executing the UDF: ValueError: ")


_UNKNOWN_NAME = re.compile(
    r'Referenced (?:column "(?P<column>[^"]+)"|table "(?P<table>[^"]+)") not found'
    r'|does not have a column named "(?P<named>[^"]+)"'
)
_CANDIDATES = re.compile(r"^Candidate (?:bindings|tables): (.*)$", re.M)


def _did_you_mean(message: str, columns: Collection[str]) -> str:
    """For a name the query got wrong, the close one of those DuckDB lists below its first
    line (else of the `columns` of the tables read), as Spark suggests one; else nothing."""
    name = _UNKNOWN_NAME.search(message)
    if name is None:
        return ""
    listed = _CANDIDATES.search(message)
    if listed:
        candidates = re.findall(r'"([^"]+)"', listed[1])
    else:
        candidates = [] if name["table"] else sorted(set(columns))
    wrong = name["column"] or name["table"] or name["named"]
    return did_you_mean(wrong, candidates, cutoff=0.6)


def connect(tables: Mapping[str, pa.Table]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with these Arrow tables registered under their names, in UTC, with
    the rewrites' `STOP`, without file-system access or extension loading, and with its
    configuration locked."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    # Not volatile, unlike DuckDB's error(), and called for a NULL message too.
    con.create_function(
        STOP, _stop, [VARCHAR], SQLNULL, null_handling="special", side_effects=False
    )
    for name, data in tables.items():
        con.register(name, data)
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run_duckdb(sql: str, lake: Path, snapshot: Snapshot = LATEST) -> pa.Table:
    """Run read-only Spark SQL over the lake's tables on an in-memory DuckDB."""
    if explained_query(sql) is not None:
        raise UserError(
            "query: EXPLAIN shows Spark's plan, which DuckDB does not make: add --engine spark"
        )
    tree = parse_query(sql)
    tables = {name: _wall_clock(table) for name, table in read_tables(tree, lake, snapshot).items()}
    duck_sql = to_duckdb_sql(tree, schema_of(tables))
    columns = [c for t in tables.values() for c in t.column_names]
    check_bare_names(tree, columns)
    con = connect(tables)
    try:
        return _spark_types(con.sql(duck_sql).to_arrow_table())
    except duckdb.Error as err:
        first = _STOPPED.sub("", first_line(err))
        # A name the query gets wrong, or a zero divisor, fails on Spark too: no hint to try it.
        refused = isinstance(err, duckdb.BinderException) and _REFUSED_BY_SPARK_TOO.search(first)
        same_on_spark = refused or any(stop in first for stop in _AS_ON_SPARK)
        hint = _did_you_mean(str(err), columns) if refused else ""
        raise UserError(
            f"query: DuckDB: {first}{hint}" + ("" if same_on_spark else f" ({SPARK_HINT})")
        ) from None
    finally:
        con.close()
