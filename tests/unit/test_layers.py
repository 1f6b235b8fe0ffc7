"""The engine's layers, as the folders show them: what each may import.

Definitions and the plan need no Spark (so `lint`, `graph` and `run --dry-run` answer before
a JVM starts); lower layers never import higher ones; only the commands, which dispatch the dev
tools (`generate`, `broker`, `serve-orders`), import them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "engine"

#: Layer of each part of the engine, lowest first; a module may import its own layer and below.
LAYERS = {
    "errors": 0,
    "project": 0,
    "reachable": 0,
    "definitions": 1,
    "lake": 2,
    "plan": 3,
    "sources.kafka_topic": 3,
    "lint": 4,
    "graph": 4,
    "quality": 4,
    "scaffold": 4,
    # The Spark runtime: the session, sources, sinks and the run loop use each other.
    "sources": 6,
    "sinks": 6,
    "runtime": 6,
    "query": 7,  # `--engine spark` runs in the runtime's session
    "testing": 7,  # fixtures for pipeline tests, over the runtime's session
    "commands": 8,
}
#: Parts that must answer without Spark (nor pandas, for the picture of the graph).
SPARK_FREE = (
    "errors",
    "project",
    "reachable",
    "definitions",
    "plan",
    "lint",
    "graph",
    "scaffold",
    "sources.kafka_topic",
)


def _part(module: str) -> str:
    """The LAYERS key of an `engine.` module: the longest one that prefixes it."""
    name = module.removeprefix("engine.")
    return max((k for k in LAYERS if name == k or name.startswith(k + ".")), key=len)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _module(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(p for p in ENGINE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module(p))
def test_imports_follow_the_layers(path: Path) -> None:
    module = _module(path)
    if module == "engine":
        return
    own = _part(module)
    wrong = []
    for name in _imports(path):
        top = name.split(".")[0]
        dev = top in ("devtools", "bench", "tests") and not (
            top == "devtools" and own == "commands"
        )
        if dev or (top in ("pyspark", "pandas") and own in SPARK_FREE):
            wrong.append(name)
        elif top == "engine" and name != "engine":
            try:
                other = _part(name)
            except ValueError:
                continue  # `from engine import x` of a name: checked as engine.x
            if LAYERS[other] > LAYERS[own]:
                wrong.append(f"{name} (layer {other})")
    assert not wrong, f"{module} (layer {own}) imports {', '.join(sorted(wrong))}"


def test_planning_loads_no_spark() -> None:
    """Loading the plan, lint, graph and the CLI's parser imports neither pyspark nor pandas."""
    code = (
        "import sys, engine.commands, engine.plan.deployment, engine.lint, engine.graph\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'pandas', 'py4j'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ENGINE.parent, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
