"""Runs `engine.definitions.handler.StateHandler`s in Spark: every handler of one key in a single
applyInPandasWithState call, fed columns (lists of plain values) rather than rows.

Spark's Python state API costs milliseconds per group and batch whatever the group holds, so
groups are not keys but `STATE_BUCKETS` buckets of keys (a hash of the key): one call takes all the
keys of a bucket, converts their columns once, and runs each key's handlers in a loop. A
bucket's state is one row: its keys' handler states, pickled as plain tuples, and the earliest
timer among them, which is the bucket's timeout.

Output of `apply_handlers`, one flat row type: `_emit` names the handler a row comes from (""
for a passthrough row), then the passthrough columns, then `<handler>__<column>` for each
column of each handler's `output_schema`; a row's columns of other kinds are NULL. A handler's
counts (`Step.counts`) leave a bucket's call as one more row, `_emit` `<handler>#counts` with
a column per name it declares (`counted`); `apply_handlers` sums them as Spark observed metrics
(`handler_counts:<handler>` in the query's progress) and drops those rows and columns.
Per key, each handler has its state (a `state_schema` tuple) and its own timer (ms since the
epoch); only handlers whose timer is due expire. Every handler sees every row of its key; one
whose `update` changes nothing (equal state, no rows) is taken as not concerned: its timer
stays, and it expires at once if that timer is due, as it would have with an operator of its
own. A key without rows in a batch expires in that batch when a timer of it is due, as Spark
would have timed it out had it been a group of its own.
"""

from __future__ import annotations

import copyreg
import functools
import pickle
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegralType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from engine.definitions.handler import (
    PROJECT_MODULE_PREFIX,
    STATE_BUCKETS,
    StateHandler,
    Step,
    TimeoutMode,
)

__all__ = [
    "COUNTS_METRIC",
    "EMIT",
    "STATE_TYPE",
    "HandlerGroup",
    "apply_handler",
    "apply_handlers",
    "group_timeout_mode",
    "handler_counts",
    "handler_rows",
    "micros",
    "passthrough_rows",
    "stable_order",
]

#: The output column naming a row's handler; "" for a passthrough row.
EMIT = "_emit"
#: A handler's counts in a query's progress (`observedMetrics`): this prefix, then its name.
COUNTS_METRIC = "handler_counts:"
_COUNTS_ROW = "#counts"  # after the handler's name in EMIT
#: A bucket's state row: its keys' handler states (pickled plain tuples), the earliest timer.
STATE_TYPE = StructType(
    [StructField("keys", BinaryType(), False), StructField("due", LongType(), True)]
)
_BUCKET = "_bucket"

_TIMEOUTS = {
    "none": GroupStateTimeout.NoTimeout,
    "event_time": GroupStateTimeout.EventTimeTimeout,
    "processing_time": GroupStateTimeout.ProcessingTimeTimeout,
}
# Session time zones that need no conversion: Spark hands TIMESTAMP columns to pandas as naive
# wall times of the session zone.
_UTC_ZONES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "+00:00", "Zulu", "Universal"}
_NAT = np.iinfo(np.int64).min  # numpy's NaT as int64, in every unit
_LAST = np.iinfo(np.int64).max


def _count_column(handler: str, name: str) -> str:
    return f"_count__{handler}__{name}"


