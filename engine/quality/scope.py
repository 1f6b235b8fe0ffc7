"""Which rows a validation reads: the whole table, or (`--since-last`) the rows appended since
the version that last passed."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pds
from deltalake import DeltaTable

from engine.definitions.tables import TableDef
from engine.lake import dataset, read_arrow, scanner
from engine.lake.guard import open_table

__all__ = ["read_scope"]


def rows_since(path: Path, version: int) -> pa.Table:
    """Rows of the data files added after `version` (an appended table only adds files)."""
    current = dataset(DeltaTable(str(path)))
    old = {f.path for f in dataset(DeltaTable(str(path), version=version)).get_fragments()}
    new = [f for f in current.get_fragments() if f.path not in old]
    return scanner(
        pds.FileSystemDataset(new, current.schema, current.format, current.filesystem)
    ).to_table()


def first_rewrite(path: Path, since: int, version: int) -> int | None:
    """The first version after `since` (up to `version`) that removed data files: a rewrite
    (an overwrite, such as the one that widens a column's type, a delete, a compaction), after
    which the files added since `since` hold old rows too. A commit whose log file is gone
    (cleaned up after a checkpoint) cannot be told apart, so it counts as one."""
    log = path / "_delta_log"
    for v in range(since + 1, version + 1):
        try:
            lines = (log / f"{v:020d}.json").read_text().splitlines()
        except FileNotFoundError:
            return v
        if any("remove" in json.loads(line) for line in lines if line.strip()):
            return v
    return None


def read_scope(table: TableDef, path: Path, since: int | None) -> tuple[int, str, pa.Table]:
    """The table's current version, which rows are read (as the report says it) and the rows:
    those appended since version `since` where that is sound, else the whole table."""
    delta = open_table(table.name, path)
    version = delta.version()
    if since is None or since > version:  # never validated, or the table was recreated
        return version, "whole table", read_arrow(delta)
    if table.mode != "append":
        # A merge rewrites rows in place: the only sound check of a key is the whole table.
        return version, "whole table (merged)", read_arrow(delta)
    if since == version:
        return version, f"no rows added since version {since}", table.arrow_schema.empty_table()
    rewrite = first_rewrite(path, since, version)
    if rewrite is not None:
        # Delta counts every row of a rewritten file as added, so the rows appended since
        # `since` are not known apart from the old ones: the whole table is the sound check.
        scope = f"whole table (version {rewrite} rewrote its files after version {since})"
        return version, scope, read_arrow(delta)
    return version, f"rows added since version {since}", rows_since(path, since)
