"""`query`: ad-hoc, read-only SQL over the lake's Delta tables, known by name.

The SQL is Spark SQL. It is checked here (one query, nothing that writes, only the functions
on the allow-list of `engine.query.functions`) before any engine starts; the tables it names
are read with delta-rs as Arrow, at the latest version or at `--version` / `--as-of`, and
handed to an engine: DuckDB by default (`engine.query.duckdb`), Spark on request
(`run_query`, with variable substitution off).
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

import pyarrow as pa
import sqlglot
from deltalake import DeltaTable
from sqlglot import exp

from engine.definitions.sql import SparkStreaming
from engine.errors import UserError, first_line
from engine.lake.values import json_safe, repair_text, replace_leaves
from engine.query.functions import check_bare_names, check_calls

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "LATEST",
    "SUBSTITUTE",
    "OutputFormat",
    "Snapshot",
    "lake_tables",
    "parse_query",
    "print_rows",
    "read_tables",
    "referenced_tables",
    "run_query",
]

OutputFormat = Literal["table", "json", "csv"]

READ_ONLY = "only SELECT queries are allowed (query is read-only)"


@dataclass(frozen=True)
class Snapshot:
    """Which version of every table a query reads: the latest, a version number, or the
    version current at a point in time."""

    version: int | None = None
    as_of: dt.datetime | None = None

    @classmethod
    def parse(cls, version: int | None, as_of: str | None) -> Snapshot:
        """From the command-line options; a time without a zone is UTC."""
        if as_of is None:
            return cls(version=version)
        try:
            when = dt.datetime.fromisoformat(as_of)
        except ValueError:
            raise UserError(
                f"--as-of: not a timestamp: {as_of!r} (e.g. 2024-06-01T12:00:00Z)"
            ) from None
        return cls(as_of=when if when.tzinfo else when.replace(tzinfo=dt.UTC))

    def open(self, name: str, path: Path) -> DeltaTable:
        """The Delta table at this snapshot; a version it does not have is a user error."""
        try:
            table = DeltaTable(str(path), version=self.version)
            if self.as_of is not None:
                table.load_as_version(self.as_of)
        except Exception as err:  # delta-rs raises several types for a missing version
            wanted = f"--version {self.version}" if self.as_of is None else "--as-of"
            raise UserError(f"query: table '{name}' at {wanted}: {first_line(err)}") from None
        return table


LATEST = Snapshot()


def lake_tables(lake: Path) -> dict[str, Path]:
    """The Delta tables directly under the lake folder, by name."""
    if not lake.is_dir():
        raise UserError(f"--lake: no lake at {lake}")
    return {p.name: p for p in sorted(lake.iterdir()) if (p / "_delta_log").is_dir()}


def parse_query(sql: str) -> exp.Query:
    """The one read-only query in `sql` (Spark SQL), calling only allowed functions; anything
    else is a user error."""
    sqlglot_log = logging.getLogger("sqlglot")
    level = sqlglot_log.level
    # sqlglot warns on stderr when it falls back to a Command (EXECUTE IMMEDIATE ...): the
    # refusal below is the one line the user sees.
    sqlglot_log.setLevel(logging.ERROR)
    try:
        trees = [t for t in sqlglot.parse(sql, read=SparkStreaming) if t is not None]
    except sqlglot.errors.SqlglotError as err:
        raise UserError(f"query: {first_line(err)}") from None
    finally:
        sqlglot_log.setLevel(level)
    if len(trees) != 1:
        raise UserError(f"query: one statement at a time; {READ_ONLY}")
    tree = trees[0]
    if not isinstance(tree, exp.Query) or tree.find(exp.DDL, exp.DML, exp.Command, exp.Set):
        raise UserError(f"query: {READ_ONLY}")
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier) or table.args.get("db"):
            raise UserError(
                f"query: FROM {table.this.sql(dialect='spark')}: only the lake's tables can be "
                "read (no table functions)"
            )
    check_calls(sql)  # only functions on the allow-list (engine/query/functions.txt)
    return tree


def referenced_tables(tree: exp.Query) -> list[str]:
    """The table names a query reads, without its CTEs and the names in hints."""
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return sorted(
        {
            t.name
            for t in tree.find_all(exp.Table)
            if t.name not in ctes and not t.find_ancestor(exp.Hint)
        }
    )


def read_tables(tree: exp.Query, lake: Path, snapshot: Snapshot = LATEST) -> dict[str, pa.Table]:
    """The tables a query names, read with delta-rs as Arrow; an unknown name is a user error.

    Text that is not valid UTF-8 arrives with its bad bytes as `\\xNN` escapes
    (engine/lake/values.py): DuckDB's string functions fail on such bytes, and this is how every
    engine prints them anyway.
    """
    tables = lake_tables(lake)
    read: dict[str, pa.Table] = {}
    for name in referenced_tables(tree):
        if name not in tables:
            known = ", ".join(tables) or "none"
            raise UserError(f"query: unknown table '{name}' in {lake} (tables: {known})")
        read[name] = repair_text(snapshot.open(name, tables[name]).to_pyarrow_table())
    return read


def _spark_tables(
    spark: SparkSession, tree: exp.Query, lake: Path, snapshot: Snapshot
) -> dict[str, Any]:
    """The tables a query names as Spark DataFrames: read by Spark's own Delta reader where
    the session has it, else from delta-rs snapshots."""
    from engine.runtime.session import has_delta

    if not has_delta(spark):
        return {n: spark.createDataFrame(d) for n, d in read_tables(tree, lake, snapshot).items()}
    tables = lake_tables(lake)
    frames = {}
    for name in referenced_tables(tree):
        if name not in tables:
            known = ", ".join(tables) or "none"
            raise UserError(f"query: unknown table '{name}' in {lake} (tables: {known})")
        reader = spark.read.format("delta")
        if snapshot.version is not None:
            reader = reader.option("versionAsOf", snapshot.version)
        if snapshot.as_of is not None:
            # The version current then, as delta-rs picks it (Spark's timestampAsOf refuses a
            # time after the last commit).
            version = snapshot.open(name, tables[name]).version()
            reader = reader.option("versionAsOf", version)
        frames[name] = reader.load(str(tables[name]))
    return frames


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
        return spark.sql(sql).toArrow()
    except PySparkException as err:
        raise UserError(f"query: {spark_error_line(err)}") from None
    finally:
        spark.conf.set(SUBSTITUTE, before)


def _plain(value: Any) -> Any:
    # Both engines print alike: times in UTC, integral decimals (DuckDB's HUGEINT sums) as
    # integers, other decimals as numbers; NaN and ±Infinity as text, bytes as base64
    # (engine/lake/values.py).
    if isinstance(value, float | bytes):
        return json_safe(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    plain = _plain(value)
    return json.dumps(plain, allow_nan=False) if isinstance(plain, dict | list) else str(plain)


def _values(column: pa.ChunkedArray) -> list[Any]:
    try:
        return column.to_pylist()
    except (OverflowError, ValueError):
        # A date or time past Python's year 9999 (Spark and DuckDB go further): Arrow's text.
        text = replace_leaves(
            column.type, lambda t: pa.string() if pa.types.is_temporal(t) else None
        )
        return column.cast(text or column.type).to_pylist()


def _rows(result: pa.Table) -> list[list[Any]]:
    """The result's rows as lists of Python values, whatever they hold (engine/lake/values.py)."""
    columns = [_values(c) for c in repair_text(result).columns]
    return [list(r) for r in zip(*columns, strict=True)] if columns else []


def _print_table(names: Sequence[str], rows: list[list[Any]], out: TextIO) -> None:
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out.write(line + "\n")
    out.write("| " + " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)) + " |\n")
    out.write(line + "\n")
    for c in cells:
        out.write("| " + " | ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)) + " |\n")
    out.write(line + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def print_rows(result: pa.Table, fmt: OutputFormat, out: TextIO = sys.stdout) -> None:
    """Print a result as a text table, one JSON array of row objects, or CSV.

    Any stored value prints: text that is not UTF-8 with `\\xNN` escapes, NaN and ±Infinity
    as "NaN", "Infinity", "-Infinity" (so the JSON is always JSON), bytes as base64.
    """
    names = result.column_names
    rows = _rows(result)
    if fmt == "json":
        objects = [_plain(dict(zip(names, r, strict=True))) for r in rows]
        json.dump(objects, out, allow_nan=False)
        out.write("\n")
    elif fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(names)
        writer.writerows([_cell(v) if v is not None else "" for v in r] for r in rows)
    else:
        _print_table(names, rows, out)
