"""Synthetic input data for the pipelines, and what their generators share."""

from __future__ import annotations

from pathlib import Path

__all__ = ["prepare_folder"]


def prepare_folder(folder: Path) -> Path:
    """Create `folder` for part files; FileExistsError if it exists and is not empty."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder} exists and is not an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
