"""Scratch folders: removed at exit, and, left by a killed process, by the next process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from engine.runtime.scratch import scratch_folder

PROJECT = Path(__file__).resolve().parents[2]


def start(tmp: Path, *, stay: bool) -> tuple[subprocess.Popen[str], Path]:
    """A process that makes a scratch folder in `tmp`, prints it, then waits (or ends)."""
    code = (
        "import sys, time\n"
        "from engine.runtime.scratch import scratch_folder\n"
        "print(scratch_folder('streamlake-test-'), flush=True)\n"
        f"time.sleep({60 if stay else 0})\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=PROJECT,
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_killed_process_folder_goes_with_the_next_one_a_live_one_stays(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed, left = start(tmp_path, stay=True)
    live, kept = start(tmp_path, stay=True)
    ended, removed = start(tmp_path, stay=False)
    try:
        ended.wait(30)
        assert not removed.exists()  # removed at exit
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(30)
        assert left.is_dir()  # no exit handler ran
        other = tmp_path / "streamlake-test-made-elsewhere"
        other.mkdir()

        mine = scratch_folder("streamlake-test-")
        again = scratch_folder("streamlake-test-")  # the process's own folders stay
        assert not left.exists()
        assert kept.is_dir() and other.is_dir() and mine.is_dir() and again.is_dir()
    finally:
        live.kill()
        live.wait(30)


@pytest.mark.parametrize("prefix", ["streamlake-warehouse-", "streamlake-pyfiles-"])
def test_only_folders_of_the_prefix_are_looked_at(tmp_path, monkeypatch, prefix):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed, left = start(tmp_path, stay=True)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(30)
    scratch_folder(prefix)
    assert left.is_dir()
