"""Spark's own processes for the tests that run a pipeline somewhere else: a guard that keeps
the project out of their Python workers' path, a clean stop, and a kill mid-stream."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import PROJECT, batches_committed

DATA = PROJECT / "data" / "server_logs"

# The workers' interpreter: the venv's, minus the editable install that would let them import
# the project from its folder. They then find `engine` and `handlers` only in the zip the run
# ships (engine/runtime/cluster.py), as workers on other machines would. Each worker process
# leaves a marker file, so a test knows the workers ran through this guard.
GUARD = """
import os, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
sys.path[:] = [p for p in sys.path if "__editable__" not in p and p != {project!r}]
open(os.path.join({markers!r}, str(os.getpid())), "w").close()
"""


def guarded_python(root: Path) -> tuple[Path, Path]:
    """An executable that runs the venv's Python through GUARD; and its markers folder."""
    guard, markers = root / "guard", root / "markers"
    guard.mkdir()
    markers.mkdir()
    code = GUARD.format(project=str(PROJECT), markers=str(markers))
    (guard / "sitecustomize.py").write_text(code)
    wrapper = root / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{guard}:$PYTHONPATH" exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, markers


def run_server_logs(
    lake: Path, *conf: str, env: dict[str, str] | None = None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`runner.py run server_logs --once` on the project's sample logs, in a process."""
    args = [sys.executable, str(PROJECT / "runner.py"), "run", "server_logs", "--once"]
    args += ["--lake", str(lake), "--input", str(DATA)]
    # Two shuffle partitions, as the other pipeline tests: fewer tasks on the single core.
    for item in ("spark.sql.shuffle.partitions=2", *conf):
        args += ["--conf", item]
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def stop(process: subprocess.Popen) -> None:
    """Stop a daemon: terminate, then kill if it does not end within 20 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def kill_after_batches(command: list[str], checkpoint: Path, batches: int) -> None:
    """Start `command` and SIGKILL it, JVM and Python workers with it, as soon as the query at
    `checkpoint` has committed `batches` batches (the progress lines lag behind the commits)."""
    # A session of its own, so the kill takes the whole process group down.
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 300
    try:
        while batches_committed(checkpoint) < batches:
            alive = proc.poll() is None
            assert alive and time.monotonic() < deadline, f"fewer than {batches} batches committed"
            time.sleep(0.05)
    finally:  # a run that failed to get there is not left behind either
        with contextlib.suppress(ProcessLookupError):  # the whole group had ended
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
