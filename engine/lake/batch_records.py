"""What each batch of a run did, in a file per batch beside its query's checkpoint.

The query's writer (engine/sinks/writer.py) runs where Spark calls `foreachBatch`: in the run's
process on a local or standalone master, but in a Python process beside the server over Spark
Connect. So it keeps nothing the run reads in memory: it writes each batch's rows per table and
its expectation counts to `<checkpoint>/batch_records/<batch>.json`, before Spark commits the
batch. The run takes them as it logs each batch (`RunRecords`): it adds them to its sums and
removes the file, so a run of weeks leaves no file per batch behind. A run starts by removing
the files of earlier runs; a batch run again after a failure adds to its file.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.lake.guard import write_json

__all__ = [
    "BatchRecord",
    "RunRecords",
    "clear_records",
    "read_record",
    "run_records",
    "write_record",
]

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
    """Rows carried and rows committed per table or topic, summed over the batch files."""
    rows: Counter[str] = Counter()
    written: Counter[str] = Counter()
    for path in (checkpoint / RECORDS_DIR).glob("*.json"):
        if path.stem.isdigit():
            record = json.loads(path.read_text())
            rows.update(record["rows"])
            written.update(record["written"])
    return rows, written


class RunRecords:
    """The batch records of one run: taken batch by batch as the run logs them, and summed."""

    def __init__(self) -> None:
        self._rows: dict[Path, Counter[str]] = {}
        self._written: dict[Path, Counter[str]] = {}
        self._lock = threading.Lock()

    def take(self, checkpoint: Path, batch: int) -> BatchRecord | None:
        """The batch's record, added to the run's sums; its file is removed."""
        with self._lock:
            record = read_record(checkpoint, batch)
            if record is None:
                return None
            self._rows.setdefault(checkpoint, Counter()).update(record.rows)
            self._written.setdefault(checkpoint, Counter()).update(record.written)
            _file(checkpoint, batch).unlink()
            return record

    def totals(self, checkpoint: Path) -> tuple[Counter[str], Counter[str]]:
        """Rows carried and committed per table or topic in the run: the records taken, and
        those of batches not logged (a stop between Spark's commit and the batch's event)."""
        with self._lock:
            rows, written = run_records(checkpoint)
            rows.update(self._rows.get(checkpoint, Counter()))
            written.update(self._written.get(checkpoint, Counter()))
            return rows, written
