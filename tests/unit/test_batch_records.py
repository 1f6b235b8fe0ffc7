"""The writer's per-batch records beside a checkpoint: taken by the run as batches are logged,
summed with the ones not logged, and gone from the folder once taken."""

from __future__ import annotations

from pathlib import Path

from engine.lake.batch_records import (
    BatchRecord,
    RunRecords,
    clear_records,
    read_record,
    write_record,
)


def test_a_run_sums_the_records_it_took_and_the_ones_left(tmp_path: Path):
    checkpoint = tmp_path / "main"
    checks = {"checked_lines": {"rows": 3}}
    write_record(checkpoint, 0, BatchRecord({"events": 3}, {"events": 3}, checks))
    write_record(checkpoint, 1, BatchRecord({"events": 2}, {"events": 0}))  # held: a replay
    records = RunRecords()
    assert records.take(checkpoint, 0) == BatchRecord({"events": 3}, {"events": 3}, checks)
    assert read_record(checkpoint, 0) is None  # taken: no file per batch piles up
    assert records.take(checkpoint, 7) is None  # a batch the writer did not record
    # Batch 1 was never logged (a stop between Spark's commit and its event): still counted.
    assert records.totals(checkpoint) == ({"events": 5}, {"events": 3})
    clear_records(checkpoint)
    assert records.totals(checkpoint) == ({"events": 3}, {"events": 3})
