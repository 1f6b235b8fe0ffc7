"""Before a query starts, its tables must agree with its checkpoint; a query that would lose
or double rows is refused in one line.

Two records make that checkable, both written by the query's writer (engine/sinks/writer.py):

* each table remembers which checkpoint writes it for each pipeline and query: a small file
  `<table>/_writers/<pipeline>.<query>.json` (Delta ignores folders starting with `_`), so a
  run pointed at another checkpoint (a typo in `--checkpoints`) does not append every input
  again;
* each checkpoint remembers the last batch that wrote rows to each table
  (`<checkpoint>/lake_batches.json`), so a table whose newest commits were lost or damaged is
  noticed instead of silently missing those rows.

Spark-free: the tables are read with delta-rs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from deltalake import DeltaTable

from engine.errors import UserError, first_line

__all__ = [
    "check_readable",
    "check_tables",
    "checkpoint_id",
    "claim_table",
    "last_committed",
    "open_table",
    "record_batch",
    "release_table",
    "write_json",
    "writer_id",
]

WRITERS_DIR = "_writers"
#: How a table whose log is damaged is rebuilt: --full-refresh cannot empty a log that does not
#: read, so the folder goes first and the rebuild creates the table anew.
_REBUILD_DAMAGED = "or move the table's folder away and rebuild it with --full-refresh"
BATCHES_FILE = "lake_batches.json"


def checkpoint_id(checkpoint: Path) -> str | None:
    """Spark's query id of a checkpoint (it never changes); None before its first start."""
    metadata = checkpoint / "metadata"
    if not metadata.is_file():
        return None
    return json.loads(metadata.read_text())["id"]


def writer_id(pipeline: str, query: str, checkpoint: Path) -> str:
    """The Delta transaction id of a query's writes: a new checkpoint is a new writer. Known
    once Spark started the query (its checkpoint has an id)."""
    found = checkpoint_id(checkpoint)
    if found is None:
        # An id made of "None" would be cached and differ from the next run's.
        raise RuntimeError(f"checkpoint {checkpoint} has no query id yet")
    return f"{pipeline}.{query}.{found}"


def last_committed(checkpoint: Path) -> int | None:
    """The newest batch Spark committed in the checkpoint; None before the first."""
    commits = checkpoint / "commits"
    done = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    return max(done, default=None)


def batch_time_ms(checkpoint: Path, batch_id: int) -> int | None:
    """The timestamp Spark gave a batch (its `current_timestamp()`), from the checkpoint's
    offset log, which Spark writes before it runs the batch; None when not there."""
    try:
        metadata = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()[1]
        return int(json.loads(metadata)["batchTimestampMs"])
    except (OSError, IndexError, ValueError, KeyError, TypeError):
        return None


def write_json(path: Path, data: object) -> None:
    """Write a JSON file whole or not at all."""
    # Write then rename: a crash leaves the old file or the new one, never half of one.
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)


def _owner_file(table: Path, pipeline: str, query: str) -> Path:
    return table / WRITERS_DIR / f"{pipeline}.{query}.json"


def claim_table(table: Path, *, pipeline: str, query: str, checkpoint: Path) -> None:
    """Record that this checkpoint writes the table for this pipeline and query."""
    owner = _owner_file(table, pipeline, query)
    wanted = {"checkpoint_id": checkpoint_id(checkpoint), "checkpoint": str(checkpoint)}
    if not owner.is_file() or json.loads(owner.read_text()) != wanted:
        write_json(owner, wanted)


def _claims(table: Path, pipeline: str) -> dict[str, Path]:
    """Query -> its claim file, for each query of this pipeline that has claimed the table."""
    owners = (table / WRITERS_DIR).glob(f"{pipeline}.*.json")
    return {o.name[len(pipeline) + 1 : -len(".json")]: o for o in owners}


def release_table(table: Path, *, pipeline: str) -> None:
    """Forget which checkpoints write the table for this pipeline, whatever the query (its rows
    were removed for a rebuild: the next checkpoint to write it claims it)."""
    for owner in _claims(table, pipeline).values():
        owner.unlink(missing_ok=True)


def _written(checkpoint: Path) -> dict[str, int]:
    path = checkpoint / BATCHES_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def record_batch(checkpoint: Path, tables: Iterable[str], batch: int) -> None:
    """Record that this batch wrote rows to these tables (before Spark commits the batch)."""
    written = _written(checkpoint)
    new = {**written, **{t: max(batch, written.get(t, batch)) for t in tables}}
    if new != written:
        write_json(checkpoint / BATCHES_FILE, new)


