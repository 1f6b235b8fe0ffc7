"""The command line: one module per command (its arguments and what it does), the parser built
from them here, and user errors turned into one line and exit 2."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from engine.commands import (
    broker,
    generate,
    graph,
    history,
    init,
    lint,
    log,
    pipelines,
    quality,
    query,
    run,
    serve_orders,
)
from engine.commands.options import EXIT_FAILED, EXIT_PIPE, EXIT_USAGE, Parser, a_path
from engine.errors import UserError, first_line

__all__ = ["COMMANDS", "build_parser", "main"]

#: Command name -> its module, in the order `--help` lists them.
COMMANDS = {
    "pipelines": pipelines,
    "run": run,
    "query": query,
    "history": history,
    "log": log,
    "init": init,
    "quality": quality,
    "broker": broker,
    "serve-orders": serve_orders,
    "lint": lint,
    "graph": graph,
    "generate": generate,
}


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: the shared options, then each command's."""
    parser = Parser(
        prog="runner.py",
        description="streamlake: stateful streaming pipelines written in Spark SQL, into Delta "
        "tables. `runner.py COMMAND --help` tells more.",
    )
    debug = parser.add_argument("--debug", action="store_true", help="show stack traces on errors")
    pipelines_folder = parser.add_argument(
        "--pipelines",
        type=a_path,
        help="folder of pipeline specs, in the project folder that holds sql/, tables/ and "
        "quality/ (default: pipelines/ beside runner.py)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        command = sub.add_parser(name, help=module.HELP)
        module.add_arguments(command)
        command.set_defaults(func=module.execute)
        # `--debug` and `--pipelines` also after the command (`run x --debug`, `init shop
        # --pipelines mine/pipelines`), where users tend to add them; unset there, they leave
        # the value given before the command alone.
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=debug.help
        )
        command.add_argument(
            "--pipelines", type=a_path, default=argparse.SUPPRESS, help=pipelines_folder.help
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    try:
        args = build_parser().parse_args(argv)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except UserError as err:
        if args.debug:
            traceback.print_exc()
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except PermissionError as err:
        # A folder or file of the user's that this user may not read or write: theirs to mend.
        if args.debug:
            traceback.print_exc()
        print(f"error: permission denied: {err.filename or first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`query ... | head`): stop quietly, as a process killed by
        # SIGPIPE would; stdout goes to /dev/null so the exit's flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        else:
            first = first_line(err)
            print(f"error: {first} (run with --debug for details)", file=sys.stderr)
        return EXIT_FAILED
