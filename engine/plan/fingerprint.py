"""What a query's checkpoint was built from, kept beside it (`<checkpoint>/lake_plan.json`), so
a restart after a SQL, handler or setting change says what Spark cannot resume from before
Spark meets it (no Spark here).

A fingerprint lists the streaming part's state: each deduplication key, grouping and its
aggregates, watermark column, and each handler's key and state schema, with the time windows
each one's input is cut into; and each table's write mode and merge key. Settings Spark pins
in the checkpoint (shuffle partitions, the state store) are read from Spark's own offset log.
It also keeps the logic each table is computed from (a digest of each view's SQL and rules,
each handler's module, the settings handlers read), so a resumed run can say which tables
hold rows the old logic made.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlglot import exp

from engine.definitions.handler import STATE_BUCKETS, StateHandler
from engine.definitions.sql import SparkStreaming, SqlStep
from engine.definitions.tables import TableDef
from engine.lake.guard import write_json
from engine.plan.queries import QueryPlan

__all__ = [
    "PINNED_CONF",
    "SHUFFLE_PARTITIONS",
    "conf_changes",
    "logic_changes",
    "query_fingerprint",
    "read_fingerprint",
    "state_changes",
    "write_fingerprint",
]

FILE = "lake_plan.json"

#: Settings Spark records in a checkpoint's offset log and keeps on restart, whatever the
#: session says: a different value would be silently ignored.
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PINNED_CONF = (SHUFFLE_PARTITIONS, "spark.sql.streaming.stateStore.providerClass")

Fingerprint = dict[str, Any]


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect=SparkStreaming)


def _step_state(step: SqlStep) -> list[tuple[str, list[str]]]:
    """(what, value) for each piece of state a SQL step keeps."""
    state = [("watermark column", [column]) for column, _ in step.watermarks]
    query = step.tree.expression
    if step.distinct:
        state.append(("deduplication key", step.distinct_columns()))
    elif step.aggregates:
        state.append(("grouping", [_sql(g) for g in query.args["group"].expressions]))
        calls = [c for s in query.selects for c in s.find_all(exp.AggFunc)]
        state.append(("aggregates", [_sql(c) for c in calls]))
    return state


# Time windows cut a stateful step's input into the groups its state is kept by: a handler
# keyed by a window's start (sensor_cep's sample_group) holds the old windows' rows.
_WINDOWS = ("window", "session_window")


def _input_windows(
    step: str, start: str, steps: Mapping[str, SqlStep], *, file: str, known: Sequence[str] = ()
) -> dict[str, Any]:
    """The `input windows` piece of `step`: the time windows of view `start` and of every view
    it reads, as sqlglot writes them, but those in `known` (a grouping's); its file is the first
    view that has one, the file to change back (`file` when none has)."""
    found: list[str] = []
    where = ""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop(0)
        if name in seen or name not in steps:
            continue
        seen.add(name)
        for call in steps[name].tree.find_all(exp.Anonymous):
            window = _sql(call)
            if call.name.lower() in _WINDOWS and window not in found and window not in known:
                found.append(window)
                where = where or str(steps[name].path)
        todo += sorted(steps[name].references)
    return {"step": step, "what": "input windows", "value": found, "file": where or file}


def _handler_file(handler: StateHandler) -> str:
    return inspect.getsourcefile(type(handler)) or type(handler).__module__


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _logic(
    names: Sequence[str], steps: Mapping[str, SqlStep], handlers: Mapping[str, StateHandler]
) -> dict[str, dict[str, str]]:
    """What rows computed through these views and handlers depend on, by label: each view's
    SQL as sqlglot writes it (so layout and comments do not count) with its rules, each
    handler module's code, and the value of each setting a handler reads."""
    found: dict[str, dict[str, str]] = {}
    for name in names:
        if name in steps:
            step = steps[name]
            rules = [(e.name, e.condition, e.action) for e in step.expectations]
            sql = step.tree.sql(dialect=SparkStreaming, comments=False)
            found[f"view {name}"] = {"file": str(step.path), "digest": _digest(f"{sql}{rules}")}
        elif name in handlers:
            handler = handlers[name]
            file = _handler_file(handler)
            # Its syntax tree, so comments and layout do not count here either.
            code = ast.dump(ast.parse(Path(file).read_text())) if Path(file).is_file() else file
            found[f"handler {name}"] = {"file": file, "digest": _digest(code)}
            for setting in handler.defaults:
                # A setting is kept as it is, not digested: the change can then say it.
                value = str(handler.settings.get(setting, ""))
                found[f"setting {setting}"] = {"file": f"setting {setting}", "digest": value}
    return found


def query_fingerprint(
    query: QueryPlan,
    *,
    steps: Mapping[str, SqlStep],
    handlers: Mapping[str, StateHandler],
    tables: Mapping[str, TableDef],
    topic: str | None = None,
) -> Fingerprint:
    """The state a query's checkpoint holds, the Kafka topic its offsets are of, the tables it
    writes and the logic each table's rows come from, as plain JSON values."""
    state: list[dict[str, Any]] = []
    inputs = {n: o.handlers.input for o in query.outputs if o.handlers for n in o.handlers.names}
    for name in query.streaming_steps:
        windows: dict[str, Any] | None = None
        if name in steps:
            pieces, file = _step_state(steps[name]), str(steps[name].path)
            if steps[name].distinct or steps[name].aggregates:
                # Not those of its own grouping, which is a piece already.
                grouped = [v for what, values in pieces if what == "grouping" for v in values]
                windows = _input_windows(name, name, steps, file=file, known=grouped)
        elif name in handlers:
            handler = handlers[name]
            pieces = [
                ("handler key", list(handler.key)),
                ("handler state", [handler.state_schema]),
                ("handler state layout", [f"keys in {STATE_BUCKETS} buckets"]),
            ]
            file = _handler_file(handler)
            windows = _input_windows(name, inputs[name], steps, file=file)
        else:
            continue
        state += [{"step": name, "what": w, "value": v, "file": file} for w, v in pieces]
        state += [windows] if windows else []
    logic: dict[str, dict[str, str]] = {}
    written: dict[str, dict[str, Any]] = {}
    for t in query.query.sinks:
        reads = _logic(query.reads.get(t, ()), steps, handlers)
        logic.update(reads)
        written[t] = {
            "mode": tables[t].mode,
            "key": list(tables[t].key),
            "file": str(tables[t].path),
            "reads": sorted(reads),
        }
    found: Fingerprint = {"state": state, "tables": written, "logic": logic}
    return {**found, "topic": topic} if topic else found


def read_fingerprint(checkpoint: Path) -> Fingerprint | None:
    """The fingerprint kept beside a checkpoint; None for a new one, or one from before
    fingerprints were kept."""
    path = checkpoint / FILE
    return json.loads(path.read_text()) if path.is_file() else None


def write_fingerprint(checkpoint: Path, fingerprint: Fingerprint) -> None:
    """Keep the fingerprint of what the checkpoint is now run with."""
    if read_fingerprint(checkpoint) != fingerprint:
        write_json(checkpoint / FILE, fingerprint)


def _words(values: list[str]) -> str:
    return ", ".join(values) or "none"


# Pieces of state that fingerprints kept by older versions lack: such a checkpoint is held to
# the other pieces only, not refused as if they were added.
_NEWER_PIECES = ("input windows",)


def state_changes(old: Fingerprint, new: Fingerprint) -> list[str]:
    """What changed that the checkpoint's state cannot follow, one phrase each, naming the
    file: a changed key, state schema or watermark column, a stateful step added or removed,
    a table's write mode or merge key, the Kafka topic read (the offsets are that topic's:
    the Python source would read another topic from them, Spark's says its partitions went)."""
    before = {(s["step"], s["what"]): s for s in old["state"]}
    after = {(s["step"], s["what"]): s for s in new["state"]}
    found = [*_whole_steps(after, before, "added"), *_whole_steps(before, after, "is gone")]
    if old.get("topic") and new.get("topic") and old["topic"] != new["topic"]:
        found.append(f"source.topic changed ({old['topic']} -> {new['topic']})")
    steps_before = {step for step, _ in before}
    for key, now in after.items():
        was = before.get(key)
        if was is None and key[1] in _NEWER_PIECES:
            continue  # a checkpoint from before they were kept: nothing to compare
        if was is None and key[0] in steps_before:
            found.append(
                f"{now['file']}: {now['what']} of {now['step']} added ({_words(now['value'])})"
            )
        elif was is not None and was["value"] != now["value"]:
            found.append(
                f"{now['file']}: {now['what']} of {now['step']} changed "
                f"({_words(was['value'])} -> {_words(now['value'])})"
            )
    steps_after = {step for step, _ in after}
    found += [
        f"{was['file']}: the {was['what']} of {was['step']} is gone"
        for key, was in before.items()
        if key not in after and key[0] in steps_after
    ]
    for name, now in new["tables"].items():
        was = old["tables"].get(name)
        if was is None:
            continue
        if was["mode"] != now["mode"]:
            found.append(f"{now['file']}: lake.mode changed ({was['mode']} -> {now['mode']})")
        elif was["key"] != now["key"]:
            found.append(
                f"{now['file']}: lake.key changed ({_words(was['key'])} -> {_words(now['key'])})"
            )
    return found


def _whole_steps(
    these: Mapping[tuple[str, str], Mapping[str, Any]],
    others: Mapping[tuple[str, str], Mapping[str, Any]],
    verb: str,
) -> list[str]:
    """One phrase per stateful step of `these` that `others` has none of: a view that became
    (or stopped being) stateful is one change, whatever its pieces of state."""
    known = {step for step, _ in others}
    pieces: dict[str, list[Mapping[str, Any]]] = {}
    for (step, _), piece in these.items():
        if step not in known:
            pieces.setdefault(step, []).append(piece)
    return [
        f"{parts[0]['file']}: state of {step} {verb} ("
        + "; ".join(f"{p['what']} {_words(p['value'])}" for p in parts if p["value"])
        + ")"
        for step, parts in pieces.items()
    ]


def _digest_of(logic: Mapping[str, Mapping[str, str]], label: str) -> str | None:
    return logic[label]["digest"] if label in logic else None


def logic_changes(old: Fingerprint, new: Fingerprint) -> tuple[list[str], list[str]]:
    """What changed in the logic since the checkpoint last ran, that it resumes over (a view's
    SQL or rules, a handler's module, a setting a handler reads), one phrase each; and the
    tables whose rows written before stay as the old logic made them."""
    was, now = old.get("logic"), new["logic"]
    if was is None:  # a checkpoint from before the logic was kept
        return [], []
    # By digest: the files' paths differ in a copy of the project.
    changed = sorted(k for k in {*was, *now} if _digest_of(was, k) != _digest_of(now, k))
    found: list[str] = []
    for label in changed:
        before, after = was.get(label), now.get(label)
        if label.startswith("setting ") and before and after:
            found.append(f"{label} changed ({before['digest']} -> {after['digest']})")
        elif after is None:
            found.append(f"{label} is gone")
        else:
            found.append(f"{after['file']} {'changed' if before else 'added'}")
    tables = []
    for t, written in new["tables"].items():
        # A table reading other views than before (a handler's new input) changed too.
        before = old["tables"].get(t, {}).get("reads")
        if set(written["reads"]) & set(changed) or before not in (None, written["reads"]):
            tables.append(t)
    return found, tables


def _offset_log_conf(checkpoint: Path) -> Mapping[str, str]:
    """The settings in Spark's newest offset-log entry (`offsets/<batch>`: a version line, a
    JSON line with the batch's metadata, then one line per source)."""
    offsets = checkpoint / "offsets"
    batches = (
        [int(p.name) for p in offsets.iterdir() if p.name.isdigit()] if offsets.is_dir() else []
    )
    if not batches:
        return {}
    lines = (offsets / str(max(batches))).read_text().splitlines()
    return json.loads(lines[1]).get("conf", {}) if len(lines) > 1 else {}


def conf_changes(checkpoint: Path, current: Mapping[str, str]) -> list[str]:
    """Pinned settings whose value now differs from the one the checkpoint was built with."""
    pinned = _offset_log_conf(checkpoint)
    return [
        f"--conf {key}={current[key]}: checkpoint {checkpoint} was built with {pinned[key]}, "
        "which Spark keeps for its state"
        for key in PINNED_CONF
        if key in pinned and key in current and pinned[key] != current[key]
    ]
