"""Pipeline specs: `pipelines/<name>.yaml` as frozen dataclasses that remember their file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from engine.definitions.durations import parse_duration
from engine.errors import UserError
from engine.project import PROJECT, Project

__all__ = [
    "MAIN_QUERY",
    "REAL_TIME",
    "REAL_TIME_BATCH",
    "HandlerSpec",
    "Pipeline",
    "QuerySpec",
    "Registry",
    "SourceSpec",
]

SourceKind = Literal["files", "kafka", "socket", "delta"]
_KINDS = ("files", "kafka", "socket", "delta")
OutputMode = Literal["append", "update"]
#: The trigger of a query run in Spark's Real-Time Mode: "real-time" or "real-time <duration>"
#: (how long each of its long-running batches lasts; default REAL_TIME_BATCH).
REAL_TIME = "real-time"
REAL_TIME_BATCH = "1 minute"


@dataclass(frozen=True)
class SourceSpec:
    """Where a pipeline's input comes from and the view it is registered as."""

    view: str
    kind: SourceKind
    path: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: kind delta: the lake table read as a stream (`<lake>/<table>`).
    table: str | None = None


@dataclass(frozen=True)
class HandlerSpec:
    """A state-handler step: `class` run over the `input` view, registered as view `name`."""

    name: str
    class_path: str
    input: str


@dataclass(frozen=True)
class QuerySpec:
    """One streaming query: the tables (table -> view) and Kafka topics (topic -> view) it
    writes, its trigger and its FAIR scheduler pool."""

    name: str
    sinks: Mapping[str, str]
    #: "5 seconds" (a micro-batch every so often) or "real-time [duration]" (Spark's Real-Time
    #: Mode, for a query that writes only topics; engine/runtime/run.py).
    trigger: str | None = None
    pool: str | None = None
    topics: Mapping[str, str] = field(default_factory=dict)
    #: "update" for queries with a SQL aggregation (rows out as they change, merged by key).
    output_mode: OutputMode = "append"


@dataclass(frozen=True)
class Pipeline:
    """A pipeline: source, SQL folder, handlers, queries and settings, from `path`."""

    name: str
    path: Path
    description: str
    source: SourceSpec
    sql_dir: Path
    handlers: tuple[HandlerSpec, ...]
    queries: tuple[QuerySpec, ...]
    settings: Mapping[str, str]
    #: librdkafka settings (bootstrap.servers, ...) for Kafka sources and topic sinks.
    kafka: Mapping[str, str] = field(default_factory=dict)

    @property
    def project(self) -> Project:
        """The project the pipeline's spec belongs to (its folders sit beside `pipelines/`)."""
        return Project.of_pipelines(self.path.parent)

    @property
    def tables_dir(self) -> Path:
        """The project's `tables/` folder."""
        return self.project.tables

    def input_folder(self, path: str | None = None) -> Path:
        """The folder a files source reads: `--input` (relative to the working folder) or the
        spec's `path` (relative to the project); a missing folder is a user error."""
        option = "--input" if path is not None else f"{self.path}: source.path"
        if path is not None and not path.strip():
            # An unset shell variable: not the spec's folder, which it would silently read.
            raise UserError("--input: empty; give the folder that holds the files")
        folder = Path(path or self.source.path or "")
        if not folder.is_absolute():
            folder = (Path.cwd() if path else self.project.root) / folder
        if folder.is_file():
            raise UserError(f"{option}: {folder} is a file; give the folder that holds the files")
        if not folder.is_dir():
            raise UserError(f"{option}: input folder not found: {folder}")
        if not os.access(folder, os.R_OK | os.X_OK):
            raise UserError(f"{option}: no permission to read {folder}")
        return folder

    @property
    def tables(self) -> list[str]:
        """Names of the tables the pipeline writes, in query order."""
        return [t for q in self.queries for t in q.sinks]

    def with_settings(self, overrides: Mapping[str, str]) -> Pipeline:
        """A copy with settings, `source.<option>`s and `kafka.<setting>`s overridden;
        unknown setting names are errors."""

        def prefixed(prefix: str) -> dict[str, str]:
            return {k.removeprefix(prefix): v for k, v in overrides.items() if k.startswith(prefix)}

        source_opts, kafka = prefixed("source."), prefixed("kafka.")
        overrides = {k: v for k, v in overrides.items() if not k.startswith(("source.", "kafka."))}
        unknown = sorted(set(overrides) - set(self.settings))
        if unknown:
            known = ", ".join(sorted(self.settings)) or "none"
            raise UserError(
                f"--conf {unknown[0]}: not a setting of pipeline {self.name} (settings: {known})"
            )
        kind = source_opts.pop("kind", self.source.kind)
        if kind not in _KINDS:
            raise UserError(f"--conf source.kind: one of {', '.join(_KINDS)}, not {kind!r}")
        table = source_opts.pop("table", self.source.table)
        if kind == "delta" and not table:
            raise UserError("--conf source.table: a delta source needs the lake table it reads")
        source = replace(
            self.source, kind=kind, table=table, options={**self.source.options, **source_opts}
        )
        return replace(
            self,
            settings={**self.settings, **overrides},
            source=source,
            kafka={**self.kafka, **kafka},
        )


