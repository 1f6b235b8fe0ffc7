"""`history`: a table's Delta commits, newest first."""

from __future__ import annotations

import argparse

from engine.commands.options import add_format, add_lake, at_least, lake_folder

HELP = "a table's Delta commits, newest first"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The table, how many commits, the lake."""
    parser.add_argument("table", help="a table of the lake (`query 'SHOW TABLES'` lists them)")
    parser.add_argument("--last", type=at_least(1), help="only the newest N commits (default: all)")
    add_lake(parser)
    add_format(parser)


def execute(args: argparse.Namespace) -> int:
    """Print the commits from the table's Delta log."""
    from engine.lake.history import table_history
    from engine.query.output import print_rows

    print_rows(table_history(lake_folder(args), args.table, last=args.last), args.format)
    return 0
