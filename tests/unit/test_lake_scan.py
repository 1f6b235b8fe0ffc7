"""Reading a Delta table with delta-rs and Arrow, in a process that exits right after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable, write_deltalake

from engine.lake import dataset, read_arrow

PROJECT = Path(__file__).resolve().parents[2]

# What a short command does: read a table, print, exit. With Arrow's threaded scan such a
# process aborted at exit in 36 and 39 of 100 runs here (exit 134, "terminate called without
# an active exception"); the scanner reads on the calling thread. On a busy machine it still did,
# about once in 100, until the files were opened by Arrow rather than through Python objects.
READ_AND_EXIT = """
import sys
from deltalake import DeltaTable
from engine.lake import read_arrow
print(read_arrow(DeltaTable(sys.argv[1])).num_rows)
"""


def _table(path: Path) -> Path:
    rows = pa.table({"id": list(range(1_000)), "name": [f"n{i}" for i in range(1_000)]})
    for part in range(4):
        write_deltalake(str(path), rows.slice(part * 250, 250), mode="append")
    return path


def test_read_arrow_reads_every_row(tmp_path):
    path = _table(tmp_path / "t")
    table = read_arrow(DeltaTable(str(path)))
    assert sorted(table.column("id").to_pylist()) == list(range(1_000))


def test_tables_are_read_through_the_scanner_only():
    """delta-rs's own readers scan with Arrow's threads (see READ_AND_EXIT)."""
    found = [
        f"{path.relative_to(PROJECT)}:{n}"
        for folder in ("engine", "devtools", "bench", "tests")
        for path in sorted((PROJECT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "to_pyarrow_table(" in line and path != Path(__file__).resolve()
    ]
    assert found == []


def test_files_are_opened_by_arrow_not_through_python(tmp_path):
    """A Python file object dropped on an Arrow thread at exit aborts the process."""
    rows = dataset(DeltaTable(str(_table(tmp_path / "t"))))
    assert not isinstance(rows.filesystem, pafs.PyFileSystem)
    assert {type(f.filesystem) for f in rows.get_fragments()} == {pafs.SubTreeFileSystem}


def test_a_process_that_reads_a_table_and_exits_at_once_exits_cleanly(tmp_path):
    path = _table(tmp_path / "t")
    outcomes = [
        subprocess.run(
            [sys.executable, "-c", READ_AND_EXIT, str(path)],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        for _ in range(20)
    ]
    assert [(o.returncode, o.stdout.strip(), o.stderr) for o in outcomes] == [(0, "1000", "")] * 20
