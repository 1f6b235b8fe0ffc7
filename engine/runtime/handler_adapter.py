"""Runs `engine.definitions.handler.StateHandler`s in Spark: every handler of one key in a single
applyInPandasWithState call, fed columns (lists of plain values) rather than rows.

Output of `apply_handlers`, one flat row type: `_emit` names the handler a row comes from (""
for a passthrough row), then the passthrough columns, then `<handler>__<column>` for each
column of each handler's `output_schema`; a row's columns of other kinds are NULL.
State, one row per key: per handler its `state_schema` fields as `<handler>__<field>`, then
`<handler>__present` and `<handler>__timer` (its own timer, ms since the epoch). The key's
timeout is the earliest timer; only handlers whose timer is due expire. Every handler sees
every row of its key; one whose `update` changes nothing (equal state, no rows) is taken as
not concerned: its timer stays, and it expires at once if that timer is due, as it would
have with an operator of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import (
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from engine.definitions.handler import StateHandler, Step, TimeoutMode

__all__ = [
    "EMIT",
    "CountsParam",
    "HandlerGroup",
    "apply_handler",
    "apply_handlers",
    "group_timeout_mode",
    "handler_rows",
    "micros",
    "passthrough_rows",
    "stable_order",
]

#: The output column naming a row's handler; "" for a passthrough row.
EMIT = "_emit"

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


class CountsParam(AccumulatorParam):
    """Sums `Step.counts` from the Python workers into one Counter on the driver."""

    def zero(self, value: Counter[str]) -> Counter[str]:
        return Counter()

    def addInPlace(self, value1: Counter[str], value2: Counter[str]) -> Counter[str]:
        value1.update(value2)
        return value1


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


class _Batch:
    """A key's input rows; each column is converted once and shared by the handlers."""

    def __init__(self, frame: pd.DataFrame, zones: Mapping[str, str | None]) -> None:
        self.frame = frame
        self.zones = zones  # timestamp column -> the zone of its naive values (None: UTC)
        self._arrays: dict[str, np.ndarray] = {}
        self._nat: dict[str, np.ndarray | None] = {}
        self._orders: dict[tuple[str, ...], np.ndarray | None] = {}

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

    def _sort_key(self, name: str) -> np.ndarray:
        values = self.array(name)
        nat = self._nat.get(name)
        return values if nat is None else np.where(nat, _LAST, values)  # NaT last, as pandas

    def order(self, by: tuple[str, ...]) -> np.ndarray | None:
        if by not in self._orders:
            self._orders[by] = stable_order([self._sort_key(c) for c in by]) if by else None
        return self._orders[by]

    def events(self, handler: StateHandler) -> dict[str, list[Any]]:
        """The handler's columns as lists of plain values, in its `order_by` order."""
        order = self.order(tuple(handler.order_by))
        out: dict[str, list[Any]] = {}
        for name in handler.columns:
            values = self.array(name)
            nat = self._nat.get(name)
            if order is not None:
                values = values[order]
                nat = None if nat is None else nat[order]
            column = values.tolist()
            if nat is not None:
                for i in np.flatnonzero(nat).tolist():
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
    width: int  # fields of its state row
    outputs: int  # columns of its output rows


def _is_time(data_type: DataType) -> bool:
    return isinstance(data_type, TimestampType | TimestampNTZType)


