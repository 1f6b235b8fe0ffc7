"""Whether a Delta stream's checkpoint can go on, read from the table's log and the
checkpoint's last offset (engine/lake/delta_source.py), without Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from engine.lake.delta_source import rewritten_version


def offset(checkpoint: Path, batch: int, version: int, index: int) -> None:
    """The offsets file Spark writes for a batch of one Delta source."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    source = {"sourceVersion": 1, "reservoirId": "x", "reservoirVersion": version,
              "index": index, "isStartingVersion": False}  # fmt: skip
    lines = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps(source)]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines))


def test_the_first_version_still_to_read_that_removed_rows(tmp_path: Path) -> None:
    table, checkpoint = tmp_path / "purchases", tmp_path / "checkpoint"
    write_deltalake(table, pa.table({"q": [1, 2, 3]}))  # version 0
    write_deltalake(table, pa.table({"q": [4]}), mode="append")  # version 1
    offset(checkpoint, 0, version=2, index=-1)  # everything read, version 2 next
    assert rewritten_version(table, checkpoint, 0) is None
    write_deltalake(table, pa.table({"q": [5]}), mode="append")  # version 2: appends only
    DeltaTable(table).delete("q > 3")  # version 3
    assert rewritten_version(table, checkpoint, 0) == 3
    # Version 3 read up to a file of it: the stream goes on after it.
    offset(checkpoint, 1, version=3, index=0)
    assert rewritten_version(table, checkpoint, 1) is None
    write_deltalake(table, pa.table({"q": [9]}), mode="overwrite")  # version 4: a rebuild
    assert rewritten_version(table, checkpoint, 1) == 4
    # No offsets of that batch, or not a Delta source's: nothing to say.
    assert rewritten_version(table, checkpoint, 7) is None
    (checkpoint / "offsets" / "8").write_text('v1\n{}\n{"logOffset":0}')
    assert rewritten_version(table, checkpoint, 8) is None
