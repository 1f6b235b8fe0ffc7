"""`lint`: check the pipelines' specs, SQL, tables and suites without Spark."""

from __future__ import annotations

import argparse

from engine.commands.options import EXIT_FAILED, registry

HELP = "check the pipelines' SQL without Spark"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Which pipelines."""
    parser.add_argument(
        "pipeline_names", nargs="*", metavar="PIPELINE", help="pipelines to check (default all)"
    )


def execute(args: argparse.Namespace) -> int:
    """Print every finding and a summary; exit 1 when one is an error."""
    from engine.lint import lint_pipelines

    result = lint_pipelines(registry(args), args.pipeline_names)
    for finding in result.findings:
        print(finding)
    print(result.summary())
    return EXIT_FAILED if result.errors else 0
