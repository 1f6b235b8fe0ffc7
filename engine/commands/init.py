"""`init`: a new pipeline, with its SQL, table, suite and test, that runs on a bundled sample."""

from __future__ import annotations

import argparse
import shlex

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
    print(f"next: python {runner} {where}run {args.name} --once && python {runner} {where}quality")
    return 0
