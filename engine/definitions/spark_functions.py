"""Spark's built-in functions by name, from `spark_functions.txt`: what `lint` checks a
pipeline's calls against, and the list `query` allows from (with the reasons it refuses some)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import cache
from pathlib import Path

from engine.errors import closest

__all__ = ["FUNCTIONS_FILE", "not_a_function", "spark_functions"]

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


def not_a_function(name: str, names: Collection[str]) -> str:
    """The words for a call to `name`, none of Spark's functions, naming the close one of
    `names` where there is one."""
    close = closest(name.lower(), names, cutoff=0.75)
    return f"{name}() is not a Spark function" + (f"; did you mean {close}()?" if close else "")
