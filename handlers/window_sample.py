"""Window sampling (seed 002): when a window closes, its first, middle and last normal
readings and every anomalous one, each once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from engine.definitions.handler import Columns, StateHandler, Step, TimeoutMode

__all__ = ["Reading", "SampleRow", "WindowSampleHandler", "WindowState", "sample"]

#: (event_time in µs, device_id, sensor_freq, is_anomalous)
Reading = tuple[int, str, float, bool]


@dataclass(frozen=True)
class WindowState:
    """The readings of one group (one window, or one window and device) until it closes."""

    window_start_us: int
    window_end_us: int
    readings: tuple[Reading, ...]


class SampleRow(NamedTuple):
    """A row of `WindowSampleHandler.output_schema`; times in microseconds since the epoch."""

    window_start: int
    window_end: int
    device_id: str
    sensor_freq: float
    event_time: int
    is_anomalous: bool


def sample(readings: Sequence[Reading]) -> list[Reading]:
    """First, middle (index n // 2) and last of the normal readings by event time, and every
    anomalous reading; each reading once, in event-time order."""
    ordered = sorted(readings)  # event time first; device and value make ties deterministic
    normal = [i for i, r in enumerate(ordered) if not r[3]]
    picked = {i for i, r in enumerate(ordered) if r[3]}
    if normal:
        picked |= {normal[0], normal[len(normal) // 2], normal[-1]}
    return [ordered[i] for i in sorted(picked)]


class WindowSampleHandler(StateHandler[WindowState]):
    """Keeps a group's readings; its event-time timer fires when the watermark reaches the
    window's end, then emits the sample and drops the state.

    The grouping key `sample_group` comes from the SQL view, so grouping by window only (the
    seed) or by window and device is a change of one SQL line.
    """

    key = ("sample_group",)
    columns = (
        "window_start",
        "window_end",
        "device_id",
        "sensor_freq",
        "event_time",
        "is_anomalous",
    )
    state_type = WindowState
    # Readings are stored as JSON text: pyspark 4.3's applyInPandasWithState fails to read
    # array types in a state schema (see handlers/carts.py).
    state_schema = "window_start_us BIGINT, window_end_us BIGINT, readings_json STRING"
    output_schema = (
        "window_start TIMESTAMP, window_end TIMESTAMP, device_id STRING, sensor_freq DOUBLE, "
        "event_time TIMESTAMP, is_anomalous BOOLEAN"
    )

    @property
    def timeout_mode(self) -> TimeoutMode:
        return "event_time"

    def update(
        self, key: tuple[Any, ...], state: WindowState | None, events: Columns
    ) -> Step[WindowState]:
        readings = list(state.readings) if state else []
        starts, ends = events["window_start"], events["window_end"]
        start = state.window_start_us if state else starts[0]
        end = state.window_end_us if state else ends[0]
        if any(s != start for s in starts) or any(e != end for e in ends):
            raise ValueError(
                f"sample_group {key[0]!r} holds more than one window: the grouping key "
                "must include the window"
            )
        readings.extend(
            (int(t), str(device), float(freq), bool(anomalous))
            for t, device, freq, anomalous in zip(
                events["event_time"],
                events["device_id"],
                events["sensor_freq"],
                events["is_anomalous"],
                strict=True,
            )
        )
        # Timers fire once the watermark is past them: one millisecond before the end means
        # "when the watermark reaches the end", after which no reading of the window is on time.
        new = WindowState(start, end, tuple(readings))
        return Step(state=new, timer_us=end - 1000)

    def expire(self, key: tuple[Any, ...], state: WindowState) -> Step[WindowState]:
        start, end = state.window_start_us, state.window_end_us
        rows = [
            SampleRow(start, end, device, freq, when, anomalous)
            for when, device, freq, anomalous in sample(state.readings)
        ]
        return Step(state=None, outputs=rows)

    def state_to_row(self, state: WindowState) -> tuple[Any, ...]:
        return (state.window_start_us, state.window_end_us, json.dumps(state.readings))

    def state_from_row(self, row: Sequence[Any]) -> WindowState:
        start, end, readings_json = row
        readings = tuple(
            (int(t), str(d), float(f), bool(a)) for t, d, f, a in json.loads(readings_json)
        )
        return WindowState(int(start), int(end), readings)
