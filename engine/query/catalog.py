"""`query`'s statements about the lake rather than its rows, answered from the Delta logs
(delta-rs) in Spark's form on either engine: `SHOW TABLES [LIKE 'pattern']`, `SHOW COLUMNS
FROM table`, `SHOW TBLPROPERTIES table [('key')]`, `DESCRIBE [TABLE] table [column]` and
Delta's `DESCRIBE DETAIL table`, at the snapshot asked for; the forms Spark has and this does
not answer are refused in one line saying what to use."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from engine.errors import UserError
from engine.lake import LATEST, Snapshot, commit_time, lake_tables, table_path
from engine.plan.table_changes import delta_type_name
from engine.query.dialect import decommented

__all__ = ["catalog_answer"]

# sqlglot reads SHOW and most DESCRIBE forms as opaque commands, so they are matched here. A
# name may have parts (`db.t`): it names no table of the lake, which the error then lists.
_NAME = r"(?:\w+|`[^`]+`)(?:\s*\.\s*(?:\w+|`[^`]+`))*"
_TABLE = rf"(?P<table>{_NAME})"
_END = r"\s*;?\s*"
_SHOW_TABLES = re.compile(rf"\s*SHOW\s+TABLES(?:\s+LIKE\s+'(?P<like>[^']*)')?{_END}", re.I)
_SHOW_COLUMNS = re.compile(rf"\s*SHOW\s+COLUMNS\s+(?:FROM|IN)\s+{_TABLE}{_END}", re.I)
_SHOW_PROPERTIES = re.compile(
    rf"\s*SHOW\s+TBLPROPERTIES\s+{_TABLE}(?:\s*\(\s*'(?P<key>[^']*)'\s*\))?{_END}", re.I
)
_SHOW_CREATE = re.compile(rf"\s*SHOW\s+CREATE\s+TABLE\s+{_TABLE}.*", re.I | re.S)
_SHOW_PARTITIONS = re.compile(rf"\s*SHOW\s+PARTITIONS\s+{_TABLE}.*", re.I | re.S)
_DESCRIBE_DETAIL = re.compile(rf"\s*DESC(?:RIBE)?\s+DETAIL\s+{_TABLE}{_END}", re.I)
_DESCRIBE_HISTORY = re.compile(
    rf"\s*DESC(?:RIBE)?\s+HISTORY\s+{_TABLE}\b(?:\s+LIMIT\s+(?P<limit>\d+)\b)?.*", re.I | re.S
)
# DESCRIBE of anything but a table; a query (DESCRIBE [QUERY] SELECT ...) is among them.
_DESCRIBE_OTHER = re.compile(
    r"\s*DESC(?:RIBE)?\s+(?P<what>FUNCTION|DATABASE|SCHEMA|NAMESPACE|CATALOG|QUERY|SELECT|WITH|"
    r"VALUES|FROM|TABLE\s*\()\b.*",
    re.I | re.S,
)
# Spark's DESC[RIBE] [TABLE] [EXTENDED | FORMATTED] table [PARTITION (...)] [column].
_DESCRIBE = re.compile(
    rf"\s*DESC(?:RIBE)?\s+(?:TABLE\s+)?(?:(?P<style>EXTENDED|FORMATTED)\s+)?{_TABLE}"
    rf"(?P<partition>\s+PARTITION\s*\([^)]*\))?(?:\s+(?P<column>{_NAME}))?{_END}",
    re.I,
)

# The features a table has by its protocol versions alone (Delta's legacy protocol), each with
# the reader and writer versions that bring it; a version 3 reader or 7 writer lists its own.
_LEGACY_FEATURES = {
    "appendOnly": (1, 2),
    "invariants": (1, 2),
    "checkConstraints": (1, 3),
    "changeDataFeed": (1, 4),
    "generatedColumns": (1, 4),
    "columnMapping": (2, 5),
    "identityColumns": (1, 6),
}


def catalog_answer(sql: str, lake: Path, snapshot: Snapshot = LATEST) -> pa.Table | None:
    """The answer to a SHOW (TABLES, COLUMNS, TBLPROPERTIES) or DESCRIBE statement over the
    lake; None when `sql` is none of them (a query, or anything `parse_query` refuses)."""
    sql = decommented(sql)  # `SHOW TABLES -- why` is SHOW TABLES
    if shown := _SHOW_TABLES.fullmatch(sql):
        names = [n for n, path in lake_tables(lake).items() if _exists_at(snapshot, n, path)]
        if shown["like"] is not None:
            like = _like(shown["like"])
            names = [n for n in names if like.fullmatch(n)]
        return pa.table({"tableName": pa.array(names, pa.string())})
    if shown := _SHOW_COLUMNS.fullmatch(sql):
        columns = [f["name"] for f in _schema(_table(shown), lake, snapshot)[0]]
        return pa.table({"col_name": pa.array(columns, pa.string())})
    if shown := _SHOW_PROPERTIES.fullmatch(sql):
        return _properties(_table(shown), shown["key"], lake, snapshot)
    if shown := _SHOW_CREATE.fullmatch(sql):
        name = _table(shown)
        raise UserError(
            f"query: SHOW CREATE TABLE {name}: Spark does not answer it for a Delta table; the "
            f"table's DDL is tables/{name}.sql, DESCRIBE {name} gives its columns"
        )
    if shown := _SHOW_PARTITIONS.fullmatch(sql):
        name = _table(shown)
        raise UserError(
            f"query: SHOW PARTITIONS {name}: a Delta table has no partition management (as in "
            f"Spark); SELECT DISTINCT its partition columns (DESCRIBE DETAIL {name} names them)"
        )
    if shown := _DESCRIBE_DETAIL.fullmatch(sql):
        return _detail(_table(shown), lake, snapshot)
    if shown := _DESCRIBE_HISTORY.fullmatch(sql):
        name = _table(shown)
        last = f" --last {shown['limit']}" if shown["limit"] else ""
        raise UserError(
            f"query: DESCRIBE HISTORY {name}: a table's commits are "
            f"`runner.py history {name}{last}`"
        )
    if shown := _DESCRIBE_OTHER.fullmatch(sql):
        what = " ".join(shown["what"].upper().split()).rstrip("(").strip()
        raise UserError(
            f"query: DESCRIBE {what}: not answered here; DESCRIBE <table> gives a table's columns"
        )
    if shown := _DESCRIBE.fullmatch(sql):
        return _describe(shown, lake, snapshot)
    return None


def _exists_at(snapshot: Snapshot, name: str, path: Path) -> bool:
    """Whether the table can be read at `snapshot`: SHOW TABLES at a version or a time lists
    only the tables a query there can read."""
    if snapshot == LATEST:
        return True  # a table whose log does not read is still listed, and named when queried
    try:
        snapshot.open(name, path)
    except UserError:
        return False
    return True


def _table(shown: re.Match[str]) -> str:
    """The table name a statement gave, without its backticks."""
    return re.sub(r"\s*\.\s*", ".", shown["table"].replace("`", ""))


def _like(pattern: str) -> re.Pattern[str]:
    """Spark's SHOW TABLES pattern: a regular expression in which `*` is any text and `|`
    separates alternatives, matched whole and in any case."""
    alternatives = (a.replace("*", ".*") for a in pattern.strip().split("|"))
    try:
        return re.compile("|".join(f"(?:{a})" for a in alternatives), re.I)
    except re.error as err:
        raise UserError(f"query: SHOW TABLES LIKE '{pattern}': {err}") from None


def _describe(shown: re.Match[str], lake: Path, snapshot: Snapshot) -> pa.Table:
    """Spark's DESCRIBE of a Delta table: its columns then its partition columns, or one
    column's name, type and comment."""
    name = _table(shown)
    if shown["partition"]:
        raise UserError(
            f"query: DESCRIBE {name} PARTITION: a Delta table has no partition management (as "
            f"in Spark); DESCRIBE DETAIL {name} gives its partition columns"
        )
    if shown["column"]:
        return _describe_column(name, shown["column"].replace("`", ""), lake, snapshot)
    if shown["style"]:
        style = shown["style"].upper()
        raise UserError(
            f"query: DESCRIBE {style} {name}: not answered here; DESCRIBE {name} gives its "
            f"columns, DESCRIBE DETAIL {name} its files and settings"
        )
    fields, partitions = _schema(name, lake, snapshot)
    rows = [(f["name"], delta_type_name(f["type"]), f["metadata"].get("comment")) for f in fields]
    if partitions:
        by_name = {row[0]: row for row in rows}
        rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
        rows += [by_name[p] for p in partitions]
    names, types, comments = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "col_name": pa.array(names, pa.string()),
            "data_type": pa.array(types, pa.string()),
            "comment": pa.array(comments, pa.string()),
        }
    )