def _require(spec: Mapping[str, Any], key: str, where: Path) -> Any:
    if key not in spec or spec[key] in (None, ""):
        raise UserError(f"{where}: missing '{key}'")
    return spec[key]


def _output_mode(mode: str, where: Path) -> OutputMode:
    if mode not in ("append", "update"):
        raise UserError(f"{where}: output_mode must be append or update, not {mode!r}")
    return mode  # type: ignore[return-value]


MAIN_QUERY = "main"


def _outputs(query: Mapping[str, Any], name: str, where: Path) -> Mapping[str, str]:
    """The tables a query entry takes for itself (`sinks`; may be absent when it takes only
    `topics`); an entry that takes nothing overrides the derived query `main`."""
    sinks, topics = query.get("sinks") or {}, query.get("topics") or {}
    if not sinks and not topics and name != MAIN_QUERY:
        raise UserError(
            f"{where}: query '{name}' writes nothing (give it sinks or topics, or name it "
            f"'{MAIN_QUERY}' to set the trigger, pool or output mode of the derived query)"
        )
    trigger = str(query.get("trigger") or "")
    if trigger.startswith(REAL_TIME) and sinks:
        raise UserError(
            f"{where}: query '{name}': trigger {REAL_TIME} is for a query that writes only "
            "topics (its tables need foreachBatch, which Real-Time Mode does not run)"
        )
    if trigger and not trigger.startswith(REAL_TIME):
        try:
            parse_duration(trigger)
        except ValueError as err:
            raise UserError(f"{where}: query '{name}': trigger: {err}") from None
    return sinks


def _queries(spec: Mapping[str, Any], path: Path) -> tuple[QuerySpec, ...]:
    """The pipeline's queries: the `queries:` entries that take outputs for themselves, and
    `main` writing every table and topic of `tables:`/`topics:` that no entry took."""
    entries = dict(spec.get("queries") or {})
    queries = [
        QuerySpec(
            name=name,
            sinks=dict(_outputs(q, name, path)),
            trigger=q.get("trigger"),
            pool=q.get("pool"),
            topics=dict(q.get("topics") or {}),
            output_mode=_output_mode(q.get("output_mode", "append"), path),
        )
        for name, q in entries.items()
    ]
    taken = {t for q in queries for t in (*q.sinks, *q.topics)}
    tables = {t: v for t, v in (spec.get("tables") or {}).items() if t not in taken}
    topics = {t: v for t, v in (spec.get("topics") or {}).items() if t not in taken}
    main = next((q for q in queries if q.name == MAIN_QUERY), None)
    if tables or topics:
        base = main or QuerySpec(MAIN_QUERY, {})
        merged = replace(base, sinks={**tables, **base.sinks}, topics={**topics, **base.topics})
        queries = [merged if q is main else q for q in queries]
        if main is None:
            queries.insert(0, merged)
    elif main is not None and not main.sinks and not main.topics:
        raise UserError(f"{path}: query '{MAIN_QUERY}' writes nothing (list tables: or topics:)")
    if not queries:
        raise UserError(f"{path}: missing 'tables' (table: view, what the pipeline writes)")
    return tuple(queries)


def _load(path: Path) -> Pipeline:
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise UserError(f"{path}: not valid YAML ({err})") from None
    src = _require(spec, "source", path)
    kind = _require(src, "kind", path)
    if kind not in _KINDS:
        raise UserError(f"{path}: source kind must be one of {', '.join(_KINDS)}, not {kind!r}")
    source = SourceSpec(
        view=_require(src, "view", path),
        kind=kind,
        path=src.get("path"),
        options=dict(src.get("options") or {}),
        table=_require(src, "table", path) if kind == "delta" else src.get("table"),
    )
    handlers = tuple(
        HandlerSpec(
            name=name, class_path=_require(h, "class", path), input=_require(h, "input", path)
        )
        for name, h in (spec.get("handlers") or {}).items()
    )
    queries = _queries(spec, path)
    name = _require(spec, "name", path)
    if name != path.stem:
        raise UserError(f"{path}: pipeline '{name}' must be named after its file '{path.stem}'")
    return Pipeline(
        name=name,
        path=path,
        description=str(spec.get("description", "")),
        source=source,
        sql_dir=(Project.of_pipelines(path.parent).root / _require(spec, "sql", path)).resolve(),
        handlers=handlers,
        queries=queries,
        settings={k: "" if v is None else str(v) for k, v in (spec.get("settings") or {}).items()},
        kafka={k: str(v) for k, v in (spec.get("kafka") or {}).items()},
    )


class Registry:
    """The pipelines of a folder (default: the project's `pipelines/`)."""

    def __init__(self, folder: Path = PROJECT.pipelines) -> None:
        self.folder = folder
        self.project = Project.of_pipelines(folder)

    def names(self) -> list[str]:
        """Pipeline names, sorted."""
        return sorted(p.stem for p in self.folder.glob("*.yaml"))

    def get(self, name: str) -> Pipeline:
        """Load one pipeline; an unknown name is a user error listing the known ones."""
        path = self.folder / f"{name}.yaml"
        if not path.is_file():
            known = ", ".join(self.names()) or "none"
            raise UserError(f"unknown pipeline '{name}' (pipelines: {known})")
        return _load(path)
