"""One run of a pipeline at a time on a lake.

Two runs of a pipeline on one lake (a scheduler starting the next run before the last ended,
or `--full-refresh` typed while a continuous run goes on) would race each other: to create
the tables, over Spark's checkpoint logs, or one emptying the tables the other writes. The
first run holds an exclusive lock on `<lake>/_runs/<pipeline>.lock`; the operating system
drops it when that process ends, however it ends, so a crashed run never leaves it behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.errors import UserError

__all__ = ["RUNS_DIR", "run_lock"]

RUNS_DIR = "_runs"


@contextmanager
def run_lock(lake: Path, pipeline: str) -> Iterator[None]:
    """Hold the lake's lock of `pipeline` for the block; a user error when another process
    holds it (naming that process)."""
    folder = lake / RUNS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{pipeline}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise UserError(
                f"--lake {lake}: pipeline {pipeline} is already running on this lake "
                f"(process {holder}); wait for that run to end or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
