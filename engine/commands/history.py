"""`history`: a table's Delta commits, newest first."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.commands.options import add_format, add_lake

HELP = "a table's Delta commits, newest first"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The table and the lake."""
    parser.add_argument("table", help="a table of the lake (`query 'SHOW TABLES'` lists them)")
    add_lake(parser)
    add_format(parser)


def execute(args: argparse.Namespace) -> int:
    """Print the commits from the table's Delta log."""
    from engine.lake.history import table_history
    from engine.query.output import print_rows

    print_rows(table_history(Path(args.lake).resolve(), args.table), args.format)
    return 0
