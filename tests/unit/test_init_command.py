"""The interpreter `init`'s `next:` line names: one that runs as printed."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from engine.commands.init import python_command


def test_python_when_it_is_this_interpreter_on_the_path() -> None:
    assert python_command(str(Path(sys.executable).parent)) == "python"


def test_this_interpreters_path_when_python_on_the_path_is_another(tmp_path: Path) -> None:
    other = tmp_path / "python"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    assert python_command(str(tmp_path)) == shlex.quote(os.path.abspath(sys.executable))


def test_this_interpreters_path_when_there_is_no_python_on_the_path(tmp_path: Path) -> None:
    assert python_command(str(tmp_path)) == shlex.quote(os.path.abspath(sys.executable))
