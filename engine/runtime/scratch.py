"""Temporary folders that live as long as the process, for files Spark reads until it ends."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

__all__ = ["scratch_folder"]


def scratch_folder(prefix: str) -> Path:
    """A new empty folder in the system's temporary folder, removed when the process exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