def _properties(name: str, key: str | None, lake: Path, snapshot: Snapshot) -> pa.Table:
    """Spark's SHOW TBLPROPERTIES of a Delta table: its protocol versions and its settings,
    sorted by key; one key asked for that it lacks is a row saying so, as Spark's."""
    path = table_path(lake, name)
    table = snapshot.open(name, path)
    protocol = table.protocol()
    clustering = _clustering(path, table)
    pairs = {
        "delta.minReaderVersion": str(protocol.min_reader_version),
        "delta.minWriterVersion": str(protocol.min_writer_version),
        **{f"delta.feature.{f}": "supported" for f in _explicit_features(table)},
        **table.metadata().configuration,
    }
    if clustering:
        pairs["clusteringColumns"] = json.dumps(clustering, separators=(",", ":"))
    if key is not None:
        pairs = {key: pairs.get(key, f"Table {name} does not have property: {key}")}
    keys = sorted(pairs)
    return pa.table(
        {
            "key": pa.array(keys, pa.string()),
            "value": pa.array([pairs[k] for k in keys], pa.string()),
        }
    )


def _detail(name: str, lake: Path, snapshot: Snapshot) -> pa.Table:
    """Delta's DESCRIBE DETAIL: one row on the table's files, size, settings and protocol."""
    path = table_path(lake, name)
    table = snapshot.open(name, path)
    metadata, protocol = table.metadata(), table.protocol()
    files = pa.table(table.get_add_actions(flatten=True))
    clustering = _clustering(path, table)
    millis = metadata.created_time  # a log may leave it out
    created = None if millis is None else dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    row = {
        "format": ("delta", pa.string()),
        "id": (metadata.id, pa.string()),
        "name": (metadata.name, pa.string()),
        "description": (metadata.description, pa.string()),
        "location": (path.resolve().as_uri().replace("file:///", "file:/"), pa.string()),
        "createdAt": (created, pa.timestamp("us", tz="UTC")),
        "lastModified": (commit_time(path, table.version()), pa.timestamp("us", tz="UTC")),
        "partitionColumns": (metadata.partition_columns, pa.list_(pa.string())),
        "clusteringColumns": (
            None if clustering is None else [".".join(c) for c in clustering],
            pa.list_(pa.string()),
        ),
        "numFiles": (files.num_rows, pa.int64()),
        "sizeInBytes": (pc.sum(files["size_bytes"]).as_py() or 0, pa.int64()),
        "properties": (list(metadata.configuration.items()), pa.map_(pa.string(), pa.string())),
        "minReaderVersion": (protocol.min_reader_version, pa.int32()),
        "minWriterVersion": (protocol.min_writer_version, pa.int32()),
        "tableFeatures": (_features(table), pa.list_(pa.string())),
    }
    return pa.table({column: pa.array([value], kind) for column, (value, kind) in row.items()})


