"""`generate`: realistic input for a pipeline, into a folder or onto a Kafka topic."""

from __future__ import annotations

import argparse

from engine.commands.options import a_path, at_least

HELP = "write realistic input data for a pipeline"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The pipeline, where the data goes, how much, and whether it has faults."""
    parser.add_argument("pipeline", help="the pipeline whose input it writes")
    parser.add_argument(
        "--out",
        type=a_path,
        required=True,
        help="a folder, or kafka://HOST:PORT/TOPIC for the pipelines that read a topic",
    )
    parser.add_argument(
        "--events", type=at_least(1), default=10_000, help="how many (default 10000)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the same seed writes the same data (default 0)"
    )
    parser.add_argument("--faults", action="store_true", help="add bad, duplicate and late lines")


def execute(args: argparse.Namespace) -> int:
    """Write the data with progress, then one line of what was written."""
    from devtools.generators import generate

    # --out stays a string: it may be kafka://HOST:PORT/TOPIC (sensor_cep, order_status).
    summary = generate(
        args.pipeline,
        args.out,
        events=args.events,
        seed=args.seed,
        faults=args.faults,
        progress=True,
    )
    print(summary.line())
    return 0
