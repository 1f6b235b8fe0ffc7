"""Spark's built-in functions by name, from `spark_functions.txt`: what `lint` checks a
pipeline's calls against, and the list `query` allows from (with the reasons it refuses some)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path

__all__ = ["FUNCTIONS_FILE", "spark_functions"]

FUNCTIONS_FILE = Path(__file__).resolve().with_name("spark_functions.txt")


@cache
def spark_functions() -> Mapping[str, str | None]:
    """Every built-in's lower-case name -> the reason `query` refuses it (None: allowed)."""
    functions: dict[str, str | None] = {}
    for raw in FUNCTIONS_FILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            name, _, reason = line[1:].partition(" ")
            functions[name.lower()] = reason.strip()
        else:
            functions[line.lower()] = None
    return functions
