"""Temporary folders that live as long as the process, for files Spark reads until it ends.

A process killed with SIGKILL (the OOM killer, `kill -9`, a scheduler's hard stop) runs no
exit handler, so its folder stays. Each folder holds a lock on its `.owner` file for the life of
its process; the operating system drops it however the process ends, so the next process to
make a folder of the same kind removes those whose lock it can take. A lock, not a process id:
ids are reused, and a process in another container sharing the temporary folder has an id
this one cannot see.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["scratch_folder"]

_OWNER = ".owner"
#: The owners' descriptors, open (and locked) until the process ends.
_held: list[int] = []


def scratch_folder(prefix: str) -> Path:
    """A new empty folder in the system's temporary folder, removed when the process exits;
    first, those of `prefix` whose process was killed are removed."""
    _remove_orphans(prefix)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    fd = os.open(folder / _OWNER, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _held.append(fd)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _remove_orphans(prefix: str) -> None:
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            fd = os.open(folder / _OWNER, os.O_RDWR)
        except OSError:
            continue  # not made here, or someone else's: left alone
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its process is alive
        finally:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
