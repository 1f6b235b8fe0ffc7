"""`broker`: a local Kafka broker with the pipelines' topics, for trying the Kafka pipelines."""

from __future__ import annotations

import argparse

from engine.commands.options import PORT, at_least, registry
from engine.definitions.pipeline import Registry
from engine.errors import UserError

HELP = "run a local Kafka broker until Ctrl-C"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Port, topics, partitions and which broker."""
    parser.add_argument("--port", type=PORT, default=9092, help="port to listen on (default 9092)")
    parser.add_argument("--topics", help="comma-separated (default: the pipelines' topics)")
    parser.add_argument("--partitions", type=at_least(1), default=1, help="per new topic")
    parser.add_argument(
        "--kind",
        choices=("kafka", "tansu"),
        help="Apache Kafka (default where `make` fetched it) or tansu (in memory)",
    )


def execute(args: argparse.Namespace) -> int:
    """Start the broker, create the topics, wait for Ctrl-C (or the broker's exit)."""
    from devtools.broker import Broker
    from engine.runtime.signals import stop_on_signals

    topics = args.topics.split(",") if args.topics else _pipeline_topics(registry(args))
    stop = stop_on_signals()
    with Broker(port=args.port, kind=args.kind).start(topics, partitions=args.partitions) as broker:
        print(
            f"kafka broker ({broker.label}) on {broker.servers}; topics: {', '.join(topics)}; "
            "Ctrl-C stops it (its topics are lost)",
            flush=True,
        )
        while not stop.wait(0.5):
            if broker.process is None or broker.process.poll() is not None:
                raise UserError(f"broker: {broker.label} on {broker.servers} exited")
    print("broker stopped")
    return 0


def _pipeline_topics(pipelines: Registry) -> list[str]:
    topics: set[str] = set()
    for name in pipelines.names():
        p = pipelines.get(name)
        if p.source.kind == "kafka" and p.source.options.get("topic"):
            topics.add(str(p.source.options["topic"]))
        topics.update(t for q in p.queries for t in q.topics)
    return sorted(topics)
