"""`init`: a new pipeline, with its SQL, table, suite and test, that runs on a bundled sample."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path

from engine.commands.options import registry
from engine.project import PROJECT, shown

HELP = "create a new pipeline that runs on a bundled sample"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The new pipeline's name."""
    parser.add_argument("name", help="the pipeline's name (also its table's)")


def execute(args: argparse.Namespace) -> int:
    """Write the files, then print the commands that run and check it."""
    from engine.scaffold import init_pipeline

    project = registry(args, may_be_new=True).project
    for path in init_pipeline(args.name, project):
        print(f"created {shown(path)}")
    # The commands that follow need the same folder, or they read the engine's own project.
    where = f"--pipelines {shlex.quote(str(args.pipelines))} " if args.pipelines else ""
    runner = shlex.quote(str(shown(PROJECT.root / "runner.py")))
    command = f"{python_command()} {runner} {where}"
    print(f"next: {command}run {args.name} --once && {command}quality")
    return 0


def python_command(search_path: str | None = None) -> str:
    """`python` when that name on the PATH is this interpreter's, else this interpreter's path:
    a `python` of another environment may lack pyspark."""
    found = shutil.which("python", path=search_path)
    # The folder, not the file: a virtual environment's python and python3 are one interpreter,
    # while a symlink's target is the base interpreter, without the environment's packages.
    if found and Path(found).absolute().parent == Path(sys.executable).absolute().parent:
        return "python"
    return shlex.quote(os.path.abspath(sys.executable))
