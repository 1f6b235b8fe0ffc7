"""Synthetic phone sensor readings for the ``user_activity`` pipeline: one JSON object per line.

The layout is the heterogeneity activity recognition data (``activity-data``) of the Spark
Definitive Guide, as used by Databricks' "Arbitrary Stateful Processing in Structured
Streaming"::

    {"Arrival_Time": 1424686735090, "Creation_Time": 1424686733090582071, "Device": "nexus4_1",
     "Index": 35, "Model": "nexus4", "User": "g", "gt": "stand", "x": 0.0014038086, ...}

Each user carries one phone that samples about every :data:`SAMPLE_PERIOD_MS` ms while the
user does runs of one activity (``gt``), switching to another activity after each run. Lines
are written in arrival order, so at most :data:`OUT_OF_ORDER_MAX_SECONDS` out of creation
order. With ``faults=True`` the stream also carries duplicates, late records, older records
with another activity, and malformed lines. The lines go to numbered part files in a folder.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devtools.generators import Summary, prepare_folder, progress_bar, write_parts

__all__ = [
    "ACTIVITIES",
    "DUPLICATE_MAX_DISTANCE",
    "LATE_MIN_AGE_SECONDS",
    "MODELS",
    "OUT_OF_ORDER_MAX_SECONDS",
    "RUN_READINGS",
    "SAMPLE_PERIOD_MS",
    "START_NS",
    "GenerationSummary",
    "generate_user_activity",
]

START_NS = 1_424_686_733_000_000_000
"""``Creation_Time`` (ns since the epoch) of the first reading: 2015-02-23 10:18:53 UTC."""

SAMPLE_PERIOD_MS = 200
"""Each user's phone takes a reading about this often (give or take 10%)."""

ACTIVITIES = ("stand", "sit", "walk", "bike", "stairsup", "stairsdown")
"""The ``gt`` (ground truth) values."""

MODELS = ("nexus4", "s3", "s3mini", "samsungold")
"""Phone models; a device is ``f"{model}_{1 or 2}"``."""

RUN_READINGS = (20, 120)
"""A run of one activity lasts this many readings (inclusive bounds; a user's last run may be
cut short by the end of the stream)."""

OUT_OF_ORDER_MAX_SECONDS = 2
"""An on-time record's ``Creation_Time`` is less than this much older than any record
written before it."""

LATE_MIN_AGE_SECONDS = 30
"""A late record is at least this much older than every record of the files before its own
(and so than every record written before it)."""

DUPLICATE_MAX_DISTANCE = 20
"""A duplicate line follows its original within this many lines."""

_DUPLICATE_RATE = 0.01
_LATE_RATE = 0.005
_OLDER_OTHER_RATE = 0.005
_MALFORMED_RATE = 0.003
_LATE_MAX_AGE_SECONDS = 60
# A reading's gap to the same phone's previous one is the period times a factor in this range.
_GAP_FACTORS = (0.9, 1.1)
# The smallest gap, rounded down, for bounding how many readings a stretch of time holds.
_MIN_GAP_SECONDS = 0.17
_DELAY_MS = (5, 2000)
# An older-other-activity record is this much older than the user's previous record.
_OLDER_BY_MS = (500, 1500)
# It follows a record that arrived within this many ms: with the 1.5 s above it stays within
# the 2 s disorder.
_OLDER_HOST_MAX_DELAY_MS = 400
# Kept well below DUPLICATE_MAX_DISTANCE: other copies due at the same moment may push a
# duplicate a little further.
_DUPLICATE_DUE_MAX = 12
# Standard deviation of each axis per activity: still activities barely move the phone.
_AXIS_SIGMA = {
    "stand": 0.002,
    "sit": 0.0015,
    "walk": 0.6,
    "bike": 0.35,
    "stairsup": 0.8,
    "stairsdown": 0.9,
}
# The phones report multiples of 2**-16 (float32 sensor values).
_AXIS_STEPS = 65536

