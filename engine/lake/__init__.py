"""The lake: a folder of Delta tables known by name, read at a snapshot with delta-rs."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from deltalake import DeltaTable

from engine.errors import UserError, first_line
from engine.lake.guard import open_table

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as pds

__all__ = [
    "LATEST",
    "Snapshot",
    "commit_time",
    "dataset",
    "lake_tables",
    "read_arrow",
    "scanner",
    "table_path",
]


def dataset(table: DeltaTable) -> pds.Dataset:
    """The data files of `table` as an Arrow dataset whose times read in microseconds, opened
    with Arrow's own file system."""
    import pyarrow.dataset as pds
    import pyarrow.fs as pafs

    # Spark writes TIMESTAMP columns as Parquet INT96, which Arrow reads as nanoseconds by
    # default: a time before 1677 or after 2262 (9999-12-31, 0001-01-01) overflows and the
    # whole scan fails. Delta's timestamps are microseconds, so that is the unit to read.
    options = pds.ParquetReadOptions(coerce_int96_timestamp_unit="us")
    # delta-rs's default opens each file through a Python object, and the last reference to it
    # can be dropped on one of Arrow's I/O threads after the scan returned: in a process that is
    # exiting, that thread then waits for the interpreter's lock and is ended mid-destructor
    # (abort, "terminate called without an active exception"; docs/decisions.md).
    files, root = pafs.FileSystem.from_uri(table.table_uri)
    return table.to_pyarrow_dataset(
        parquet_read_options=options, filesystem=pafs.SubTreeFileSystem(root, files)
    )


def scanner(rows: pds.Dataset) -> pds.Scanner:
    """A scan of `rows` (a Delta table's files, from delta-rs) that reads on the calling thread."""
    # No worker threads and no read-ahead: a process that exits while Arrow's pools still wind
    # down after a scan can abort ("terminate called without an active exception", exit 134;
    # docs/decisions.md). Imported here: pyarrow.dataset loads pandas, which planning does without.
    import pyarrow.dataset as pds

    return rows.scanner(
        use_threads=False, fragment_scan_options=pds.ParquetFragmentScanOptions(pre_buffer=False)
    )


def read_arrow(table: DeltaTable) -> pa.Table:
    """Every row of `table`, at the version it was opened at, read by `scanner`."""
    return scanner(dataset(table)).to_table()


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
        """The Delta table at this snapshot; a version it does not have, or a time before its
        earliest version, is a user error."""
        if self.version is None and self.as_of is None:
            table = open_table(name, path)
        else:
            try:
                table = DeltaTable(str(path), version=self.version)
                if self.as_of is not None:
                    table.load_as_version(self.as_of)
            except Exception as err:  # delta-rs raises several types for a missing version
                raise UserError(self._missing(name, path, err)) from None
        # delta-rs gives the earliest version for a time before it; Delta's own time travel
        # refuses that time, and a table that did not exist then has no rows to show.
        committed = None if self.as_of is None else commit_time(path, table.version())
        if committed is not None and committed > self.as_of:
            raise UserError(
                f"query: table '{name}' did not exist yet at --as-of {_utc(self.as_of)}: its "
                f"earliest version ({table.version()}) is from {_utc(committed)}"
            )
        return table

    def _missing(self, name: str, path: Path, err: Exception) -> str:
        if self.as_of is None:
            try:
                versions = [commit["version"] for commit in DeltaTable(str(path)).history()]
            except Exception:  # the table does not open at all: delta-rs's own error says why
                versions = []
            if versions:
                return (
                    f"query: table '{name}' has versions {min(versions)} to {max(versions)}, "
                    f"not --version {self.version}"
                )
        wanted = f"--version {self.version}" if self.as_of is None else "--as-of"
        return f"query: table '{name}' at {wanted}: {first_line(err)}"


LATEST = Snapshot()


def _utc(when: dt.datetime) -> str:
    return f"{when.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S.%f}"[:-3] + " UTC"


def commit_time(table: Path, version: int) -> dt.datetime | None:
    """When `version` of the table at `table` was committed, as time travel compares it: its
    commit file's modification time, in milliseconds; None when the file was cleaned up."""
    log_file = table / "_delta_log" / f"{version:020d}.json"
    try:
        return dt.datetime.fromtimestamp(int(log_file.stat().st_mtime * 1000) / 1000, tz=dt.UTC)
    except FileNotFoundError:  # a log cleaned up after a Delta checkpoint
        return None


def lake_tables(lake: Path) -> dict[str, Path]:
    """The Delta tables directly under the lake folder, by name."""
    if not lake.is_dir():
        raise UserError(f"--lake: no lake at {lake}")
    return {p.name: p for p in sorted(lake.iterdir()) if (p / "_delta_log").is_dir()}


def table_path(lake: Path, name: str) -> Path:
    """The folder of the lake's table `name`, in any case as in Spark (`Events` is `events`);
    an unknown name is a user error listing the tables there."""
    tables = lake_tables(lake)
    if name in tables:
        return tables[name]
    same = [path for table, path in tables.items() if table.lower() == name.lower()]
    if len(same) == 1:
        return same[0]
    known = ", ".join(tables) or "none"
    raise UserError(f"query: unknown table '{name}' in {lake} (tables: {known})")
