"""`lint`: check the pipelines' specs, SQL, tables and suites without Spark."""

from __future__ import annotations

import argparse

from engine.commands.options import EXIT_FAILED, add_format, registry

HELP = "check the pipelines' SQL without Spark"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Which pipelines, and how the findings are printed."""
    parser.add_argument(
        "pipeline_names", nargs="*", metavar="PIPELINE", help="pipelines to check (default all)"
    )
    add_format(parser, text=True)


def execute(args: argparse.Namespace) -> int:
    """Print every finding and a summary (or the findings as rows); exit 1 when one is an
    error."""
    from engine.lint import lint_pipelines

    result = lint_pipelines(registry(args), args.pipeline_names)
    if args.format == "text":
        for finding in result.findings:
            print(finding)
        print(result.summary())
    else:
        import pyarrow as pa

        from engine.query.output import print_rows

        # For a CI job or an editor: one row per finding, the path as the text shows it.
        rows = [
            {
                "file": str(f.shown_path),
                "line": f.line,
                "col": f.col,
                "severity": f.severity,
                "code": f.code,
                "message": f.message,
            }
            for f in result.findings
        ]
        schema = pa.schema(
            [("file", pa.string()), ("line", pa.int64()), ("col", pa.int64())]
            + [(name, pa.string()) for name in ("severity", "code", "message")]
        )
        print_rows(pa.Table.from_pylist(rows, schema=schema), args.format)
    return EXIT_FAILED if result.errors else 0
