"""What a run will do to the lake and its checkpoints, decided before any query starts (no
Spark): the tables it creates, evolves or rebuilds, the queries it starts, resumes or rebuilds,
and what it refuses and why. `run` stops at the first refusal; `run --dry-run` prints it all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urlparse

from engine.definitions.pipeline import Pipeline, QuerySpec
from engine.errors import UserError, first_line
from engine.lake.delta_source import rewritten, rewritten_version
from engine.lake.guard import WRITERS_DIR, check_readable, check_tables, last_committed
from engine.plan.fingerprint import (
    SHUFFLE_PARTITIONS,
    Fingerprint,
    conf_changes,
    logic_changes,
    query_fingerprint,
    read_fingerprint,
    state_changes,
)
from engine.plan.table_changes import TableChanges, lake_table_changes

if TYPE_CHECKING:
    from engine.plan import Plan

__all__ = [
    "Deployment",
    "QueryAction",
    "TableAction",
    "plan_deployment",
    "replay_problem",
    "set_aside",
]


@dataclass(frozen=True)
class TableAction:
    """What a run does to one table: create it, keep it, evolve its schema, rebuild it from
    the input (`shared`: only this pipeline's rows, other pipelines write it too), or refuse."""

    name: str
    verb: Literal["create", "keep", "evolve", "rebuild", "refuse"]
    changes: TableChanges | None = None
    shared: bool = False
    reasons: tuple[str, ...] = ()
    #: The pipeline and tables whose --full-refresh would take the refused change.
    remedy: Remedy | None = None

    def line(self) -> str:
        """The action as one line of `run --dry-run`."""
        if self.verb == "evolve":
            return f"table {self.name}: evolve ({self.changes.describe()})"  # type: ignore[union-attr]
        if self.verb == "rebuild":
            rows = "this pipeline's rows" if self.shared else "all rows"
            return f"table {self.name}: rebuild {rows} from the input (old versions stay readable)"
        if self.verb == "refuse":
            return f"table {self.name}: refused: {_with_remedy(self.reasons, self.remedy)}"
        return f"table {self.name}: {self.verb}"


@dataclass(frozen=True)
class QueryAction:
    """What a run does with one query's checkpoint, and the fingerprint it is run with."""

    name: str
    checkpoint: Path
    verb: Literal["start", "resume", "rebuild", "refuse"]
    fingerprint: Fingerprint = field(repr=False, compare=False)
    reasons: tuple[str, ...] = ()
    next_batch: int = 0
    #: On resuming: what changed in the logic since the last run, said to the user.
    notes: tuple[str, ...] = ()
    remedy: Remedy | None = None

    def line(self) -> str:
        """The action as one line of `run --dry-run`."""
        where = f"checkpoint {self.checkpoint}"
        if self.verb == "resume":
            return f"query {self.name}: resume at batch {self.next_batch} ({where})"
        if self.verb == "start":
            return f"query {self.name}: start from the beginning of the input ({where})"
        if self.verb == "rebuild":
            return (
                f"query {self.name}: start again from the beginning of the input (the old "
                f"{where} is set aside)"
            )
        return f"query {self.name}: refused: {_with_remedy(self.reasons, self.remedy)}"


@dataclass(frozen=True)
class Deployment:
    """The plan of a run against an existing lake."""

    pipeline: str
    tables: Mapping[str, TableAction]
    queries: Mapping[str, QueryAction]
    notes: tuple[str, ...] = ()

    @property
    def refusals(self) -> list[str]:
        """Every reason the run cannot go ahead (a query's `table t cannot take the change`
        left out where t's own reasons are said)."""
        found = [r for a in self.tables.values() for r in a.reasons]
        said = {_CANNOT_TAKE.format(t) for t, a in self.tables.items() if a.reasons}
        found += [
            r for a in self.queries.values() for r in a.reasons if r not in found and r not in said
        ]
        return found

    def check(self) -> None:
        """Raise every refusal as one UserError, with the advice once."""
        if not self.refusals:
            return
        actions = [*self.tables.values(), *self.queries.values()]
        remedies = [a.remedy for a in actions if a.remedy]
        tables = tuple(dict.fromkeys(t for r in remedies for t in r.tables))
        no_replay = next((r.no_replay for r in remedies if r.no_replay), None)
        remedy = Remedy(self.pipeline, tables, no_replay) if tables else None
        raise UserError(_with_remedy(self.refusals, remedy))

    def lines(self) -> list[str]:
        """What the run would do, one line per table and query, for `run --dry-run`."""
        return [
            *(a.line() for a in self.tables.values()),
            *(line for a in self.queries.values() for line in (a.line(), *a.notes)),
            *self.notes,
        ]


def _other_pipelines(path: Path, pipeline: str) -> list[str]:
    """The other pipelines that have written a table (engine/lake/guard.py keeps a file per
    pipeline and query that writes it)."""
    folder = path / WRITERS_DIR
    found = {p.name.split(".")[0] for p in folder.glob("*.json")} if folder.is_dir() else set()
    return sorted(found - {pipeline})


@dataclass(frozen=True)
class Remedy:
    """A refused change is undone, or taken by rebuilding these tables of the pipeline."""

    pipeline: str
    tables: tuple[str, ...]
    #: Why the input cannot be read again (a socket), when it never can: no rebuild takes it.
    no_replay: str | None = None

    def __str__(self) -> str:
        if self.no_replay:
            # --full-refresh is refused there: advising it sent the user round in a circle.
            return (
                f"undo the change, or write {', '.join(self.tables)} anew in another lake "
                f"(--lake): {self.no_replay}, so --full-refresh cannot rebuild them"
            )
        return (
            f"undo the change, or run with --full-refresh to rebuild {', '.join(self.tables)} "
            f"of {self.pipeline} from the input"
        )


def _with_remedy(reasons: Sequence[str], remedy: Remedy | None) -> str:
    """The reasons in one line, and the advice once after them."""
    return "; ".join([*reasons, *([str(remedy)] if remedy else [])])


_CANNOT_TAKE = "table {} cannot take the change"


def _files_gone(checkpoint: Path) -> list[str]:
    """Input files the checkpoint read that are no longer there (Spark's file-source log:
    `sources/0/<batch>` files of JSON lines, each with a file's URI)."""
    log = checkpoint / "sources" / "0"
    gone: list[str] = []
    entries = sorted(log.iterdir()) if log.is_dir() else []
    for entry in [e for e in entries if e.name.removesuffix(".compact").isdigit()]:
        for line in entry.read_text().splitlines()[1:]:
            path = unquote(urlparse(json.loads(line)["path"]).path)
            if not Path(path).exists() and path not in gone:
                gone.append(path)
    return gone


def _batch_files(checkpoint: Path, batch: int) -> list[Path]:
    """The input files Spark's file source lists again when the query resumes after `batch`:
    those of the newest batch up to it that read any, i.e. the log entries (each with its
    batchId) after that batch's predecessor's `logOffset` in the offset log, up to its own."""

    def log_offset(b: int) -> int:
        try:  # a version line, the batch's metadata, then one offset per source
            return int(
                json.loads((checkpoint / "offsets" / str(b)).read_text().splitlines()[2])[
                    "logOffset"
                ]
            )
        except (OSError, IndexError, ValueError, KeyError, TypeError):
            return -1

    last, before = log_offset(batch), log_offset(batch - 1)
    # A batch that read no file (one that only moved the watermark or fired timers, as a
    # --once run's last batch) keeps its predecessor's offset: the check was skipped after it.
    while batch > 0 and before == last:
        batch -= 1
        before = log_offset(batch - 1)
    first = before + 1
    log = checkpoint / "sources" / "0"
    entries = sorted(log.iterdir()) if log.is_dir() else []
    return [
        Path(unquote(urlparse(item["path"]).path))
        for entry in entries
        if entry.name.removesuffix(".compact").isdigit()
        for item in map(json.loads, entry.read_text().splitlines()[1:])
        if first <= item.get("batchId", -1) <= last
    ]


def _resume_folder_problem(
    pipeline: Pipeline, checkpoint: Path, batch: int, input_path: str | None, lake: Path
) -> str | None:
    """Why the file stream cannot resume in the input folder, or None. On resuming, Spark's
    file source lists the last committed batch's files again with the folder as their base,
    and fails ('Wrong basePath', exit 1) when they are outside it: --input changed."""
    if not (input_path or pipeline.source.kind == "files"):
        return None
    folder = pipeline.input_folder(input_path).resolve()
    outside = [f for f in _batch_files(checkpoint, batch) if not f.resolve().is_relative_to(folder)]
    if not outside:
        return None
    # The folder a run gave, not the file's own: with input kept by date, that one is a
    # subfolder, and a run there would miss every later day's files.
    before = _input_holding(lake, pipeline.name, checkpoint, outside[0]) or outside[0].parent
    return (
        f"--input {folder}: checkpoint {checkpoint} read {outside[0]} last, outside that folder, "
        f"and a file stream resumes only in the folder it read: give --input {before}, "
        "or read this folder from its start with other --checkpoints and --new-checkpoint"
    )


def _input_holding(lake: Path, pipeline: str, checkpoint: Path, file: Path) -> Path | None:
    """The input folder of the newest run of `pipeline` on `checkpoint`'s folder that holds
    `file`, from the run starts in the lake's event log; None when no run says."""
    from engine.lake.event_log import EventLog

    for row in reversed(EventLog(lake).read(pipeline=pipeline).to_pylist()):
        if row["kind"] != "run_start":
            continue
        run = json.loads(row["details"] or "{}").get("run", {})
        folder = Path(str(run.get("input", "")))
        same = run.get("checkpoints") == str(checkpoint.parent.parent)
        if same and folder.is_absolute() and file.resolve().is_relative_to(folder):
            return folder
    return None


def _kafka_start_lost(pipeline: Pipeline) -> str | None:
    from engine.sources.kafka_topic import KafkaOptions, kafka_options, log_starts

    options = KafkaOptions.parse(kafka_options(pipeline.source, pipeline.kafka))
    lost = {p: start for p, start in log_starts(options).items() if start > 0}
    if not lost:
        return None
    part, start = min(lost.items())
    return (
        f"kafka topic {options.topic} partition {part} starts at offset {start}: its retention "
        "no longer holds the start, so a replay would miss messages"
    )


def _no_replay(plan: Plan, input_path: str | None = None) -> str | None:
    """Why the pipeline's source can never be read again, or None (files, Kafka and Delta
    can, unless a file or a message is gone: `replay_problem` asks at the full refresh)."""
    if plan.pipeline.source.kind != "socket" or input_path is not None:
        return None
    return replay_problem(plan.pipeline, Path(), input_path=None)  # a socket's needs no checkpoint


def replay_problem(pipeline: Pipeline, checkpoint: Path, *, input_path: str | None) -> str | None:
    """Why the pipeline's source cannot be read again from its start, or None."""
    kind = "files" if input_path else pipeline.source.kind
    if kind == "socket":
        return f"pipeline {pipeline.name} reads a socket, which cannot send its lines again"
    if kind == "files":
        gone = _files_gone(checkpoint)
        if gone:
            return f"input file {gone[0]} was read before and is gone ({len(gone)} gone in all)"
    if kind == "kafka":
        return _kafka_start_lost(pipeline)
    return None


def _table_action(
    plan: Plan, name: str, lake: Path, *, rebuild: bool, input_path: str | None
) -> TableAction:
    table = plan.tables[name]
    path = lake / name
    others = _other_pipelines(path, plan.pipeline.name)
    if rebuild and not others:
        # A rebuilt table takes the DDL as it is now; one not made yet is only created.
        return TableAction(name, "rebuild" if (path / "_delta_log").is_dir() else "create")
    try:
        changes = lake_table_changes(table, path)
    except Exception:  # a log that does not read: the query's lake guard names the damage
        return TableAction(name, "keep")
    reasons = list(changes.refused) if changes else []
    if rebuild:
        if "pipeline" not in table.column_names:
            reasons.append(
                f"table {name}: also written by {', '.join(others)}, and it has no pipeline "
                f"column to tell {plan.pipeline.name}'s rows apart: it cannot be rebuilt alone"
            )
        elif reasons:
            reasons = [f"{r} (also written by {', '.join(others)})" for r in reasons]
    if reasons:
        no_replay = _no_replay(plan, input_path)
        remedy = None if others else Remedy(plan.pipeline.name, (name,), no_replay)
        return TableAction(name, "refuse", changes, bool(others), tuple(reasons), remedy)
    if rebuild:
        return TableAction(name, "rebuild", changes, shared=True)
    if changes is None:
        return TableAction(name, "create")
    return TableAction(name, "evolve" if changes.evolves else "keep", changes)


def _query_action(
    plan: Plan,
    spec: QuerySpec,
    checkpoint: Path,
    *,
    tables: Mapping[str, TableAction],
    conf: Mapping[str, str],
    lake: Path,
    rebuild: bool,
    new_checkpoint: bool,
    input_path: str | None,
) -> QueryAction:
    source = plan.pipeline.source
    fingerprint = query_fingerprint(
        plan.queries[spec.name],
        steps=plan.steps,
        handlers={n: h for n, (_, h) in plan.handlers.items()},
        tables=plan.tables,
        topic=source.options.get("topic") if source.kind == "kafka" and not input_path else None,
    )
    committed = last_committed(checkpoint)
    reasons = [_CANNOT_TAKE.format(t) for t in spec.sinks if tables[t].reasons]
    remedy = None
    if rebuild:
        problem = replay_problem(plan.pipeline, checkpoint, input_path=input_path)
        if problem:
            reasons.insert(0, f"--full-refresh: {problem}; the tables were left as they are")
        reasons += [r for t in spec.sinks if (r := _unreadable(t, lake / t))]
        verb = "refuse" if reasons else "rebuild"
        return QueryAction(spec.name, checkpoint, verb, fingerprint, tuple(reasons))
    try:
        check_tables(
            pipeline=plan.pipeline.name,
            query=spec.name,
            checkpoint=checkpoint,
            tables={t: lake / t for t in spec.sinks},
            new_checkpoint=new_checkpoint,
        )
    except UserError as err:
        reasons.append(first_line(err))
    if committed is not None:
        moved = _resume_folder_problem(plan.pipeline, checkpoint, committed, input_path, lake)
        reasons += [moved] if moved else []
        # Options with which Delta's stream goes past such versions.
        skips = {k.lower() for k, v in source.options.items() if str(v).lower() == "true"}
        if source.kind == "delta" and not skips & {"skipchangecommits", "ignorechanges"}:
            table = source.delta_table(lake, input_path)
            version = rewritten_version(table, checkpoint, committed)
            if version is not None:  # the run's Delta stream would stop there
                reasons.append(rewritten(table, version))
        old = read_fingerprint(checkpoint)
        changed = state_changes(old, fingerprint) if old else []
        changed += conf_changes(checkpoint, conf)
        if changed:
            # The advice once: each change needs the same remedy.
            what = "; ".join(changed)
            reasons.append(f"{what}: checkpoint {checkpoint} cannot resume from this")
            remedy = Remedy(plan.pipeline.name, tuple(spec.sinks), _no_replay(plan, input_path))
    if reasons:
        return QueryAction(
            spec.name, checkpoint, "refuse", fingerprint, tuple(reasons), remedy=remedy
        )
    if committed is None:
        return QueryAction(spec.name, checkpoint, "start", fingerprint)
    changed, tables = logic_changes(old, fingerprint) if old else ([], [])
    no_replay = _no_replay(plan, input_path) is not None
    notes = [_resumed_over(spec.name, changed, tables, old, no_replay)] if tables and old else []
    return QueryAction(
        spec.name, checkpoint, "resume", fingerprint, next_batch=committed + 1, notes=tuple(notes)
    )


def _rebuilt_queries(pipeline: Pipeline, full_refresh: Sequence[str] | None) -> set[str]:
    """The queries a full refresh starts again. A query's tables share its checkpoint, so
    rebuilding one replays the input into all of them; and every query of the pipeline that
    writes a rebuilt table starts again too, or its rows would be lost."""
    if full_refresh is None:
        return set()
    tables = set(full_refresh or pipeline.tables)
    rebuilt: set[str] = set()
    while True:
        more = {q.name for q in pipeline.queries if tables & set(q.sinks)} - rebuilt
        if not more:
            return rebuilt
        rebuilt |= more
        tables |= {t for q in pipeline.queries if q.name in more for t in q.sinks}


def _resumed_over(
    query: str, changed: Sequence[str], tables: Sequence[str], old: Fingerprint, no_replay: bool
) -> str:
    """The note of a change a checkpoint resumes over: the rows it leaves as they were, and
    the tables it adds, which get only the input read from now on."""
    kept = [t for t in tables if t in old["tables"]]
    added = [t for t in tables if t not in old["tables"]]
    left = []
    if kept:
        left.append(f"the rows already in {', '.join(kept)} stay as the old logic made them")
    if added:
        verb = "gets" if len(added) == 1 else "get"
        left.append(f"{', '.join(added)} {verb} only the input read from now on")
    # A source that cannot replay (a socket) has no rebuild to offer.
    rebuild = f" (--full-refresh {' '.join(tables)} rebuilds them from the input)"
    rebuild = "" if no_replay else rebuild
    return f"query {query}: {', '.join(changed)} since its last run; {'; '.join(left)}{rebuild}"


def plan_deployment(
    plan: Plan,
    *,
    lake: Path,
    checkpoint_root: Path,
    conf: Mapping[str, str],
    new_checkpoint: bool = False,
    full_refresh: Sequence[str] | None = None,
    input_path: str | None = None,
) -> Deployment:
    """Plan a run of `plan` against the lake and checkpoints as they are. `conf` holds the
    run's values of the settings Spark pins in a checkpoint; `full_refresh` lists the tables to
    rebuild (empty: all of the pipeline's; None: none)."""
    pipeline = plan.pipeline
    partitions = conf.get(SHUFFLE_PARTITIONS, "1").strip()
    if not (partitions.isdigit() and int(partitions) > 0):
        # Else compared with the checkpoint's count, and the advice was to rebuild.
        raise UserError(
            f"--conf {SHUFFLE_PARTITIONS}={partitions}: expected a whole number above 0"
        )
    if full_refresh:
        unknown = sorted(set(full_refresh) - set(pipeline.tables))
        if unknown:
            raise UserError(
                f"--full-refresh {unknown[0]}: not a table of pipeline {pipeline.name} "
                f"(its tables: {', '.join(pipeline.tables)})"
            )
    rebuilt = _rebuilt_queries(pipeline, full_refresh)
    tables: dict[str, TableAction] = {}
    for q in pipeline.queries:
        for name in q.sinks:
            if name not in tables:
                tables[name] = _table_action(
                    plan, name, lake, rebuild=q.name in rebuilt, input_path=input_path
                )
    queries = {
        q.name: _query_action(
            plan,
            q,
            checkpoint_root / pipeline.name / q.name,
            tables=tables,
            conf=conf,
            lake=lake,
            rebuild=q.name in rebuilt,
            new_checkpoint=new_checkpoint,
            input_path=input_path,
        )
        for q in pipeline.queries
    }
    notes = [
        f"topic {topic}: the replay sends its messages again"
        for q in pipeline.queries
        if q.name in rebuilt
        for topic in q.topics
    ]
    if full_refresh:
        extra = sorted({t for q in pipeline.queries if q.name in rebuilt for t in q.sinks})
        extra = [t for t in extra if t not in full_refresh]
        if extra:
            notes.append(
                f"--full-refresh also rebuilds {', '.join(extra)}: they share a query (and its "
                "checkpoint) with the tables named"
            )
    return Deployment(pipeline.name, tables, queries, tuple(notes))


def _unreadable(name: str, path: Path) -> str | None:
    # A rebuild empties a table with a new version, which a damaged log cannot take: said
    # before the checkpoint is set aside, not half way through (the guard's message says
    # what to do instead).
    if not (path / "_delta_log").is_dir():
        return None
    try:
        check_readable(name, path)
    except UserError as err:
        return f"--full-refresh cannot empty {name}: {first_line(err)}"
    return None


def set_aside(checkpoint: Path) -> Path | None:
    """Move a checkpoint out of the way before a rebuild (kept, in case it is wanted back)."""
    if not checkpoint.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = checkpoint.with_name(f"{checkpoint.name}.before-full-refresh-{stamp}")
    checkpoint.rename(target)
    return target
