"""`quality`: validate the lake's tables with their Great Expectations suites."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.commands.options import (
    EXIT_FAILED,
    a_path,
    add_lake,
    lake_folder,
    registry,
    writable_folder,
)

HELP = "validate the lake's tables with their suites"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The tables, the lake, the report folder, and whether only new rows are checked."""
    parser.add_argument("tables", nargs="*", metavar="TABLE", help="tables to check (default all)")
    add_lake(parser)
    parser.add_argument("--report", type=a_path, help="report folder (default <lake>/_quality)")
    parser.add_argument(
        "--since-last", action="store_true", help="only rows appended since the last validation"
    )


def execute(args: argparse.Namespace) -> int:
    """Validate, print the report's summary; exit 1 when a check failed."""
    from engine.quality import validate_lake

    report = validate_lake(
        lake_folder(args),
        writable_folder("--report", Path(args.report).resolve()) if args.report else None,
        args.tables,
        since_last=args.since_last,
        project=registry(args).project,
    )
    report.print(sys.stdout)
    return 0 if report.passed else EXIT_FAILED