def _check_log(name: str, table: Path) -> None:
    """Every commit a reader replays parses: the ones after the last Delta checkpoint, in an
    unbroken run of versions."""
    log = table / "_delta_log"
    marker = log / "_last_checkpoint"
    start = json.loads(marker.read_text())["version"] + 1 if marker.is_file() else 0
    versions = sorted(int(p.stem) for p in log.glob("*.json") if p.stem.isdigit())
    # Delta writes a version's checksum file after its commit: one without it lost the commit.
    checksums = (p.name.removesuffix(".crc") for p in log.glob("*.crc"))
    lost = [int(v) for v in checksums if v.isdigit() and int(v) > max(versions, default=-1)]
    if lost:
        raise UserError(
            f"table {name}: Delta log is missing commit {min(lost)} (its checksum file is "
            f"there): restore the table's _delta_log, {_REBUILD_DAMAGED}"
        )
    versions = [v for v in versions if v >= start]
    for expected, version in enumerate(versions, start=versions[0] if versions else start):
        if version != expected:
            raise UserError(
                f"table {name}: Delta log is missing commit {expected} (has {version}): "
                f"restore the table's _delta_log, {_REBUILD_DAMAGED}"
            )
        commit = log / f"{version:020d}.json"
        lines = commit.read_text(errors="replace").splitlines()
        try:
            if not any(line.strip() for line in lines):
                raise ValueError("it is empty")
            for line in lines:
                if line.strip():
                    json.loads(line)
        except ValueError as err:
            reason = str(err) if str(err) == "it is empty" else "it does not parse as JSON"
            raise UserError(
                f"table {name}: Delta log is damaged: {commit} {reason}; restore the file, "
                f"{_REBUILD_DAMAGED}"
            ) from None


def _check_files(name: str, path: Path, table: DeltaTable) -> None:
    """The newest version's checksum file (Delta writes one after each commit) counts the
    files of the table: a commit cut short at a line break parses, but lost its files."""
    crc = path / "_delta_log" / f"{table.version():020d}.crc"
    if not crc.is_file():
        return
    try:
        counted = json.loads(crc.read_text())["numFiles"]
    except (ValueError, KeyError):
        return  # a checksum file is optional: one that does not read proves nothing
    if counted != len(table.file_uris()):
        raise UserError(
            f"table {name}: Delta log is damaged: version {table.version()} has "
            f"{len(table.file_uris())} data files, its checksum file says {counted}; restore "
            f"the table's _delta_log, {_REBUILD_DAMAGED}"
        )


def check_readable(name: str, path: Path) -> DeltaTable:
    """The table at `path`, once its Delta log is known whole; a UserError naming the damage."""
    _check_log(name, path)
    try:
        table = DeltaTable(str(path))
    except Exception as err:  # delta-rs raises several types for an unreadable log
        raise UserError(
            f"table {name}: Delta log does not read: {first_line(err)}; restore the table's "
            f"_delta_log, {_REBUILD_DAMAGED}"
        ) from None
    _check_files(name, path, table)
    return table


def open_table(name: str, path: Path) -> DeltaTable:
    """The table at `path` for reading; when delta-rs cannot open it, a UserError naming the
    damage (the log is checked only then, so a read costs nothing more)."""
    try:
        return DeltaTable(str(path))
    except Exception:  # delta-rs raises several types for an unreadable log
        return check_readable(name, path)


def check_tables(
    *,
    pipeline: str,
    query: str,
    checkpoint: Path,
    tables: Mapping[str, Path],
    new_checkpoint: bool = False,
) -> None:
    """Refuse (UserError) a start whose tables were written by another checkpoint, or that
    lack a batch the checkpoint says they got; `new_checkpoint` accepts another checkpoint."""
    current = checkpoint_id(checkpoint)
    committed = last_committed(checkpoint)
    written = _written(checkpoint)
    where = f"{pipeline}/{query}"
    for name, path in tables.items():
        # The last batch the table must hold; one written but not committed runs again anyway.
        expected = written.get(name)
        if committed is None or expected is None or expected > committed:
            expected = None
        if not (path / "_delta_log").is_dir():
            if expected is not None:
                raise UserError(
                    f"table {name}: missing from the lake, but checkpoint {checkpoint} wrote "
                    f"batches of {where} to it: restore the table, or run with --full-refresh "
                    "to rebuild it from the input"
                )
            continue
        owner = _owner_file(path, pipeline, query)
        others = sorted(set(_claims(path, pipeline)) - {query})
        if committed is not None and not owner.is_file() and others:
            # The table moved to this query (e.g. an upgrade derived one query from two): its
            # rows follow the other query's checkpoint, not this one.
            raise UserError(
                f"table {name}: written by {pipeline}/{others[0]} until now, and {where} has "
                f"committed batches without it, so its rows do not follow checkpoint "
                f"{checkpoint}: run with --full-refresh to rebuild it"
            )
        if owner.is_file() and not new_checkpoint:
            wrote = json.loads(owner.read_text())
            if wrote.get("checkpoint_id") != current:
                if Path(str(wrote.get("checkpoint"))).resolve() == checkpoint.resolve():
                    # Same folder, another checkpoint: it was deleted (or replaced) since.
                    raise UserError(
                        f"table {name}: {where} wrote it from checkpoint {checkpoint}, which has "
                        "been deleted or replaced since: restore that folder, or run with "
                        "--new-checkpoint to write from a new one (the input is then read again "
                        "from its start), or --full-refresh to rebuild the tables"
                    )
                raise UserError(
                    f"table {name}: {where} writes it from checkpoint {wrote.get('checkpoint')}, "
                    f"not {checkpoint}: pass that folder with --checkpoints, or --new-checkpoint "
                    "to write from this one (the input is then read again from its start)"
                )
        table = check_readable(name, path)
        if expected is None or current is None:
            continue
        done = table.transaction_version(writer_id(pipeline, query, checkpoint))
        if done is None or done < expected:
            has = "none" if done is None else f"up to {done}"
            raise UserError(
                f"table {name}: batch {expected} of {where} is committed in checkpoint "
                f"{checkpoint} but missing from the table (its batches from it: {has}); its "
                "Delta log was damaged or rolled back: restore the table, or run with "
                "--full-refresh to rebuild it"
            )
