"""What each batch of a run did, in a file per batch beside its query's checkpoint.

The query's writer (engine/sinks/writer.py) runs where Spark calls `foreachBatch`: in the run's
process on a local or standalone master, but in a Python process beside the server over Spark
Connect. So it keeps nothing the run reads in memory: it writes each batch's rows per table and
its expectation counts to `<checkpoint>/batch_records/<batch>.json`, before Spark commits the
batch, and the run reads them back for the event log and its report. A run starts by removing
the files of earlier runs; a batch run again after a failure writes its file again.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.lake.guard import write_json

__all__ = ["BatchRecord", "clear_records", "read_record", "run_records", "write_record"]

RECORDS_DIR = "batch_records"


@dataclass(frozen=True)
class BatchRecord:
    """One batch: rows per sink, and the counts of the views computed on the batch."""

    #: Rows the batch carried, per table or topic.
    rows: dict[str, int] = field(default_factory=dict)
    #: Rows committed per table or topic (0 where an earlier attempt had written the batch).
    written: dict[str, int] = field(default_factory=dict)
    #: Expectation counts of the views computed on the batch: view -> rule -> rows.
    checks: dict[str, dict[str, int]] = field(default_factory=dict)


def _file(checkpoint: Path, batch: int) -> Path:
    return checkpoint / RECORDS_DIR / f"{batch}.json"


def write_record(checkpoint: Path, batch: int, record: BatchRecord) -> None:
    """Keep what the batch did (whole or not at all)."""
    write_json(_file(checkpoint, batch), asdict(record))


def read_record(checkpoint: Path, batch: int) -> BatchRecord | None:
    """What the batch did; None for a batch this run's writer has not recorded."""
    try:
        return BatchRecord(**json.loads(_file(checkpoint, batch).read_text()))
    except FileNotFoundError:
        return None


def clear_records(checkpoint: Path) -> None:
    """Forget earlier runs' batches, before a run starts its query."""
    shutil.rmtree(checkpoint / RECORDS_DIR, ignore_errors=True)


def run_records(checkpoint: Path) -> tuple[Counter[str], Counter[str]]:
    """Rows carried and rows committed per table or topic, summed over the run's batches."""
    rows: Counter[str] = Counter()
    written: Counter[str] = Counter()
    for path in (checkpoint / RECORDS_DIR).glob("*.json"):
        if path.stem.isdigit():
            record = json.loads(path.read_text())
            rows.update(record["rows"])
            written.update(record["written"])
    return rows, written
