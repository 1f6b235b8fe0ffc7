"""Synthetic IoT sensor readings for the ``sensor_cep`` pipeline: one JSON object per line.

Several devices together send about :data:`READINGS_PER_SECOND` frequency readings a second;
about 1% of them are anomalies (``sensor_freq < 0``). Lines are written out of event-time order
(by at most :data:`OUT_OF_ORDER_MAX_SECONDS`), and with ``faults=True`` the stream also carries
late readings, malformed lines and duplicates. The lines go to numbered part files in a folder
or, for ``kafka://HOST:PORT/TOPIC``, to a Kafka topic, in the same order either way.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from devtools.generators import Summary, open_lines, progress_bar

__all__ = [
    "ANOMALY_RATE",
    "DUPLICATE_MAX_DISTANCE",
    "LATE_MIN_AGE_SECONDS",
    "OUT_OF_ORDER_MAX_SECONDS",
    "READINGS_PER_SECOND",
    "START_TIME",
    "GenerationSummary",
    "SensorLines",
    "generate_sensor_cep",
]

START_TIME = datetime(2023, 4, 12, 10, 0, 0)
"""Time of the first reading; event times are naive UTC."""

READINGS_PER_SECOND = 20
"""Average readings per second over all devices together."""

ANOMALY_RATE = 0.01
"""Share of readings that are anomalies (negative ``sensor_freq``)."""

OUT_OF_ORDER_MAX_SECONDS = 25
"""An on-time reading is at most this much older than any reading written before it."""

LATE_MIN_AGE_SECONDS = 90
"""A late reading is at least this much older than the newest reading written before it."""

DUPLICATE_MAX_DISTANCE = 20
"""A duplicate line follows its original within this many lines."""

_LATE_RATE = 0.005
_MALFORMED_RATE = 0.003
_DUPLICATE_RATE = 0.003
_LATE_MAX_AGE_SECONDS = 150
# Kept well below DUPLICATE_MAX_DISTANCE: other lines due at the same moment may push a
# duplicate a little further.
_DUPLICATE_DUE_MAX = 12
# A device's gap between readings is its period times a factor in this range.
_GAP_FACTORS = (0.8, 1.2)
_BASE_FREQ = (20.0, 80.0)
_MIN_FREQ = 0.5

_NOT_JSON = (
    "device offline",
    "<html><body>504 Gateway Timeout</body></html>",
    "ERROR gateway: MQTT connection reset by peer",
    "device_id,sensor_freq,event_time",
)
_BAD_TIMES = (
    "yesterday",
    "",
    "not a timestamp",
    "12/04/2023 10:15:30",
    "2023-04-12 25:61:61.000",
    "1681294530123",
)


@dataclass(frozen=True)
class GenerationSummary(Summary):
    """What was written; ``lines`` = ``events`` + ``duplicates`` + ``malformed``.

    ``events`` counts valid readings, on-time and late; ``anomalies`` and ``late`` are part of
    them. ``devices`` is the number of simulated devices; ``files`` is 0 for Kafka output.
    """

    lines: int
    events: int
    anomalies: int
    late: int
    duplicates: int
    malformed: int
    devices: int
    files: int
    first_event_time: str
    last_event_time: str


def generate_sensor_cep(
    out: str | Path,
    *,
    events: int,
    seed: int = 0,
    faults: bool = False,
    devices: int | None = None,
    lines_per_file: int = 10_000,
    progress: bool = False,
) -> GenerationSummary:
    """Write ``events`` valid readings (plus faults if asked) to a folder or a Kafka topic.

    ``out`` is a folder (``out/part-00001.json``, ...; FileExistsError if it is not empty) or
    ``kafka://HOST:PORT/TOPIC`` (the topic is created if missing). The same arguments always
    give the same lines.
    """
    if lines_per_file < 1:
        raise ValueError(f"lines_per_file must be at least 1, got {lines_per_file}")
    lines = SensorLines(events=events, seed=seed, faults=faults, devices=devices)
    bar = progress_bar(
        total=events, unit="event", desc="sensor readings", done=lambda: lines.events,
        enabled=progress,
    )  # fmt: skip
    # The output is opened first: a full folder or a broker that is not there is refused
    # before the bar is drawn.
    with open_lines(out, lines_per_file=lines_per_file) as write, bar as report:
        files = write(lines, report)
    return lines.summary(files=files)


class SensorLines:
    """The generated lines in write order: iterate once for ``(line, kafka key)`` pairs.

    The key is the device id for a line that is a JSON object with one, else None. Counts
    grow while iterating; :meth:`summary` gives them.
    """

    def __init__(
        self, *, events: int, seed: int = 0, faults: bool = False, devices: int | None = None
    ) -> None:
        self.devices = max(3, events // 2000) if devices is None else devices
        for name, value in (("events", events), ("devices", self.devices)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self._events_wanted = events
        self._seed = seed
        self._faults = faults
        self._started = False
        self.lines = self.events = self.anomalies = self.late = 0
        self.duplicates = self.malformed = 0
        self._first_ms: int | None = None
        self._last_ms: int | None = None

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        if self._started:
            raise RuntimeError("SensorLines can be iterated only once")
        self._started = True
        return _Writer(self).run()

    def summary(self, *, files: int = 0) -> GenerationSummary:
        """Counts of what has been iterated so far."""
        return GenerationSummary(
            lines=self.lines,
            events=self.events,
            anomalies=self.anomalies,
            late=self.late,
            duplicates=self.duplicates,
            malformed=self.malformed,
            devices=self.devices,
            files=files,
            first_event_time=_render(self._first_ms) if self._first_ms is not None else "",
            last_event_time=_render(self._last_ms) if self._last_ms is not None else "",
        )

    def _count_event(self, t: int, anomaly: bool) -> None:
        self.events += 1
        self.anomalies += anomaly
        if self._first_ms is None or t < self._first_ms:
            self._first_ms = t
        if self._last_ms is None or t > self._last_ms:
            self._last_ms = t


def _render(t: int) -> str:
    return (START_TIME + timedelta(milliseconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@dataclass(slots=True)
class _Reading:
    t: int  # milliseconds since START_TIME
    device: str
    value: str
    stamp: str
    text: str
    anomaly: bool


class _Devices:
    """Every device reports about every ``devices / READINGS_PER_SECOND`` seconds."""

    def __init__(self, rng: random.Random, count: int) -> None:
        self._rng = rng
        self._period = count * 1000 / READINGS_PER_SECOND
        self._ids = [str(number) for number in rng.sample(range(100_000, 1_000_000), count)]
        self._base = [rng.uniform(*_BASE_FREQ) for _ in range(count)]
        # A slow swing (minutes to an hour) plus noise, so series are not flat.
        self._swing = [
            (rng.uniform(0.5, 4.0), rng.uniform(300, 3600) * 1000, rng.uniform(0, 2 * math.pi))
            for _ in range(count)
        ]
        self._noise = [rng.uniform(0.2, 1.5) for _ in range(count)]
        # The first device opens the stream at START_TIME exactly.
        starts = [0.0] + [rng.uniform(0, self._period) for _ in range(count - 1)]
        self._queue = [(start, number) for number, start in enumerate(starts)]
        heapq.heapify(self._queue)
        self._second = -1
        self._prefix = ""

    def reserve(self) -> int:
        """Readings that surely span more than the oldest late reading's age.

        A device's gaps are at least ``_GAP_FACTORS[0]`` periods, so ``n`` readings in a row
        span at least ``_GAP_FACTORS[0] * (n - devices) / READINGS_PER_SECOND`` seconds.
        """
        span = _LATE_MAX_AGE_SECONDS + 2
        return math.ceil(span * READINGS_PER_SECOND / _GAP_FACTORS[0]) + len(self._ids)

    def next_reading(self, anomaly: bool) -> _Reading:
        """The next reading in event-time order."""
        rng = self._rng
        start, number = self._queue[0]
        gap = self._period * rng.uniform(*_GAP_FACTORS)
        heapq.heapreplace(self._queue, (start + gap, number))
        t = int(start)
        amplitude, period, phase = self._swing[number]
        value = self._base[number] + amplitude * math.sin(2 * math.pi * t / period + phase)
        value = max(_MIN_FREQ, value + rng.gauss(0.0, self._noise[number]))
        if anomaly:
            # A faulty sensor reports a negative frequency, anywhere up to its usual size.
            value = -rng.uniform(_MIN_FREQ, self._base[number])
        device = self._ids[number]
        stamp = self._stamp(t)
        text = f'{{"device_id": {device}, "sensor_freq": {value!r}, "event_time": "{stamp}"}}'
        return _Reading(t, device, repr(value), stamp, text, anomaly)

    def _stamp(self, t: int) -> str:
        second, millis = divmod(t, 1000)
        # Readings come in time order, so the last second's text is nearly always reused.
        if second != self._second:
            self._second = second
            moment = START_TIME + timedelta(seconds=second)
            self._prefix = moment.strftime("%Y-%m-%d %H:%M:%S")
        return f"{self._prefix}.{millis:03d}"


class _Writer:
    """Puts readings in write order and adds the faults; yields ``(line, key)``."""

    def __init__(self, lines: SensorLines) -> None:
        self._lines = lines
        events = lines._events_wanted
        self._events = events
        rng = random.Random(lines._seed)
        # Faults draw from their own generator, so that with or without them the devices make
        # the same readings and write them in the same relative order.
        self._fault_rng = random.Random(rng.getrandbits(64))
        self._rng = rng
        self._devices = _Devices(rng, lines.devices)
        self._anomalous = set(rng.sample(range(events), max(1, round(events * ANOMALY_RATE))))
        self._late: set[int] = set()
        self._malformed_after: set[int] = set()
        self._duplicate_after: set[int] = set()
        if lines._faults:
            self._plan_faults()
        self._out: list[tuple[str, str | None]] = []
        # (write key, index, reading): on-time readings waiting for their turn.
        self._pending: list[tuple[int, int, _Reading]] = []
        # (due time, index, reading): late readings waiting for the stream to move on.
        self._held: list[tuple[int, int, _Reading]] = []
        # (due line number, order, line, key): duplicates waiting to be written.
        self._copies: list[tuple[int, int, str, str | None]] = []
        self._newest = -1
        self._on_time = 0

    def _plan_faults(self) -> None:
        rng = self._fault_rng
        events = self._events
        # Only readings followed by a long enough stretch can fall that far behind.
        candidates = max(0, events - self._devices.reserve())
        self._late = set(rng.sample(range(candidates), min(candidates, round(events * _LATE_RATE))))
        on_time = events - len(self._late)
        for rate, spots in (
            (_MALFORMED_RATE, self._malformed_after),
            (_DUPLICATE_RATE, self._duplicate_after),
        ):
            spots.update(rng.sample(range(on_time), min(on_time, max(1, round(events * rate)))))

    def run(self) -> Iterator[tuple[str, str | None]]:
        rng = self._rng
        max_delay = OUT_OF_ORDER_MAX_SECONDS * 1000
        pending = self._pending
        out = self._out
        for index in range(self._events):
            reading = self._devices.next_reading(index in self._anomalous)
            # Drawn for every reading, late or not, to keep the main generator's sequence.
            delay = min(max_delay, self._delay(rng))
            if index in self._late:
                age = self._fault_rng.randint(LATE_MIN_AGE_SECONDS, _LATE_MAX_AGE_SECONDS)
                heapq.heappush(self._held, (reading.t + age * 1000, index, reading))
                continue
            heapq.heappush(pending, (reading.t + delay, index, reading))
            # Readings still to come are no older than this one, so their write keys are
            # at least its time: everything keyed up to it can go out in key order.
            while pending and pending[0][0] <= reading.t:
                self._write_on_time(heapq.heappop(pending)[2])
            if out:
                yield from out
                out.clear()
        while pending:
            self._write_on_time(heapq.heappop(pending)[2])
        # The reserve left after the last late reading makes every held one due by now.
        self._release_late(final=True)
        while self._copies:
            self._write_copy()
        yield from out
        out.clear()

    @staticmethod
    def _delay(rng: random.Random) -> int:
        # Most readings arrive within a fraction of a second; some sit in a gateway's buffer.
        r = rng.random()
        if r < 0.75:
            return int(rng.expovariate(1 / 300))
        if r < 0.97:
            return int(rng.uniform(0, 5_000))
        return int(rng.uniform(5_000, OUT_OF_ORDER_MAX_SECONDS * 1000))

    def _emit(self, text: str, key: str | None) -> None:
        while self._copies and self._copies[0][0] <= self._lines.lines:
            self._write_copy()
        self._out.append((text, key))
        self._lines.lines += 1

    def _write_copy(self) -> None:
        _, _, text, key = heapq.heappop(self._copies)
        self._out.append((text, key))
        self._lines.lines += 1
        self._lines.duplicates += 1

    def _write_on_time(self, reading: _Reading) -> None:
        self._emit(reading.text, reading.device)
        self._lines._count_event(reading.t, reading.anomaly)
        self._newest = max(self._newest, reading.t)
        position = self._on_time
        self._on_time += 1
        if position in self._duplicate_after:
            due = self._lines.lines + self._fault_rng.randint(0, _DUPLICATE_DUE_MAX - 1)
            heapq.heappush(self._copies, (due, position, reading.text, reading.device))
        if position in self._malformed_after:
            self._emit(*self._malformed(reading))
            self._lines.malformed += 1
        if self._held and self._held[0][0] <= self._newest:
            self._release_late(final=False)

    def _release_late(self, *, final: bool) -> None:
        held = self._held
        while held and (final or held[0][0] <= self._newest):
            reading = heapq.heappop(held)[2]
            self._emit(reading.text, reading.device)
            self._lines._count_event(reading.t, reading.anomaly)
            self._lines.late += 1

    def _malformed(self, reading: _Reading) -> tuple[str, str | None]:
        rng = self._fault_rng
        device, value, stamp = reading.device, reading.value, reading.stamp
        r = rng.random()
        if r < 0.25:
            # Any proper prefix of a JSON object is invalid: a write cut short.
            text = reading.text
            return text[: rng.randint(len(text) // 4, len(text) - 2)], None
        if r < 0.4:
            return rng.choice(_NOT_JSON), None
        if r < 0.6:
            return f'{{"device_id": {device}, "sensor_freq": {value}}}', device
        if r < 0.75:
            return f'{{"sensor_freq": {value}, "event_time": "{stamp}"}}', None
        bad = rng.choice(_BAD_TIMES)
        return f'{{"device_id": {device}, "sensor_freq": {value}, "event_time": "{bad}"}}', device
