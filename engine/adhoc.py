"""`query`: ad-hoc, read-only Spark SQL over the lake's Delta tables, known by name."""

from __future__ import annotations

import csv
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

import pyarrow as pa
import sqlglot
from deltalake import DeltaTable
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from sqlglot import exp

from engine.build import spark_error_line
from engine.errors import UserError

__all__ = ["OutputFormat", "lake_tables", "print_rows", "run_query"]

OutputFormat = Literal["table", "json", "csv"]


def lake_tables(lake: Path) -> dict[str, Path]:
    """The Delta tables directly under the lake folder, by name."""
    if not lake.is_dir():
        raise UserError(f"--lake: no lake at {lake}")
    return {p.name: p for p in sorted(lake.iterdir()) if (p / "_delta_log").is_dir()}


def _referenced_tables(sql: str) -> list[str]:
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError as err:
        raise UserError(f"query: {str(err).splitlines()[0]}") from None
    if not isinstance(tree, exp.Query):
        raise UserError("query: only SELECT queries are allowed (query is read-only)")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return sorted({t.name for t in tree.find_all(exp.Table) if t.name not in ctes})


def run_query(spark: SparkSession, sql: str, lake: Path) -> pa.Table:
    """Register the tables the query names as views over their Delta snapshots and run it."""
    tables = lake_tables(lake)
    for name in _referenced_tables(sql):
        if name not in tables:
            known = ", ".join(tables) or "none"
            raise UserError(f"query: unknown table '{name}' in {lake} (tables: {known})")
        snapshot = DeltaTable(str(tables[name])).to_pyarrow_table()
        spark.createDataFrame(snapshot).createOrReplaceTempView(name)
    try:
        return spark.sql(sql).toArrow()
    except PySparkException as err:
        raise UserError(f"query: {spark_error_line(err)}") from None


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    plain = _plain(value)
    return json.dumps(plain) if isinstance(plain, dict | list) else str(plain)


def _print_table(names: Sequence[str], rows: list[dict[str, Any]], out: TextIO) -> None:
    cells = [[_cell(r[n]) for n in names] for r in rows]
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
    """Print a result as a text table, one JSON array of row objects, or CSV."""
    rows = result.to_pylist()
    if fmt == "json":
        json.dump([_plain(r) for r in rows], out)
        out.write("\n")
    elif fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(result.column_names)
        writer.writerows(
            [_cell(r[n]) if r[n] is not None else "" for n in result.column_names] for r in rows
        )
    else:
        _print_table(result.column_names, rows, out)
