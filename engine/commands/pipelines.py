"""`pipelines`: list the pipelines, their queries and what each writes."""

from __future__ import annotations

import argparse

from engine.commands.options import registry

HELP = "list pipelines and their tables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options of its own."""


def execute(args: argparse.Namespace) -> int:
    """Print each pipeline with its description, then one line per query."""
    found = registry(args)
    if not found.names():
        print(f"no pipelines in {found.folder} (`runner.py init NAME` writes one)")
    for name in found.names():
        p = found.get(name)
        print(f"{name}: {p.description}")
        for q in p.queries:
            topics = [f"kafka topic {t}" for t in q.topics]
            print(f"  query {q.name}: {', '.join([*q.sinks, *topics])}")
    return 0
