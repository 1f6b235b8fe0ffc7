"""`graph`: a pipeline's graph, from source through views and handlers to tables and topics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.commands.options import a_path, registry

HELP = "draw a pipeline's graph (Mermaid, SVG or PNG)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The pipeline and where the picture goes."""
    parser.add_argument("pipeline", help="the pipeline's name (`runner.py pipelines` lists them)")
    parser.add_argument(
        "--out",
        type=a_path,
        help="FILE.mmd, or FILE.svg / FILE.png laid out by Graphviz (default: Mermaid on stdout)",
    )


def execute(args: argparse.Namespace) -> int:
    """Draw the planned graph: no JVM."""
    from engine.graph import pipeline_graph, to_mermaid
    from engine.graph.dot import write_graph

    graph = pipeline_graph(registry(args).get(args.pipeline))
    if args.out is None:
        sys.stdout.write(to_mermaid(graph))
    else:
        write_graph(graph, Path(args.out))
    return 0
