"""What a query's checkpoint was built from, kept beside it (`<checkpoint>/lake_plan.json`), so
a restart after a SQL, handler or setting change says what Spark cannot resume from before
Spark meets it (no Spark here).

A fingerprint lists the streaming part's state: each deduplication key, grouping and its
aggregates, watermark column, and each handler's key and state schema; and each table's write
mode and merge key. Settings Spark pins in the checkpoint (shuffle partitions, the state store)
are read from Spark's own offset log.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
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
    "conf_changes",
    "query_fingerprint",
    "read_fingerprint",
    "state_changes",
    "write_fingerprint",
]

FILE = "lake_plan.json"

#: Settings Spark records in a checkpoint's offset log and keeps on restart, whatever the
#: session says: a different value would be silently ignored.
PINNED_CONF = ("spark.sql.shuffle.partitions", "spark.sql.streaming.stateStore.providerClass")

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


def _handler_file(handler: StateHandler) -> str:
    return inspect.getsourcefile(type(handler)) or type(handler).__module__


def query_fingerprint(
    query: QueryPlan,
    *,
    steps: Mapping[str, SqlStep],
    handlers: Mapping[str, StateHandler],
    tables: Mapping[str, TableDef],
) -> Fingerprint:
    """The state a query's checkpoint holds and the tables it writes, as plain JSON values."""
    state: list[dict[str, Any]] = []
    for name in query.streaming_steps:
        if name in steps:
            pieces, file = _step_state(steps[name]), str(steps[name].path)
        elif name in handlers:
            handler = handlers[name]
            pieces = [
                ("handler key", list(handler.key)),
                ("handler state", [handler.state_schema]),
                ("handler state layout", [f"keys in {STATE_BUCKETS} buckets"]),
            ]
            file = _handler_file(handler)
        else:
            continue
        state += [{"step": name, "what": w, "value": v, "file": file} for w, v in pieces]
    written = {
        t: {"mode": tables[t].mode, "key": list(tables[t].key), "file": str(tables[t].path)}
        for t in query.query.sinks
    }
    return {"state": state, "tables": written}


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


def state_changes(old: Fingerprint, new: Fingerprint) -> list[str]:
    """What changed that the checkpoint's state cannot follow, one phrase each, naming the
    file: a changed key, state schema or watermark column, a stateful step added or removed,
    a table's write mode or merge key."""
    before = {(s["step"], s["what"]): s for s in old["state"]}
    after = {(s["step"], s["what"]): s for s in new["state"]}
    found: list[str] = []
    for key, now in after.items():
        was = before.get(key)
        if was is None:
            found.append(
                f"{now['file']}: {now['what']} of {now['step']} added ({_words(now['value'])})"
            )
        elif was["value"] != now["value"]:
            found.append(
                f"{now['file']}: {now['what']} of {now['step']} changed "
                f"({_words(was['value'])} -> {_words(now['value'])})"
            )
    found += [
        f"{was['file']}: the {was['what']} of {was['step']} is gone"
        for key, was in before.items()
        if key not in after
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
