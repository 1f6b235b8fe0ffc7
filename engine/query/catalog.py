"""`query`'s statements about the lake rather than its rows, answered from the Delta logs
(delta-rs) in Spark's form on either engine: `SHOW TABLES [LIKE 'pattern']`, `SHOW COLUMNS
FROM table` and `DESCRIBE [TABLE] table`, at the snapshot asked for."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import sqlglot
from sqlglot import exp

from engine.errors import UserError
from engine.lake import LATEST, Snapshot, lake_tables, table_path
from engine.plan.table_changes import delta_type_name
from engine.query.dialect import SparkQuery

__all__ = ["catalog_answer"]

# sqlglot reads SHOW as an opaque command, so its two forms are matched here.
_SHOW_TABLES = re.compile(r"\s*SHOW\s+TABLES(?:\s+LIKE\s+'(?P<like>[^']*)')?\s*;?\s*", re.I)
_SHOW_COLUMNS = re.compile(
    r"\s*SHOW\s+COLUMNS\s+(?:FROM|IN)\s+(?P<table>\w+|`[^`]+`)\s*;?\s*", re.I
)
_DESCRIBE = re.compile(r"\s*DESC(?:RIBE)?\s", re.I)


def catalog_answer(sql: str, lake: Path, snapshot: Snapshot = LATEST) -> pa.Table | None:
    """The answer to a SHOW TABLES, SHOW COLUMNS or DESCRIBE statement over the lake; None
    when `sql` is none of them (a query, or anything `parse_query` refuses)."""
    if shown := _SHOW_TABLES.fullmatch(sql):
        names = list(lake_tables(lake))
        if shown["like"] is not None:
            like = _like(shown["like"])
            names = [n for n in names if like.fullmatch(n)]
        return pa.table({"tableName": pa.array(names, pa.string())})
    if shown := _SHOW_COLUMNS.fullmatch(sql):
        name = shown["table"].strip("`")
        columns = [f["name"] for f in _schema(name, lake, snapshot)[0]]
        return pa.table({"col_name": pa.array(columns, pa.string())})
    if _DESCRIBE.match(sql):
        return _describe(sql, lake, snapshot)
    return None


def _like(pattern: str) -> re.Pattern[str]:
    """Spark's SHOW TABLES pattern: a regular expression in which `*` is any text and `|`
    separates alternatives, matched whole and in any case."""
    alternatives = (a.replace("*", ".*") for a in pattern.strip().split("|"))
    try:
        return re.compile("|".join(f"(?:{a})" for a in alternatives), re.I)
    except re.error as err:
        raise UserError(f"query: SHOW TABLES LIKE '{pattern}': {err}") from None


def _describe(sql: str, lake: Path, snapshot: Snapshot) -> pa.Table | None:
    try:
        tree = sqlglot.parse_one(sql, read=SparkQuery)
    except sqlglot.errors.SqlglotError:
        return None  # parse_query reports it
    if not isinstance(tree, exp.Describe) or not isinstance(tree.this, exp.Table):
        return None
    name = tree.this.name
    style = str(tree.args.get("style") or "").upper()  # EXTENDED, FORMATTED, HISTORY
    if style:
        words = f"DESCRIBE {style} {name}"
        if style == "HISTORY":
            raise UserError(f"query: {words}: a table's commits are `runner.py history {name}`")
        raise UserError(f"query: {words}: not answered here; DESCRIBE {name} gives its columns")
    fields, partitions = _schema(name, lake, snapshot)
    rows = [(f["name"], delta_type_name(f["type"]), f["metadata"].get("comment")) for f in fields]
    if partitions:
        typed = {name: kind for name, kind, _ in rows}
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        rows += [(p, typed[p], None) for p in partitions]
    names, types, comments = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "col_name": pa.array(names, pa.string()),
            "data_type": pa.array(types, pa.string()),
            "comment": pa.array(comments, pa.string()),
        }
    )


def _schema(name: str, lake: Path, snapshot: Snapshot) -> tuple[list[dict], list[str]]:
    """The table's fields as its Delta log has them at the snapshot, and its partition columns."""
    table = snapshot.open(name, table_path(lake, name))
    return json.loads(table.schema().to_json())["fields"], table.metadata().partition_columns