_NOT_JSON = (
    "E/SensorManager: sensor event queue overflow",
    "<html><body>503 Service Unavailable</body></html>",
    "Arrival_Time,Creation_Time,Device,Index,Model,User,gt,x,y,z",
    "upload interrupted",
)
_BAD_TIMES = ("soon", "", "2015-02-23 10:18:53.090", "unknown")


@dataclass(frozen=True)
class GenerationSummary(Summary):
    """What was written; ``lines`` = ``records`` + ``duplicates`` + ``malformed``.

    ``records`` counts valid records (on-time and late, each once); ``late`` and
    ``out_of_order_other_activity`` are part of them. ``spans`` is the number of activity runs
    over all users; ``users`` those with a valid record; the creation times are the oldest and
    newest valid ``Creation_Time``.
    """

    lines: int
    records: int
    users: int
    duplicates: int
    late: int
    out_of_order_other_activity: int
    malformed: int
    files: int
    spans: int
    first_creation_ns: int
    last_creation_ns: int


def generate_user_activity(
    out: str | Path,
    *,
    events: int,
    seed: int = 0,
    faults: bool = False,
    users: int = 9,
    lines_per_file: int = 1000,
    progress: bool = False,
) -> GenerationSummary:
    """Write ``events`` valid records (plus faults if asked) to ``out/part-00001.json``, ...

    FileExistsError if ``out`` is not an empty folder. File ``i`` gets mtime ``base + i``
    seconds, as Spark's file source reads files in mtime order. Users are named ``a``, ``b``,
    ... (at most 26). The same arguments always give the same lines.

    Late records (faults) come with a guarantee for file-by-file reading: a late record is in
    file 2 or later, and its ``Creation_Time`` is at least :data:`LATE_MIN_AGE_SECONDS` older
    than the newest ``Creation_Time`` of all the files before its own (so also than every line
    before it). Hence when each file is its own micro-batch (``maxFilesPerTrigger`` 1), a
    watermark delay under 30 s (such as 5 s) set by the earlier batches drops every late
    record. A file must close 30-60 s of creation time after a late record, so a run shorter
    than about 62 s of readings plus ``lines_per_file`` lines has no late records.
    """
    for name, value in (("events", events), ("lines_per_file", lines_per_file)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if not 1 <= users <= 26:
        raise ValueError(f"users must be between 1 and 26, got {users}")
    folder = prepare_folder(Path(out))
    writer = _Writer(
        events=events, seed=seed, faults=faults, users=users, lines_per_file=lines_per_file
    )
    bar = progress_bar(
        total=events, unit="record", desc="activity records", done=lambda: writer.records,
        enabled=progress,
    )  # fmt: skip
    with bar as report:
        # The part-file boundaries are the ones the writer counts for its late guarantee.
        files = write_parts(writer.run(), folder, lines_per_file, report)
    return writer.summary(files=files)


@dataclass(slots=True)
class _Reading:
    creation: int  # ns since the epoch
    arrival: int  # ms since the epoch
    user: int
    gt: str
    index: int
    axes: tuple[str, str, str]


class _Users:
    """The users' phones; :meth:`next_reading` gives readings in creation order."""

    def __init__(self, rng: random.Random, count: int) -> None:
        self._rng = rng
        self.names = [chr(ord("a") + number) for number in range(count)]
        self.models = [rng.choice(MODELS) for _ in range(count)]
        self.devices = [f"{model}_{rng.randint(1, 2)}" for model in self.models]
        # Users may share a device name; Index counts per device, as in the seed data.
        self._indexes = dict.fromkeys(self.devices, 0)
        self._activity = [""] * count
        self._left = [0] * count
        self._last_arrival = [0] * count
        self.spans = 0
        period = SAMPLE_PERIOD_MS * 1_000_000
        # The first user opens the stream at START_NS exactly.
        starts = [0] + [rng.randrange(period) for _ in range(count - 1)]
        self._queue = [(START_NS + start, number) for number, start in enumerate(starts)]
        heapq.heapify(self._queue)

    def next_reading(self) -> _Reading:
        """The next reading in creation order."""
        rng = self._rng
        creation, user = self._queue[0]
        gap = int(SAMPLE_PERIOD_MS * 1_000_000 * rng.uniform(*_GAP_FACTORS))
        heapq.heapreplace(self._queue, (creation + gap, user))
        if self._left[user] == 0:
            self._activity[user] = self.other_activity(rng, self._activity[user])
            self._left[user] = rng.randint(*RUN_READINGS)
            self.spans += 1
        self._left[user] -= 1
        gt = self._activity[user]
        # A phone uploads its readings in order, so one slow upload holds back the next few
        # too: arrival never goes back for a user, and within a user arrival order is
        # creation order. The bound still holds: the previous arrival is at most
        # 2000 ms after an earlier creation.
        arrival = max(creation // 1_000_000 + self._delay(), self._last_arrival[user])
        self._last_arrival[user] = arrival
        return _Reading(creation, arrival, user, gt, self.next_index(user), self.axes(rng, gt))

    def next_index(self, user: int) -> int:
        """Take the next ``Index`` of the user's device."""
        device = self.devices[user]
        index = self._indexes[device]
        self._indexes[device] = index + 1
        return index

    def _delay(self) -> int:
        # Most readings arrive within a fraction of a second; a few wait for a slow upload.
        rng = self._rng
        if rng.random() < 0.9:
            return min(_DELAY_MS[1], _DELAY_MS[0] + int(rng.expovariate(1 / 120)))
        return rng.randint(*_DELAY_MS)

    @staticmethod
    def other_activity(rng: random.Random, current: str) -> str:
        """An activity other than ``current`` (any one for "")."""
        return rng.choice([activity for activity in ACTIVITIES if activity != current])

    @staticmethod
    def axes(rng: random.Random, gt: str) -> tuple[str, str, str]:
        """x, y, z as JSON numbers that always read back as floats."""
        sigma = _AXIS_SIGMA[gt]
        return (
            _axis(rng.gauss(0.0, sigma)),
            _axis(rng.gauss(0.0, sigma)),
            _axis(rng.gauss(0.0, sigma)),
        )


def _axis(value: float) -> str:
    text = f"{round(value * _AXIS_STEPS) / _AXIS_STEPS:.8g}"
    # "0" or "-0" would read back as an integer.
    return text if "." in text or "e" in text else f"{text}.0"


class _Writer:
    """Puts readings in write order and adds the faults; :meth:`run` yields the lines."""

    def __init__(
        self, *, events: int, seed: int, faults: bool, users: int, lines_per_file: int
    ) -> None:
        rng = random.Random(seed)
        # Faults draw from their own generator, so that with or without them the phones take
        # the same readings at the same times.
        self._fault_rng = random.Random(rng.getrandbits(64))
        self._users = _Users(rng, users)
        self._events = events
        self._lines_per_file = lines_per_file
        self._late: set[int] = set()
        self._older_at: set[int] = set()
        self._malformed_after: set[int] = set()
        self._duplicate_after: set[int] = set()
        self._regular = events
        if faults:
            self._plan_faults()
        self.lines = self.records = self.late = self.duplicates = self.malformed = 0
        # The users with a record written: a short run need not reach every simulated one.
        self._writers: set[int] = set()
        self.older = 0
        self._out: list[str] = []
        # (arrival, creation, sequence, reading): on-time readings waiting for their turn.
        self._pending: list[tuple[int, int, int, _Reading]] = []
        # (due creation time, sequence, reading): late readings waiting for the files to move on.
        self._held: list[tuple[int, int, _Reading]] = []
        # (due line number, order, line): duplicates waiting to be written.
        self._copies: list[tuple[int, int, str]] = []
        # Older-other-activity records each user still owes.
        self._owed = [0] * users
        self._first = self._newest = -1
        # Newest Creation_Time in the files already complete: late records are held until
        # they are old enough against it.
        self._newest_closed = -1
        self._last_arrival = 0
        self._on_time = 0

    def _plan_faults(self) -> None:
        rng = self._fault_rng
        events = self._events
        users = len(self._users.names)
        older = max(1, round(events * _OLDER_OTHER_RATE))
        # Each hangs on a later reading of its user made after START_NS + 1.6 s, and fewer
        # than `first` readings are older than that; some stream must follow for the host.
        first = users * math.ceil((_OLDER_BY_MS[1] + 100) / 1000 / _MIN_GAP_SECONDS + 2)
        spots = range(first, events - older - users * 10)
        older = min(older, len(spots))
        self._regular = regular = events - older
        self._older_at = set(rng.sample(spots, older))
        late = round(events * _LATE_RATE)
        candidates = max(0, regular - self._late_reserve(late))
        self._late = set(rng.sample(range(candidates), min(candidates, late)))
        on_time = regular - len(self._late)
        for rate, spots in (
            (_MALFORMED_RATE, self._malformed_after),
            (_DUPLICATE_RATE, self._duplicate_after),
        ):
            spots.update(rng.sample(range(on_time), min(on_time, max(1, round(events * rate)))))

    def _late_reserve(self, late: int) -> int:
        """Readings that surely follow a late one before a file closes old enough for it.

        Up to ``users * (age / min gap + 1)`` readings are newer than the late one by less
        than its largest age; the one after them (newer by more) is written once readings
        2 s newer come, and ``lines_per_file`` lines later a file has closed. Late readings
        among those are not written in time, so they count too.
        """
        users = len(self._users.names)
        span = (_LATE_MAX_AGE_SECONDS + OUT_OF_ORDER_MAX_SECONDS) / _MIN_GAP_SECONDS
        return math.ceil(users * (span + 2)) + 1 + self._lines_per_file + late

    def run(self) -> Iterator[str]:
        users = self._users
        pending = self._pending
        out = self._out
        sequence = 0
        while True:
            if sequence == self._regular:
                # Older records still owed found no quick host in time (very rare): readings
                # take their place, so that there are `events` records all the same.
                leftover = sum(self._owed)
                if not leftover:
                    break
                self._owed = [0] * len(self._owed)
                self._regular += leftover
            index = sequence
            sequence += 1
            reading = users.next_reading()
            if index in self._older_at:
                self._owed[reading.user] += 1
            if index in self._late:
                age = self._fault_rng.randint(LATE_MIN_AGE_SECONDS, _LATE_MAX_AGE_SECONDS)
                due = reading.creation + age * 1_000_000_000
                heapq.heappush(self._held, (due, index, reading))
                continue
            heapq.heappush(pending, (reading.arrival, reading.creation, index, reading))
            # Readings still to come arrive at least 5 ms after this one's creation, so
            # everything that arrived by then can go out in arrival order.
            threshold = reading.creation // 1_000_000
            while pending and pending[0][0] <= threshold:
                self._write_on_time(heapq.heappop(pending)[3])
            if out:
                yield from out
                out.clear()
        while pending:
            self._write_on_time(heapq.heappop(pending)[3])
        self._release_late()
        while self._copies:
            self._write_copy()
        self._release_late()
        if self._held:
            raise RuntimeError("late readings left over: the late reserve is too small")
        yield from out
        out.clear()

    def summary(self, *, files: int) -> GenerationSummary:
        """Counts of what has been written so far."""
        return GenerationSummary(
            lines=self.lines,
            records=self.records,
            users=len(self._writers),
            duplicates=self.duplicates,
            late=self.late,
            out_of_order_other_activity=self.older,
            malformed=self.malformed,
            files=files,
            spans=self._users.spans,
            first_creation_ns=self._first,
            last_creation_ns=self._newest,
        )

    def _line(self, reading: _Reading, arrival: int) -> str:
        users = self._users
        user = reading.user
        x, y, z = reading.axes
        return (
            f'{{"Arrival_Time": {arrival}, "Creation_Time": {reading.creation}, '
            f'"Device": "{users.devices[user]}", "Index": {reading.index}, '
            f'"Model": "{users.models[user]}", "User": "{users.names[user]}", '
            f'"gt": "{reading.gt}", "x": {x}, "y": {y}, "z": {z}}}'
        )

    def _append(self, text: str) -> None:
        self._out.append(text)
        self.lines += 1
        if self.lines % self._lines_per_file == 0:
            # The file just filled: everything written so far is in files before the next.
            self._newest_closed = self._newest

    def _emit(self, text: str, creation: int | None = None) -> None:
        while self._copies and self._copies[0][0] <= self.lines:
            self._write_copy()
        # Counted as written before its line, so that a file it fills counts it as closed.
        if creation is not None:
            self._newest = max(self._newest, creation)
        self._append(text)

    def _write_copy(self) -> None:
        self._append(heapq.heappop(self._copies)[2])
        self.duplicates += 1

    def _write_record(self, reading: _Reading, arrival: int) -> str:
        text = self._line(reading, arrival)
        creation = reading.creation
        self._emit(text, creation)
        self.records += 1
        self._writers.add(reading.user)
        if self._first < 0 or creation < self._first:
            self._first = creation
        self._last_arrival = max(self._last_arrival, arrival)
        return text

    def _write_on_time(self, reading: _Reading) -> None:
        text = self._write_record(reading, reading.arrival)
        position = self._on_time
        self._on_time += 1
        if self._owed[reading.user] and self._can_host(reading):
            self._owed[reading.user] -= 1
            self._write_older(reading)
        if position in self._duplicate_after:
            due = self.lines + self._fault_rng.randint(0, _DUPLICATE_DUE_MAX - 1)
            heapq.heappush(self._copies, (due, position, text))
        if position in self._malformed_after:
            self._emit(self._malformed(reading))
            self.malformed += 1
        if self._held and self._held[0][0] <= self._newest_closed:
            self._release_late()

    @staticmethod
    def _can_host(reading: _Reading) -> bool:
        # Lines written so far arrived by the host's arrival, so were created before it; a
        # host that arrived quickly keeps the older record within the 2 s disorder. It must
        # also be late enough for the older record to stay after START_NS.
        quick = reading.arrival - reading.creation // 1_000_000 <= _OLDER_HOST_MAX_DELAY_MS
        return quick and reading.creation - START_NS > (_OLDER_BY_MS[1] + 100) * 1_000_000

    def _write_older(self, host: _Reading) -> None:
        # Written right after the host, the user's newest record (a user's regular records
        # go out in creation order), with the host's arrival time.
        rng = self._fault_rng
        older_by = rng.randint(_OLDER_BY_MS[0] * 1_000_000, _OLDER_BY_MS[1] * 1_000_000)
        gt = self._users.other_activity(rng, host.gt)
        index = self._users.next_index(host.user)
        reading = _Reading(
            host.creation - older_by, host.arrival, host.user, gt, index, _Users.axes(rng, gt)
        )
        self._write_record(reading, host.arrival)
        self.older += 1

    def _release_late(self) -> None:
        held = self._held
        while held and held[0][0] <= self._newest_closed:
            reading = heapq.heappop(held)[2]
            # It arrives now, long after it was made.
            self._write_record(reading, self._last_arrival)
            self.late += 1

    def _malformed(self, reading: _Reading) -> str:
        rng = self._fault_rng
        text = self._line(reading, reading.arrival)
        r = rng.random()
        if r < 0.25:
            # Any proper prefix of a JSON object is invalid: an upload cut short.
            return text[: rng.randint(len(text) // 4, len(text) - 2)]
        if r < 0.4:
            return rng.choice(_NOT_JSON)
        if r < 0.6:
            user = f'"User": "{self._users.names[reading.user]}", '
            return text.replace(user, "")
        if r < 0.75:
            return text.replace(f'"Creation_Time": {reading.creation}, ', "")
        bad = rng.choice(_BAD_TIMES)
        return text.replace(f'"Creation_Time": {reading.creation}', f'"Creation_Time": "{bad}"')