def handler_counts(observed: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """The counts per handler and name in a progress event's observed metrics (non-zero)."""
    found: dict[str, dict[str, int]] = {}
    for metric, row in observed.items():
        if metric.startswith(COUNTS_METRIC):
            counts = {k: int(v) for k, v in row.asDict().items() if v}
            if counts:
                found[metric.removeprefix(COUNTS_METRIC)] = counts
    return found


# --- value conversions (numpy, no per-row Python) ---------------------------------------------


def micros(values: pd.Series, zone: str | None = None) -> np.ndarray:
    """Microseconds since the epoch (int64) of a timestamp column; NaT stays numpy's NaT value.
    Naive values are wall times in `zone` (None: UTC), tz-aware ones are exact."""
    if values.dtype.kind != "M":  # e.g. datetime objects: let pandas type them first
        values = pd.to_datetime(values)
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        values = values.dt.tz_convert(None)
    elif zone is not None:
        # Spark's own rule when it reads naive pandas times back (standard time on a fold).
        values = values.dt.tz_localize(zone, ambiguous=False).dt.tz_convert(None)
    return values.to_numpy().astype("datetime64[us]", copy=False).view(np.int64)


def stable_order(keys: Sequence[np.ndarray]) -> np.ndarray | None:
    """Row positions sorted by `keys` (first key first), stable, NaN last, as pandas'
    `sort_values(kind="stable")`; None when the rows already are in that order."""
    if not keys or len(keys[0]) < 2:
        return None
    if any(k.dtype.kind not in "biuf" for k in keys):  # strings, dates: pandas compares them
        frame = pd.DataFrame(dict(enumerate(keys)))
        return frame.sort_values(list(range(len(keys))), kind="stable").index.to_numpy()
    first = keys[0]
    # The common case, checked in O(n): already ascending on the first key alone.
    if (first[1:] > first[:-1]).all() or (len(keys) == 1 and (first[1:] >= first[:-1]).all()):
        return None
    return np.lexsort(list(reversed(keys)))


def _objects(values: pd.Series, zone: str | None, is_time: bool) -> np.ndarray:
    """A passthrough column as Python values, timestamps as int microseconds (None for NULL)."""
    if is_time:
        us = micros(values, zone)
        out = us.astype(object)
        out[us == _NAT] = None
        return out
    if values.dtype.kind in "biufO":  # numpy turns these into Python scalars in an object array
        return values.to_numpy()
    return values.astype(object).to_numpy()


class _Columns:
    """A bucket's input rows; each column is converted once and shared by its keys."""

    def __init__(self, frame: pd.DataFrame, zones: Mapping[str, str | None]) -> None:
        self.frame = frame
        self.zones = zones  # timestamp column -> the zone of its naive values (None: UTC)
        self._arrays: dict[str, np.ndarray] = {}
        self._nat: dict[str, np.ndarray | None] = {}

    def array(self, name: str) -> np.ndarray:
        found = self._arrays.get(name)
        if found is None:
            series = self.frame[name]
            if name in self.zones:
                found = micros(series, self.zones[name])
                nat = found == _NAT
                self._nat[name] = nat if nat.any() else None
            else:
                found = series.to_numpy()
            self._arrays[name] = found
        return found

    def nat(self, name: str) -> np.ndarray | None:
        self.array(name)
        return self._nat.get(name)

    def keys(self, names: Sequence[str]) -> Iterator[tuple[tuple[Any, ...], _Rows]]:
        """Each key of the rows (NULL as None) with its rows, in the order they came."""
        codes, uniques = [], []
        for name in names:
            code, unique = pd.factorize(self.frame[name], use_na_sentinel=False)
            codes.append(code)
            uniques.append([None if pd.isna(v) else v for v in unique.tolist()])
        if len(codes) == 1:
            group = codes[0]
            firsts = np.arange(len(uniques[0]))[:, None]
        else:
            firsts, group = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
            group = group.reshape(-1)
        order = np.argsort(group, kind="stable")
        ends = np.cumsum(np.bincount(group, minlength=len(firsts))).tolist()
        start = 0
        for g, end in enumerate(ends):
            key = tuple(uniques[c][firsts[g][c]] for c in range(len(names)))
            yield key, _Rows(self, order[start:end])
            start = end


class _Rows:
    """One key's rows of a bucket's `_Columns`."""

    def __init__(self, columns: _Columns, at: np.ndarray) -> None:
        self.columns = columns
        self.at = at  # positions in the bucket's rows
        self._orders: dict[tuple[str, ...], np.ndarray | None] = {}

    def _sort_key(self, name: str) -> np.ndarray:
        values = self.columns.array(name)[self.at]
        nat = self.columns.nat(name)
        return values if nat is None else np.where(nat[self.at], _LAST, values)  # NaT last

    def order(self, by: tuple[str, ...]) -> np.ndarray | None:
        if by not in self._orders:
            self._orders[by] = stable_order([self._sort_key(c) for c in by]) if by else None
        return self._orders[by]

    def events(self, handler: StateHandler) -> dict[str, list[Any]]:
        """The handler's columns as lists of plain values, in its `order_by` order."""
        order = self.order(tuple(handler.order_by))
        at = self.at if order is None else self.at[order]
        out: dict[str, list[Any]] = {}
        for name in handler.columns:
            column = self.columns.array(name)[at].tolist()
            nat = self.columns.nat(name)
            if nat is not None:
                for i in np.flatnonzero(nat[at]).tolist():
                    column[i] = None
            out[name] = column
        return out


# --- the per-key function ---------------------------------------------------------------------


def group_timeout_mode(handlers: Mapping[str, StateHandler]) -> TimeoutMode:
    """The one timeout mode other than "none" among the handlers ("none" if there is none)."""
    modes = {name: h.timeout_mode for name, h in handlers.items() if h.timeout_mode != "none"}
    if len(set(modes.values())) > 1:
        listed = ", ".join(f"{name} ({mode})" for name, mode in modes.items())
        raise ValueError(
            "handlers with one key run in one state-store call, which has one kind of "
            f"timeout; these use different ones: {listed}"
        )
    return next(iter(modes.values()), "none")


@dataclass(frozen=True)
class _Slot:
    """A handler of the group, with what the worker needs of its schemas."""

    name: str
    handler: StateHandler
    mode: TimeoutMode
    timeout_ms: int | None  # processing-time duration
    outputs: int  # columns of its output rows
    whole: Mapping[int, str]  # the output columns of a whole-number type, by position


def _step(slot: _Slot, step: Any, method: str = "update") -> Step:
    """The handler's answer, if it is a Step (a forgotten `return` gave an AttributeError from
    this module)."""
    if not isinstance(step, Step):
        raise TypeError(f"handler {slot.name}: {method} returned {step!r}, not a Step")
    return step


def _check_whole(slot: _Slot, column: str, values: Sequence[Any]) -> None:
    """A fraction for a whole-number column: Arrow would cut it (509.7 becomes 509) without a
    word, and a NaN would become NULL."""
    for value in values:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(
                f"handler {slot.name}: output column {column} cannot hold {value!r}; round it "
                "in the handler, or give the column a type with fractions in output_schema"
            )


def _is_time(data_type: DataType) -> bool:
    return isinstance(data_type, TimestampType | TimestampNTZType)


#: A handler's state object and timer (ms since the epoch) for one key.
_Held = tuple[Any, int | None]


def _is_due(rows: Sequence[tuple[Any, int | None]], now: int) -> bool:
    return any(timer is not None and timer < now for _, timer in rows)  # Spark's test: <


class HandlerGroup:
    """The per-bucket function `apply_handlers` gives Spark: plain Python over pandas and a
    GroupState, so it is testable without Spark. Schemas are given parsed (StructType)."""

    def __init__(
        self,
        handlers: Mapping[str, StateHandler],
        *,
        input_schema: StructType,
        output_schemas: Mapping[str, StructType],
        passthrough: Sequence[str] = (),
        time_zone: str = "UTC",
    ) -> None:
        if not handlers:
            raise ValueError("apply_handlers needs at least one handler")
        keys = {name: tuple(h.key) for name, h in handlers.items()}
        if len(set(keys.values())) > 1:
            raise ValueError(f"handlers run together must share one key, not {keys}")
        self.key = next(iter(keys.values()))
        self.mode = group_timeout_mode(handlers)
        self.passthrough = tuple(passthrough)
        self.slots = tuple(
            _Slot(
                name=name,
                handler=h,
                mode=h.timeout_mode,
                timeout_ms=(
                    None
                    if h.timeout_mode != "processing_time" or h.timeout is None
                    else int(h.timeout.total_seconds() * 1000)
                ),
                outputs=len(output_schemas[name].fields),
                whole={
                    j: f"{f.name} {f.dataType.simpleString().upper()}"
                    for j, f in enumerate(output_schemas[name].fields)
                    if isinstance(f.dataType, IntegralType)
                },
            )
            for name, h in handlers.items()
        )
        fields = {f.name: f for f in input_schema.fields}
        zone = None if time_zone in _UTC_ZONES else time_zone
        # Timestamp input column -> the zone its naive pandas values are in (NTZ: none).
        self._zones = {
            n: (zone if isinstance(f.dataType, TimestampType) else None)
            for n, f in fields.items()
            if _is_time(f.dataType)
        }
        #: Columns selected before the groupBy: key, what the handlers read, passthrough.
        read = (c for h in handlers.values() for c in (*h.columns, *h.order_by))
        self.input_columns = tuple(dict.fromkeys([*self.key, *read, *passthrough]))
        self.output_type = StructType(
            [
                StructField(EMIT, StringType(), False),
                *(StructField(c, fields[c].dataType, True) for c in self.passthrough),
                *(
                    StructField(f"{name}__{f.name}", f.dataType, True)
                    for name, schema in output_schemas.items()
                    for f in schema.fields
                ),
                *(
                    StructField(_count_column(name, c), LongType(), True)
                    for name, h in handlers.items()
                    for c in h.counted
                ),
            ]
        )
        self.state_type = STATE_TYPE
        names = self.output_type.names
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:
            raise ValueError(f"output column names clash: {clashes}")

    # Spark calls this once per bucket and batch (or per timed-out bucket).
    def __call__(
        self, bucket: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        stored, due = self.stored(state.get if state.exists else None)
        held: dict[tuple[Any, ...], list[_Held]] = {}
        emitted: dict[int, list[tuple[Any, ...]]] = {}
        counts: list[Counter[str]] = [Counter() for _ in self.slots]
        now = self._now(state)
        batch = None
        if not state.hasTimedOut:
            chunks = list(frames)
            batch = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
            for key, rows in _Columns(batch, self._zones).keys(self.key):
                entries = held[key] = self._entries(stored.pop(key, None))
                for i, slot in enumerate(self.slots):
                    obj, timer = entries[i]
                    step = _step(slot, slot.handler.update(key, obj, rows.events(slot.handler)))
                    if step.outputs or (step.state is not obj and step.state != obj):
                        entries[i] = self._apply(i, step, now, emitted, counts)
                        continue
                    counts[i].update(step.counts)
                    # Nothing for this handler in these rows: as if its own operator had not
                    # seen the key, its timer stays, and fires now if due.
                    if obj is not None and timer is not None and timer < now:  # Spark's test: <
                        step = _step(slot, slot.handler.expire(key, obj), "expire")
                        entries[i] = self._apply(i, step, now, emitted, counts)
        if due is not None and due < now:
            # Keys without rows whose timer is due: Spark would have timed them out now.
            for key in [k for k, rows in stored.items() if _is_due(rows, now)]:
                entries = held[key] = self._entries(stored.pop(key))
                for i, slot in enumerate(self.slots):
                    obj, timer = entries[i]
                    if obj is not None and timer is not None and timer < now:
                        step = _step(slot, slot.handler.expire(key, obj), "expire")
                        entries[i] = self._apply(i, step, now, emitted, counts)
        for slot, counted in zip(self.slots, counts, strict=True):
            unknown = sorted(set(counted) - set(slot.handler.counted))
            if unknown:
                raise ValueError(
                    f"handler {slot.name} counted {', '.join(unknown)}, which its class does "
                    f"not declare in `counted` {slot.handler.counted}"
                )
        self._store(state, stored, held)
        frame = self._frame(batch, emitted, counts)
        if frame is not None:
            yield frame

    def _now(self, state: GroupState) -> int:
        """The time timers are compared with: the watermark, the batch's clock, or none."""
        if self.mode == "event_time":
            return state.getCurrentWatermarkMs()
        if self.mode == "processing_time":
            return state.getCurrentProcessingTimeMs()
        return 0

    def _entries(self, rows: Sequence[tuple[Any, int | None]] | None) -> list[_Held]:
        """A key's stored (state row, timer) per handler as (state object, timer)."""
        if rows is None:
            return [(None, None)] * len(self.slots)
        return [
            (None, None) if row is None else (slot.handler.state_from_row(row), timer)
            for slot, (row, timer) in zip(self.slots, rows, strict=True)
        ]

    def _apply(
        self,
        i: int,
        step: Step,
        now: int,
        emitted: dict[int, list[tuple[Any, ...]]],
        counts: list[Counter[str]],
    ) -> _Held:
        """Record the step's rows and counts; the handler's new (state, timer ms)."""
        counts[i].update(step.counts)
        if step.outputs:
            emitted.setdefault(i, []).extend(step.outputs)
        slot = self.slots[i]
        if step.state is None:
            return None, None
        if step.timer_us is not None and slot.mode == "none":
            # Else the timer would be dropped and expire never run, without a word.
            raise ValueError(
                f"handler {slot.name}: a Step with timer_us needs a timeout_mode, event_time "
                "(or processing_time, which times out after `timeout` instead); it is none"
            )
        if slot.mode == "event_time" and step.timer_us is not None:
            # Spark refuses a timer behind the watermark; such a timer is due now anyway.
            return step.state, max(step.timer_us // 1000, now + 1)
        if slot.mode == "processing_time" and slot.timeout_ms is not None:
            return step.state, now + slot.timeout_ms
        return step.state, None

    def stored(self, row: Sequence[Any] | None) -> tuple[dict[tuple[Any, ...], Any], int | None]:
        """A bucket's state row read back: key -> per handler (state row or None, timer ms),
        and the earliest timer."""
        if row is None:
            return {}, None
        return pickle.loads(row[0]), row[1]

    def _store(
        self,
        state: GroupState,
        stored: dict[tuple[Any, ...], Any],
        held: Mapping[tuple[Any, ...], Sequence[_Held]],
    ) -> None:
        """Keys left untouched stay as read; touched keys are stored again, or dropped when no
        handler keeps state for them."""
        for key, entries in held.items():
            if any(obj is not None for obj, _ in entries):
                stored[key] = tuple(
                    (None, None) if obj is None else (slot.handler.state_to_row(obj), timer)
                    for slot, (obj, timer) in zip(self.slots, entries, strict=True)
                )
        if not stored:
            state.remove()
            return
        timers = [t for rows in stored.values() for _, t in rows if t is not None]
        due = min(timers) if timers else None
        state.update((pickle.dumps(stored, protocol=pickle.HIGHEST_PROTOCOL), due))
        if due is None:
            return
        # The bucket's timeout is its earliest timer; the others wait in the state.
        if self.mode == "event_time":
            state.setTimeoutTimestamp(due)
        elif self.mode == "processing_time":
            state.setTimeoutDuration(max(1, due - state.getCurrentProcessingTimeMs()))

    def _frame(
        self,
        batch: pd.DataFrame | None,
        emitted: Mapping[int, list[tuple[Any, ...]]],
        counts: Sequence[Counter[str]],
    ) -> pd.DataFrame | None:
        """Passthrough rows (the input rows), each handler's rows, then a row of counts per
        handler that counted, in one frame."""
        passed = batch if self.passthrough else None
        n = 0 if passed is None else len(passed)
        counted = [i for i, c in enumerate(counts) if any(c.values())]
        total = n + sum(len(rows) for rows in emitted.values()) + len(counted)
        if not total:
            return None
        # One block of Python objects, timestamps as int microseconds (Arrow takes ints as
        # such): pandas builds it, and Spark concatenates the keys' frames, several times
        # faster than typed columns (measured: datetime64 columns tripled the per-key cost).
        # tests/unit/test_handler_adapter.py checks the result through pyspark's own
        # pandas-to-Arrow step, so an upgrade that reads it otherwise fails there.
        out = np.full((total, len(self.output_type.fields)), None, dtype=object)
        if passed is not None:
            out[:n, 0] = ""
            for col, name in enumerate(self.passthrough, start=1):
                out[:n, col] = _objects(passed[name], self._zones.get(name), name in self._zones)
        at, col = n, 1 + len(self.passthrough)
        for i, slot in enumerate(self.slots):
            rows = emitted.get(i)
            if rows:
                if len(rows[0]) != slot.outputs:
                    raise ValueError(
                        f"handler {slot.name} emitted a row of {len(rows[0])} values; its "
                        f"output_schema has {slot.outputs} columns"
                    )
                end = at + len(rows)
                out[at:end, 0] = slot.name
                for j, values in enumerate(zip(*rows, strict=True)):
                    if j in slot.whole:
                        _check_whole(slot, slot.whole[j], values)
                    # fromiter keeps a list value (an array<struct> cell) as one element.
                    out[at:end, col + j] = np.fromiter(values, dtype=object, count=len(rows))
                at = end
            col += slot.outputs
        for i, slot in enumerate(self.slots):
            if i in counted:
                out[at, 0] = slot.name + _COUNTS_ROW
                for j, name in enumerate(slot.handler.counted):
                    out[at, col + j] = counts[i][name]
                at += 1
            col += len(slot.handler.counted)
        return pd.DataFrame(out, columns=self.output_type.names, dtype=object, copy=False)


# --- Spark entry points -----------------------------------------------------------------------


def _struct(ddl: str) -> StructType:
    parsed = DataType.fromDDL(ddl)  # needs the JVM: on the driver only
    if not isinstance(parsed, StructType):
        raise ValueError(f"not a row type: {ddl!r}")
    return parsed


def _send_by_value(module: Any) -> None:
    """Pickle `module`'s classes and functions whole, for workers that cannot import it."""
    # A class sent whole takes its attributes along, and Python 3.11's cached_property holds a
    # lock that pickle cannot copy ("cannot pickle '_thread.RLock' object"): one is sent as
    # its function and name instead.
    copyreg.pickle(functools.cached_property, _reduce_cached_property)
    cloudpickle.register_pickle_by_value(module)


def _reduce_cached_property(prop: functools.cached_property) -> tuple[Callable[..., Any], tuple]:
    return _cached_property, (prop.func, prop.attrname)


def _cached_property(func: Callable[[Any], Any], name: str | None) -> functools.cached_property:
    prop = functools.cached_property(func)
    prop.attrname = name  # set by the class statement, which a class sent whole does not run
    return prop


def apply_handlers(
    df: DataFrame, handlers: Mapping[str, StateHandler], *, passthrough: Sequence[str] = ()
) -> DataFrame:
    """Run the handlers (one key) over `df` in one applyInPandasWithState by bucket of keys,
    with every input row's `passthrough` columns; layout in the module doc."""
    for h in handlers.values():
        _struct(h.state_schema)  # a bad DDL is refused here, as the fingerprint records it
        module = type(h).__module__
        if module.startswith(PROJECT_MODULE_PREFIX):
            # A project's own handler file: Spark's workers cannot import it by that name.
            _send_by_value(sys.modules[module])
    group = HandlerGroup(
        handlers,
        input_schema=df.schema,
        output_schemas={name: _struct(h.output_schema) for name, h in handlers.items()},
        passthrough=passthrough,
        time_zone=df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC",
    )

    def run(
        bucket: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        return group(bucket, frames, state)

    # Only the columns someone reads cross to Python: Arrow conversion is most of the cost.
    bucket = F.pmod(F.xxhash64(*group.key), F.lit(STATE_BUCKETS)).alias(_BUCKET)
    out = (
        df.select(bucket, *group.input_columns)
        .groupBy(_BUCKET)
        .applyInPandasWithState(
            run,
            outputStructType=group.output_type,
            stateStructType=group.state_type,
            outputMode="append",
            timeoutConf=_TIMEOUTS[group.mode],
        )
    )
    # Counts reach the run as observed metrics, which Spark sums over the batch's tasks and
    # reports in the query's progress, locally and over Spark Connect alike.
    count_columns = []
    for name, h in handlers.items():
        if h.counted:
            columns = [_count_column(name, c) for c in h.counted]
            sums = [F.sum(c).alias(n) for c, n in zip(columns, h.counted, strict=True)]
            out = out.observe(COUNTS_METRIC + name, *sums)
            count_columns += columns
    if not count_columns:
        return out
    return out.where(~F.col(EMIT).endswith(_COUNTS_ROW)).drop(*count_columns)


def handler_rows(out: DataFrame, name: str, handler: StateHandler) -> DataFrame:
    """The rows `apply_handlers` emitted for handler `name`, with its own column names."""
    columns = _struct(handler.output_schema).names
    return out.where(F.col(EMIT) == name).select(*(F.col(f"{name}__{c}").alias(c) for c in columns))


def passthrough_rows(out: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The input rows `apply_handlers` passed through, as they came."""
    return out.where(F.col(EMIT) == "").select(*columns)


def apply_handler(df: DataFrame, handler: StateHandler) -> DataFrame:
    """One handler alone: its rows, with its own column names (see `apply_handlers`)."""
    name = "handler"
    return handler_rows(apply_handlers(df, {name: handler}), name, handler)
