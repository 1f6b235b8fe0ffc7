"""Pipeline specs: `pipelines/<name>.yaml` as frozen dataclasses that remember their file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from engine.definitions.durations import Duration, parse_duration
from engine.definitions.source_options import check_source_options, options_for
from engine.definitions.yaml_files import (
    At,
    mapping,
    optional,
    read_yaml,
    required,
    scalars,
    text_mapping,
)
from engine.errors import UserError
from engine.project import PROJECT, Project, shown

__all__ = [
    "MAIN_QUERY",
    "REAL_TIME",
    "REAL_TIME_BATCH",
    "HandlerSpec",
    "Pipeline",
    "QuerySpec",
    "Registry",
    "SourceSpec",
    "trigger_duration",
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

    def delta_table(self, lake: Path, path: str | None = None) -> Path:
        """Where a delta source's table is: `path` (--input) if given, else `<lake>/<table>`."""
        return Path(path).resolve() if path else lake / str(self.table)


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
    #: Mode, for a query that writes only topics; engine/runtime/query_control.py).
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
        spec's `path` (relative to the project; `~/` the home folder); a missing folder is a user
        error."""
        option = "--input" if path is not None else f"{self.path}: source.path"
        if path is not None and not path.strip():
            # An unset shell variable: not the spec's folder, which it would silently read.
            raise UserError("--input: empty; give the folder that holds the files")
        folder = Path(path or self.source.path or "").expanduser()
        if not folder.is_absolute():
            folder = (Path.cwd() if path else self.project.root) / folder
        try:
            is_file, is_dir = folder.is_file(), folder.is_dir()
        except PermissionError:  # a folder on the way may not be searched
            raise UserError(f"{option}: permission denied: {folder}") from None
        if is_file:
            raise UserError(f"{option}: {folder} is a file; give the folder that holds the files")
        if not is_dir:
            raise UserError(f"{option}: input folder not found: {folder}")
        if not os.access(folder, os.R_OK | os.X_OK):
            raise UserError(f"{option}: no permission to read {folder}")
        return folder

    @property
    def tables(self) -> list[str]:
        """Names of the tables the pipeline writes, in query order."""
        return [t for q in self.queries for t in q.sinks]

    def needs_broker(self, input_path: str | None) -> bool:
        """Whether a run talks to the Kafka broker: it reads a topic (no `--input` in its
        stead) or writes one."""
        reads = self.source.kind == "kafka" and input_path is None
        return reads or any(q.topics for q in self.queries)

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
        # Keys of `source:` that are not options: as options, Spark would ignore them.
        if "path" in source_opts:
            raise UserError("--conf source.path: give the folder to read with --input PATH")
        if "view" in source_opts:
            raise UserError(
                f"--conf source.view: the view the SQL reads is set in {self.path}, not per run"
            )
        kind = source_opts.pop("kind", self.source.kind)
        if kind not in _KINDS:
            raise UserError(f"--conf source.kind: one of {', '.join(_KINDS)}, not {kind!r}")
        table = source_opts.pop("table", self.source.table)
        if kind == "delta" and not table:
            raise UserError("--conf source.table: a delta source needs the lake table it reads")
        check_source_options(kind, source_opts, "--conf source.")
        _check_servers(kafka, "--conf kafka.")
        spec_opts = self.source.options
        if kind != self.source.kind:  # the spec's options were for another reader
            spec_opts = options_for(kind, spec_opts)
        source = replace(self.source, kind=kind, table=table, options={**spec_opts, **source_opts})
        return replace(
            self,
            settings={**self.settings, **overrides},
            source=source,
            kafka={**self.kafka, **kafka},
        )


# The keys a spec may have at each level: any other is a misspelling that would be ignored.
_SPEC_KEYS = (
    "name",
    "description",
    "source",
    "sql",
    "handlers",
    "tables",
    "topics",
    "queries",
    "settings",
    "kafka",
)
_SOURCE_KEYS = ("view", "kind", "path", "table", "options")
_HANDLER_KEYS = ("class", "input")
_QUERY_KEYS = ("sinks", "topics", "trigger", "pool", "output_mode")
_TABLES = "a mapping (table: view)"
_TOPICS = "a mapping (topic: view)"
_HANDLERS = "a mapping (handler name: its class and input)"


def _output_mode(mode: str, where: Path) -> OutputMode:
    if mode not in ("append", "update"):
        raise UserError(f"{where}: output_mode must be append or update, not {mode!r}")
    return mode  # type: ignore[return-value]


MAIN_QUERY = "main"


def trigger_duration(trigger: str) -> Duration:
    """A query's trigger as a duration: the time between micro-batches, or for `real-time
    [duration]` how long each batch lasts; ValueError when it is not one."""
    return parse_duration(trigger.removeprefix(REAL_TIME).strip() or REAL_TIME_BATCH)


def _query(entry: Any, name: str, at: At) -> QuerySpec:
    """One `queries:` entry. It takes for itself the tables of its `sinks` (which may be absent
    when it takes only `topics`); an entry that takes nothing overrides the derived `main`."""
    where = at.path
    query = mapping(entry, at, "a mapping (sinks, topics, trigger, ...)", known=_QUERY_KEYS)
    sinks = text_mapping(query.get("sinks"), at / "sinks", _TABLES, "a view name")
    topics = text_mapping(query.get("topics"), at / "topics", _TOPICS, "a view name")
    if not sinks and not topics and name != MAIN_QUERY:
        raise UserError(
            f"{where}: query '{name}' writes nothing (give it sinks or topics, or name it "
            f"'{MAIN_QUERY}' to set the trigger, pool or output mode of the derived query)"
        )
    trigger = optional(query, "trigger", at, "a duration such as '5 seconds', or real-time")
    if trigger and trigger.startswith(REAL_TIME) and sinks:
        raise UserError(
            f"{where}: query '{name}': trigger {REAL_TIME} is for a query that writes only "
            "topics (its tables need foreachBatch, which Real-Time Mode does not run)"
        )
    if trigger:
        try:
            trigger_duration(trigger)
        except ValueError as err:
            raise UserError(f"{where}: query '{name}': trigger: {err}") from None
    mode = optional(query, "output_mode", at, "append or update") or "append"
    return QuerySpec(
        name=name,
        sinks=sinks,
        trigger=trigger,
        pool=optional(query, "pool", at, "a scheduler pool name"),
        topics=topics,
        output_mode=_output_mode(mode, where),
    )


def _queries(spec: Mapping[str, Any], at: At) -> tuple[QuerySpec, ...]:
    """The pipeline's queries: the `queries:` entries that take outputs for themselves, and
    `main` writing every table and topic of `tables:`/`topics:` that no entry took."""
    path = at.path
    entries = mapping(spec.get("queries"), at / "queries", "a mapping (query name: how it runs)")
    queries = [_query(q, name, at / "queries" / name) for name, q in entries.items()]
    taken = {t for q in queries for t in (*q.sinks, *q.topics)}
    declared = text_mapping(spec.get("tables"), at / "tables", _TABLES, "a view name")
    sent = text_mapping(spec.get("topics"), at / "topics", _TOPICS, "a view name")
    tables = {t: v for t, v in declared.items() if t not in taken}
    topics = {t: v for t, v in sent.items() if t not in taken}
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


def _check_servers(kafka: Mapping[str, Any], where: str) -> None:
    """An empty broker list is refused at once: the broker check waited out its timeout on a
    broker without a name."""
    if "bootstrap.servers" in kafka and not str(kafka["bootstrap.servers"] or "").strip():
        raise UserError(f"{where}bootstrap.servers: empty; give HOST:PORT[,HOST:PORT]")


def _source(spec: Mapping[str, Any], at: At) -> SourceSpec:
    """The `source:` of a spec (`at` is its place in the file)."""
    if spec.get("source") is None:
        raise UserError(f"{at.path}: missing 'source'")
    src = mapping(spec["source"], at, "a mapping (view, kind, ...)", known=_SOURCE_KEYS)
    kind = required(src, "kind", at)
    if kind not in _KINDS:
        raise UserError(f"{at.path}: source kind must be one of {', '.join(_KINDS)}, not {kind!r}")
    # A delta source streams a lake table: it must name one.
    table = required if kind == "delta" else optional
    options = scalars(src.get("options"), at / "options", "a mapping (option: value)")
    check_source_options(kind, options, f"{at.path}: source.options.")
    return SourceSpec(
        view=required(src, "view", at, "a view name"),
        kind=kind,  # type: ignore[arg-type]
        path=optional(src, "path", at, "a folder"),
        options=options,
        table=table(src, "table", at, "a lake table name"),
    )


def _handler(entry: Any, name: str, at: At) -> HandlerSpec:
    """One `handlers:` entry: the class run over the `input` view, registered as `name`."""
    handler = mapping(entry, at, "a mapping (class, input)", known=_HANDLER_KEYS)
    return HandlerSpec(
        name=name,
        class_path=required(handler, "class", at, "module:Class"),
        input=required(handler, "input", at, "a view name"),
    )


def _load(path: Path) -> Pipeline:
    """Read and check one spec; anything wrong in it is a one-line UserError naming the
    file and the key."""
    top = At(path)
    spec = mapping(read_yaml(path), top, "a mapping of keys (name, source, ...)", known=_SPEC_KEYS)
    source = _source(spec, top / "source")
    handlers = tuple(
        _handler(h, name, top / "handlers" / name)
        for name, h in mapping(spec.get("handlers"), top / "handlers", _HANDLERS).items()
    )
    queries = _queries(spec, top)
    name = required(spec, "name", top)
    if name != path.stem:
        raise UserError(f"{path}: pipeline '{name}' must be named after its file '{path.stem}'")
    settings = scalars(
        spec.get("settings"), top / "settings", "a mapping (name: value)", allow_none=True
    )
    kafka = scalars(spec.get("kafka"), top / "kafka", "a mapping (setting: value)")
    _check_servers(kafka, f"{path}: kafka.")
    return Pipeline(
        name=name,
        path=path,
        description=optional(spec, "description", top) or "",
        source=source,
        sql_dir=(
            Project.of_pipelines(path.parent).root
            / required(spec, "sql", top, "a folder (sql/<pipeline>)")
        ).resolve(),
        handlers=handlers,
        queries=queries,
        settings={k: "" if v is None else str(v) for k, v in settings.items()},
        kafka={k: str(v) for k, v in kafka.items()},
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
        """Load one pipeline; an unknown name is a user error naming the folder and listing
        the known ones."""
        path = self.folder / f"{name}.yaml"
        if not path.is_file():
            known = ", ".join(self.names()) or "none"
            raise UserError(
                f"unknown pipeline '{name}' in {shown(self.folder)}/ (pipelines: {known}; "
                "--pipelines FOLDER/pipelines reads another project's)"
            )
        return _load(path)
