"""`log`: what the runs did (batches, errors, quality results), from the lake's event log."""

from __future__ import annotations

import argparse
from collections.abc import Collection

from engine.commands.options import add_format, add_lake, at_least, lake_folder, registry
from engine.errors import UserError

HELP = "what the runs did, from the lake's event log"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Which pipeline, how many events, the lake."""
    parser.add_argument(
        "pipeline", nargs="?", help="only this pipeline's runs (and its tables' quality results)"
    )
    parser.add_argument(
        "--last", type=at_least(1), default=20, help="the newest N events (default 20)"
    )
    add_lake(parser)
    add_format(parser, text=True)


def execute(args: argparse.Namespace) -> int:
    """Print the newest events, as lines or as rows."""
    from engine.lake import lake_tables
    from engine.lake.event_log import EventLog, event_lines, written_to
    from engine.query.output import print_rows

    lake = lake_folder(args)
    lake_tables(lake)  # a missing lake is one line
    log = EventLog(lake)
    tables: Collection[str] = ()
    if args.pipeline:
        # A known name brings the tables whose quality results are its own. An unknown one
        # lists the known ones, unless the lake has its runs (a pipeline since removed, or
        # another project's): then its tables are those its runs wrote to.
        try:
            tables = registry(args).get(args.pipeline).tables
        except UserError:
            own = log.read(pipeline=args.pipeline)
            if not own.num_rows:
                raise
            tables = written_to(own)
    events = log.read(pipeline=args.pipeline, tables=tables, last=args.last)
    if args.format != "text":
        print_rows(events, args.format)
    elif not events.num_rows:
        of = f" of {args.pipeline}" if args.pipeline else ""
        print(f"no events{of} in {lake} (a run writes them)")
    else:
        print("\n".join(event_lines(events)))
    return 0