def _clustering(path: Path, table: DeltaTable) -> list[list[str]] | None:
    """A clustered table's columns (each a path of field names), from the last
    `delta.clustering` domain of its commits, which delta-rs does not read; None when the
    commits that would hold it were cleaned up. The lake's own tables are never clustered
    (engine/definitions/tables.py)."""
    columns: list[list[str]] = []
    if "clustering" not in _features(table):
        return columns
    for version in range(table.version() + 1):
        try:
            lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
        except FileNotFoundError:
            return None
        for action in map(json.loads, filter(None, lines)):
            domain = action.get("domainMetadata") or {}
            if domain.get("domain") == "delta.clustering":
                named = json.loads(domain["configuration"])["clusteringColumns"]
                columns = [] if domain.get("removed") else named
    return columns


def _explicit_features(table: DeltaTable) -> list[str]:
    protocol = table.protocol()
    return sorted({*(protocol.reader_features or ()), *(protocol.writer_features or ())})


def _features(table: DeltaTable) -> list[str]:
    """The table's features, as Delta names them: listed by a table-features protocol, or
    implied by the versions of a legacy one."""
    protocol = table.protocol()
    if protocol.min_writer_version >= 7:
        return _explicit_features(table)
    return sorted(
        feature
        for feature, (reader, writer) in _LEGACY_FEATURES.items()
        if protocol.min_reader_version >= reader and protocol.min_writer_version >= writer
    )


def _describe_column(name: str, column: str, lake: Path, snapshot: Snapshot) -> pa.Table:
    """Spark's DESCRIBE table column: the column's name as written, type and comment (text
    'NULL' without one), as rows of info_name and info_value; a column of a struct is refused."""
    if "." in column:
        raise UserError(f"query: DESCRIBE {name} {column}: a nested column is not described")
    fields = _schema(name, lake, snapshot)[0]
    field = next((f for f in fields if f["name"].lower() == column.lower()), None)
    if field is None:
        names = ", ".join(f["name"] for f in fields)
        raise UserError(f"query: DESCRIBE {name}: no column '{column}' (columns: {names})")
    values = [column, delta_type_name(field["type"]), field["metadata"].get("comment", "NULL")]
    return pa.table(
        {
            "info_name": pa.array(["col_name", "data_type", "comment"], pa.string()),
            "info_value": pa.array(values, pa.string()),
        }
    )


def _schema(name: str, lake: Path, snapshot: Snapshot) -> tuple[list[dict], list[str]]:
    """The table's fields as its Delta log has them at the snapshot, and its partition columns."""
    table = snapshot.open(name, table_path(lake, name))
    return json.loads(table.schema().to_json())["fields"], table.metadata().partition_columns