class HandlerGroup:
    """The per-key function `apply_handlers` gives Spark: plain Python over pandas and a
    GroupState, so it is testable without Spark. Schemas are given parsed (StructType)."""

    def __init__(
        self,
        handlers: Mapping[str, StateHandler],
        *,
        input_schema: StructType,
        state_schemas: Mapping[str, StructType],
        output_schemas: Mapping[str, StructType],
        passthrough: Sequence[str] = (),
        time_zone: str = "UTC",
        counts: Mapping[str, Accumulator] | None = None,
    ) -> None:
        if not handlers:
            raise ValueError("apply_handlers needs at least one handler")
        keys = {name: tuple(h.key) for name, h in handlers.items()}
        if len(set(keys.values())) > 1:
            raise ValueError(f"handlers run together must share one key, not {keys}")
        self.key = next(iter(keys.values()))
        self.mode = group_timeout_mode(handlers)
        self.passthrough = tuple(passthrough)
        self.counts = dict(counts or {})
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
                width=len(state_schemas[name].fields),
                outputs=len(output_schemas[name].fields),
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
            ]
        )
        self.state_type = StructType(
            [
                field
                for name, schema in state_schemas.items()
                for field in (
                    *(StructField(f"{name}__{f.name}", f.dataType, True) for f in schema.fields),
                    StructField(f"{name}__present", BooleanType(), True),
                    StructField(f"{name}__timer", LongType(), True),
                )
            ]
        )
        for names, what in ((self.output_type.names, "output"), (self.state_type.names, "state")):
            clashes = sorted({n for n in names if names.count(n) > 1})
            if clashes:
                raise ValueError(f"{what} column names clash: {clashes}")

    # Spark calls this once per key and batch (or per timed-out key).
    def __call__(
        self, key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        held = self._load(state)
        emitted: dict[int, list[tuple[Any, ...]]] = {}
        batch = None
        if state.hasTimedOut:
            now = self._now(state)
            for i, slot in enumerate(self.slots):
                obj, timer = held[i]
                if obj is not None and timer is not None and timer < now:  # Spark's test: <
                    held[i] = self._apply(i, slot.handler.expire(key, obj), state, emitted)
        else:
            chunks = list(frames)
            batch = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
            rows = _Batch(batch, self._zones)
            for i, slot in enumerate(self.slots):
                obj, timer = held[i]
                step = slot.handler.update(key, obj, rows.events(slot.handler))
                if step.outputs or (step.state is not obj and step.state != obj):
                    held[i] = self._apply(i, step, state, emitted)
                    continue
                self._count(i, step)
                # Nothing for this handler in these rows: as if its own operator had not seen
                # the key, its timer stays, and fires now if due (Spark would time it out now).
                if obj is not None and timer is not None and timer < self._now(state):
                    held[i] = self._apply(i, slot.handler.expire(key, obj), state, emitted)
        self._store(state, held)
        frame = self._frame(batch, emitted)
        if frame is not None:
            yield frame

    def _now(self, state: GroupState) -> int:
        if self.mode == "event_time":
            return state.getCurrentWatermarkMs()
        return state.getCurrentProcessingTimeMs()

    def _count(self, i: int, step: Step) -> None:
        accumulator = self.counts.get(self.slots[i].name)
        if accumulator is not None and step.counts:
            accumulator.add(Counter(step.counts))

    def _apply(
        self, i: int, step: Step, state: GroupState, emitted: dict[int, list[tuple[Any, ...]]]
    ) -> tuple[Any, int | None]:
        """Record the step's rows and counts; the handler's new (state, timer ms)."""
        self._count(i, step)
        if step.outputs:
            emitted.setdefault(i, []).extend(step.outputs)
        slot = self.slots[i]
        if step.state is None:
            return None, None
        if slot.mode == "event_time" and step.timer_us is not None:
            # Spark refuses a timer behind the watermark; such a timer is due now anyway.
            return step.state, max(step.timer_us // 1000, state.getCurrentWatermarkMs() + 1)
        if slot.mode == "processing_time" and slot.timeout_ms is not None:
            return step.state, state.getCurrentProcessingTimeMs() + slot.timeout_ms
        return step.state, None

    def _load(self, state: GroupState) -> list[tuple[Any, int | None]]:
        if not state.exists:
            return [(None, None)] * len(self.slots)
        row, at, held = state.get, 0, []
        for slot in self.slots:
            present, timer = row[at + slot.width], row[at + slot.width + 1]
            fields = row[at : at + slot.width]
            held.append((slot.handler.state_from_row(fields), timer) if present else (None, None))
            at += slot.width + 2
        return held

    def _store(self, state: GroupState, held: Sequence[tuple[Any, int | None]]) -> None:
        if all(obj is None for obj, _ in held):
            state.remove()
            return
        row: list[Any] = []
        for slot, (obj, timer) in zip(self.slots, held, strict=True):
            if obj is None:
                row.extend([None] * slot.width + [False, None])
            else:
                row.extend(slot.handler.state_to_row(obj))
                row.extend((True, timer))
        state.update(tuple(row))
        timers = [timer for obj, timer in held if obj is not None and timer is not None]
        if not timers:
            return
        # The group's timeout is its earliest handler timer; the others wait in the state.
        if self.mode == "event_time":
            state.setTimeoutTimestamp(min(timers))
        elif self.mode == "processing_time":
            state.setTimeoutDuration(max(1, min(timers) - state.getCurrentProcessingTimeMs()))

    def _frame(
        self, batch: pd.DataFrame | None, emitted: Mapping[int, list[tuple[Any, ...]]]
    ) -> pd.DataFrame | None:
        """Passthrough rows (the input rows) then each handler's rows, in one frame."""
        passed = batch if self.passthrough else None
        n = 0 if passed is None else len(passed)
        total = n + sum(len(rows) for rows in emitted.values())
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
                    # fromiter keeps a list value (an array<struct> cell) as one element.
                    out[at:end, col + j] = np.fromiter(values, dtype=object, count=len(rows))
                at = end
            col += slot.outputs
        return pd.DataFrame(out, columns=self.output_type.names, dtype=object, copy=False)


# --- Spark entry points -----------------------------------------------------------------------


def _struct(ddl: str) -> StructType:
    parsed = DataType.fromDDL(ddl)  # needs the JVM: on the driver only
    if not isinstance(parsed, StructType):
        raise ValueError(f"not a row type: {ddl!r}")
    return parsed


def apply_handlers(
    df: DataFrame,
    handlers: Mapping[str, StateHandler],
    *,
    passthrough: Sequence[str] = (),
    counts: Mapping[str, Accumulator] | None = None,
) -> DataFrame:
    """Run the handlers (one key) over `df` in one applyInPandasWithState, with every input
    row's `passthrough` columns; layout in the module doc; `counts`: name -> CountsParam."""
    group = HandlerGroup(
        handlers,
        input_schema=df.schema,
        state_schemas={name: _struct(h.state_schema) for name, h in handlers.items()},
        output_schemas={name: _struct(h.output_schema) for name, h in handlers.items()},
        passthrough=passthrough,
        time_zone=df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC",
        counts=counts,
    )

    def run(
        key: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        return group(key, frames, state)

    # Only the columns someone reads cross to Python: Arrow conversion is most of the cost.
    return (
        df.select(*group.input_columns)
        .groupBy(*group.key)
        .applyInPandasWithState(
            run,
            outputStructType=group.output_type,
            stateStructType=group.state_type,
            outputMode="append",
            timeoutConf=_TIMEOUTS[group.mode],
        )
    )


def handler_rows(out: DataFrame, name: str, handler: StateHandler) -> DataFrame:
    """The rows `apply_handlers` emitted for handler `name`, with its own column names."""
    columns = _struct(handler.output_schema).names
    return out.where(F.col(EMIT) == name).select(*(F.col(f"{name}__{c}").alias(c) for c in columns))


def passthrough_rows(out: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The input rows `apply_handlers` passed through, as they came."""
    return out.where(F.col(EMIT) == "").select(*columns)


def apply_handler(
    df: DataFrame, handler: StateHandler, *, counts: Accumulator | None = None
) -> DataFrame:
    """One handler alone: its rows, with its own column names (see `apply_handlers`)."""
    name = "handler"
    out = apply_handlers(df, {name: handler}, counts=None if counts is None else {name: counts})
    return handler_rows(out, name, handler)
