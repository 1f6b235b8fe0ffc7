"""Whether a Delta stream's checkpoint can go on: Delta's streaming source follows appends
only, and stops at a version that deleted or rewrote rows (the writing pipeline's
`--full-refresh`, a DELETE, a MERGE). Read from the table's log and the checkpoint's last
offset, without Spark, so `run --dry-run` says it as the run would."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["rewritten", "rewritten_version"]


def rewritten(table: Path | str, version: int) -> str:
    """The words for a stream that cannot follow `table` past `version`, and the way out."""
    return (
        f"delta source: the table {table} had rows deleted or rewritten in its version "
        f"{version} (its pipeline's --full-refresh, a DELETE or a MERGE), which a stream of its "
        "appends cannot follow: run again with --full-refresh to read it from its start, or set "
        "source.skipChangeCommits=true to skip such versions"
    )


def rewritten_version(table: Path, checkpoint: Path, batch: int) -> int | None:
    """The first version of `table` the checkpoint has still to read (after its committed
    `batch`) that removed rows, or None."""
    try:
        lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
        offset = json.loads(lines[2])  # after the format version and the batch's metadata
        first = int(offset["reservoirVersion"]) + (0 if offset.get("index", -1) == -1 else 1)
    except (OSError, IndexError, KeyError, TypeError, ValueError):
        return None  # not a Delta stream's offset: nothing to say
    log = table / "_delta_log"
    version = first
    while (commit := log / f"{version:020d}.json").is_file():
        for line in commit.read_text().splitlines():
            removed = json.loads(line).get("remove") if line.strip() else None
            if removed is not None and removed.get("dataChange", True):
                return version
        version += 1
    return None
