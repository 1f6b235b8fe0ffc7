"""`init NAME`: a new pipeline that runs at once on a bundled sample, with every file a
pipeline has (spec, one SQL file per view with an expectation example, table DDL, quality
suite, test), written from the templates beside this module."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

import sqlglot
import yaml
from sqlglot import exp

from engine.errors import UserError
from engine.project import PROJECT, Project

__all__ = ["Scaffold", "init_pipeline"]

_TEMPLATES = Path(__file__).resolve().parent / "template"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# The new pipeline's table is named after it, so it may not be the shared table's name.
_TAKEN = frozenset({"quarantine"})


@dataclass(frozen=True)
class Scaffold:
    """The files `init` writes, from template name to where it goes."""

    name: str
    project: Project

    def files(self) -> dict[str, Path]:
        """Each template and the file it becomes."""
        p, n = self.project, self.name
        return {
            "pipeline.yaml": p.pipelines / f"{n}.yaml",
            "lines.sql": p.sql / n / "lines.sql",
            "records.sql": p.sql / n / "records.sql",
            "kept.sql": p.sql / n / "kept.sql",
            "quarantine.sql": p.sql / n / "quarantine.sql",
            "table.sql": p.tables / f"{n}.sql",
            "suite.yaml": p.suites / f"{n}.yaml",
            "sample.jsonl": p.root / "data" / n / "sample.jsonl",
            "test_pipeline.py": p.root / "tests" / "pipeline" / f"test_{n}.py",
        }

    def shared(self) -> dict[Path, Path]:
        """Files every pipeline needs that the project lacks, from where they are copied to
        where they go: a new project folder (`--pipelines`) has no quarantine table and suite
        yet, nor the conftest that gives the generated test its `spark` fixture."""
        wanted = {
            self.project.tables / "quarantine.sql": PROJECT.tables / "quarantine.sql",
            self.project.suites / "quarantine.yaml": PROJECT.suites / "quarantine.yaml",
            self.project.root / "tests" / "conftest.py": _TEMPLATES / "conftest.py.tmpl",
        }
        return {path: origin for path, origin in wanted.items() if not path.exists()}


def _unusable(name: str, ddl: str) -> str | None:
    """Why `name` cannot name the files written, or None. The new table.sql must parse, as
    every command parses tables/, into the table `name`: a SQL keyword (select, from, union)
    does not, and one broken file in tables/ would stop every command of the project. The
    pipeline's yaml names it bare, where YAML reads null, true, no, off, ... as values."""
    if yaml.safe_load(name) != name:
        return f"YAML reads it as {yaml.safe_load(name)!r}, not as a name"
    try:
        tree = sqlglot.parse_one(ddl, read="spark")
    except sqlglot.errors.SqlglotError:
        tree = None
    if not (isinstance(tree, exp.Create) and tree.this.this.name == name):
        return "it is a SQL keyword, which cannot name its table"
    return None


def init_pipeline(name: str, project: Project) -> list[Path]:
    """Write a new pipeline `name` into the project; returns the files written. Nothing is
    written when the name is not usable or any of its files exists."""
    if not _NAME.match(name) or name in _TAKEN:
        raise UserError(
            f"init: {name!r} is not a usable pipeline name (up to 40 lower-case letters, "
            "digits and _, starting with a letter; not quarantine)"
        )
    scaffold = Scaffold(name, project)
    files = scaffold.files()
    existing = [path for path in files.values() if path.exists()]
    if existing or (project.sql / name).exists():
        raise UserError(f"init: {existing[0] if existing else project.sql / name} already exists")
    texts = {
        path: Template((_TEMPLATES / f"{template}.tmpl").read_text()).substitute(
            name=name, specs=json.dumps(project.pipelines.name)
        )
        for template, path in files.items()
    }
    problem = _unusable(name, texts[files["table.sql"]])
    if problem:
        raise UserError(f"init: {name!r} is not a usable pipeline name: {problem}")
    texts |= {path: origin.read_text() for path, origin in scaffold.shared().items()}
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(texts)
