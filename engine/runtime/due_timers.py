"""The batch that fires due timers, when a stop came between it and the batch that made them due.

Spark runs a batch without new input when the last batch moved the watermark (windows to
close, sessions to time out), but only within one run: it decides so from the last batch's
plan, which it keeps in memory. A run stopped right after such a batch (SIGTERM once the batch
under way has ended, or a kill) leaves the timers waiting, and after a restart Spark plans a
batch only for new input: a `--once` run that finds none ended with `0 batches` and the due
windows or sessions unwritten, against its contract (found 2026-11-26, sensor_cep: SIGTERM
during the first batch, then `--once`: `sensor_samples` stayed empty).

For `--once`, that batch is put in the query's offset log before the query starts: the last
batch's offsets again (nothing new to read) with the watermark the last batch's commit set for
the next. Spark replays a logged batch that has no commit as it does after a crash.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from engine.lake.guard import last_committed

__all__ = ["queue_due_timers"]

_VERSION = "v1"  # the offset and commit logs' format line, the only one Spark 4 writes


def queue_due_timers(checkpoint: Path) -> bool:
    """Log the no-data batch the last committed one called for; True if it was logged."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    last = last_committed(checkpoint)
    if last is None or not (offsets / str(last)).is_file() or (offsets / str(last + 1)).exists():
        return False  # a new checkpoint, or a planned batch Spark replays anyway
    commit = (commits / str(last)).read_text().splitlines()
    planned = (offsets / str(last)).read_text().splitlines()
    if commit[:1] != [_VERSION] or planned[:1] != [_VERSION] or min(len(commit), len(planned)) < 2:
        return False  # a format this does not know: leave it to Spark
    next_watermark = json.loads(commit[1]).get("nextBatchWatermarkMs", 0)
    metadata = json.loads(planned[1])
    if next_watermark <= metadata.get("batchWatermarkMs", 0):
        return False  # the watermark did not move: no timer became due
    metadata.update(batchWatermarkMs=next_watermark, batchTimestampMs=int(time.time() * 1000))
    staged = offsets / f".{last + 1}.staged"
    staged.write_text("\n".join([_VERSION, json.dumps(metadata), *planned[2:]]))
    os.replace(staged, offsets / str(last + 1))
    return True
