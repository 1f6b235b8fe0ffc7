"""Tests for the synthetic user-activity generator (plain Python, no Spark)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import groupby, pairwise
from pathlib import Path

import pytest

from devtools.generators.user_activity import (
    ACTIVITIES,
    DUPLICATE_MAX_DISTANCE,
    LATE_MIN_AGE_SECONDS,
    MODELS,
    OUT_OF_ORDER_MAX_SECONDS,
    RUN_READINGS,
    SAMPLE_PERIOD_MS,
    START_NS,
    GenerationSummary,
    generate_user_activity,
)

SECOND = 1_000_000_000
FIELDS = [
    "Arrival_Time",
    "Creation_Time",
    "Device",
    "Index",
    "Model",
    "User",
    "gt",
    "x",
    "y",
    "z",
]


@dataclass
class Line:
    file: int
    position: int
    text: str
    # on_time, older (on time but older than the user's newest record), late, duplicate,
    # malformed, or between (neither on time nor late)
    kind: str
    record: dict | None = None
    behind: int = 0  # ns behind the newest record written before it
    user_newest: tuple[int, str] | None = None  # (Creation_Time, gt) of the user's newest
    files_newest: int = -1  # newest Creation_Time in the files before this line's file

    @property
    def created(self) -> int:
        assert self.record is not None
        return self.record["Creation_Time"]


def is_record(record: object) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("User"), str)
        and type(record.get("Creation_Time")) is int
    )


def classify(files: list[list[str]]) -> list[Line]:
    """Sort every line the way a careful consumer would, in write order."""
    lines: list[Line] = []
    seen: set[str] = set()
    newest = files_newest = -1
    user_newest: dict[str, tuple[int, str]] = {}
    for number, texts in enumerate(files, start=1):
        files_newest = newest
        for text in texts:
            position = len(lines)
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                record = None
            if not is_record(record):
                lines.append(Line(number, position, text, "malformed", record))
                continue
            if text in seen:
                lines.append(Line(number, position, text, "duplicate", record))
                continue
            seen.add(text)
            created, user = record["Creation_Time"], record["User"]
            behind = max(0, newest - created) if newest >= 0 else 0
            mine = user_newest.get(user)
            if behind <= OUT_OF_ORDER_MAX_SECONDS * SECOND:
                kind = "older" if mine is not None and created < mine[0] else "on_time"
                if kind == "on_time":
                    user_newest[user] = (created, record["gt"])
            elif behind >= LATE_MIN_AGE_SECONDS * SECOND:
                kind = "late"
            else:
                kind = "between"
            lines.append(Line(number, position, text, kind, record, behind, mine, files_newest))
            newest = max(newest, created)
    return lines


def read_folder(folder: Path) -> list[list[str]]:
    names = sorted(path.name for path in folder.iterdir())
    assert names == [f"part-{i:05d}.json" for i in range(1, len(names) + 1)]
    return [(folder / name).read_text().splitlines() for name in names]


def records(lines: list[Line]) -> list[Line]:
    return [line for line in lines if line.kind in {"on_time", "older", "late"}]


def regular(lines: list[Line]) -> list[Line]:
    """The phones' own readings: every record but the older-other-activity ones."""
    return [line for line in lines if line.kind in {"on_time", "late"}]


Run = tuple[GenerationSummary, list[Line]]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("clean") / "activity"
    summary = generate_user_activity(folder, events=6000, seed=7, lines_per_file=700)
    return summary, classify(read_folder(folder))


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("faulty") / "activity"
    summary = generate_user_activity(folder, events=20_000, seed=3, faults=True)
    return summary, classify(read_folder(folder))


@pytest.fixture(params=["clean", "faulty"])
def run(request: pytest.FixtureRequest) -> Run:
    return request.getfixturevalue(request.param)


def test_same_seed_gives_same_bytes(tmp_path: Path) -> None:
    def files(name: str, seed: int) -> list[bytes]:
        folder = tmp_path / name
        generate_user_activity(folder, events=5000, seed=seed, faults=True, lines_per_file=700)
        return [path.read_bytes() for path in sorted(folder.iterdir())]

    assert files("a", 5) == files("b", 5)
    assert files("c", 5) != files("d", 6)


def test_summary_matches_the_files(run: Run) -> None:
    summary, lines = run
    found = Counter(line.kind for line in lines)
    valid = records(lines)
    times = [line.created for line in valid]
    assert found["between"] == 0
    assert summary.as_dict() == {
        "lines": len(lines),
        "records": len(valid),
        "users": len({line.record["User"] for line in valid}),
        "duplicates": found["duplicate"],
        "late": found["late"],
        "out_of_order_other_activity": found["older"],
        "malformed": found["malformed"],
        "files": len({line.file for line in lines}),
        "spans": count_runs(lines),
        "first_creation_ns": min(times),
        "last_creation_ns": max(times),
    }
    assert summary.lines == summary.records + summary.duplicates + summary.malformed
    assert summary.first_creation_ns == START_NS


@pytest.mark.parametrize(
    ("fixture", "records", "late", "older", "duplicates", "malformed"),
    [("clean", 6000, 0, 0, 0, 0), ("faulty", 20_000, 100, 100, 200, 60)],
)
def test_counts_follow_the_rates(
    request: pytest.FixtureRequest,
    fixture: str,
    records: int,
    late: int,
    older: int,
    duplicates: int,
    malformed: int,
) -> None:
    summary, _ = request.getfixturevalue(fixture)
    assert (
        summary.records,
        summary.late,
        summary.out_of_order_other_activity,
        summary.duplicates,
        summary.malformed,
        summary.users,
    ) == (records, late, older, duplicates, malformed, 9)


def test_users_are_those_with_a_record_not_the_simulated_ones(tmp_path: Path) -> None:
    summary = generate_user_activity(tmp_path, events=3, faults=False)
    written = {line.record["User"] for line in records(classify(read_folder(tmp_path)))}
    assert summary.users == len(written) == 3


def test_records_have_the_seed_layout(run: Run) -> None:
    _, lines = run
    valid = records(lines)
    devices: dict[str, set[str]] = defaultdict(set)
    for line in valid:
        record = line.record
        assert list(record) == FIELDS
        assert all(type(record[name]) is int for name in ("Arrival_Time", "Creation_Time", "Index"))
        assert all(type(record[axis]) is float for axis in "xyz")
        assert all(abs(record[axis]) < 10 for axis in "xyz")
        assert record["Model"] in MODELS and record["gt"] in ACTIVITIES
        assert record["Device"] in {f"{record['Model']}_1", f"{record['Model']}_2"}
        assert record["Index"] >= 0
        devices[record["User"]].add(record["Device"])
        delay = record["Arrival_Time"] - record["Creation_Time"] // 1_000_000
        if line.kind == "late":
            assert delay >= LATE_MIN_AGE_SECONDS * 1000
        else:
            assert 5 <= delay <= 2000
    # Users a..i, each with one phone.
    assert sorted(devices) == list("abcdefghi")
    assert all(len(names) == 1 for names in devices.values())


def test_lines_are_written_in_arrival_order(run: Run) -> None:
    _, lines = run
    arrivals = [line.record["Arrival_Time"] for line in records(lines)]
    assert arrivals == sorted(arrivals)


def test_on_time_records_are_at_most_2_seconds_out_of_order(run: Run) -> None:
    _, lines = run
    on_time = [line for line in lines if line.kind in {"on_time", "older"}]
    assert max(line.behind for line in on_time) <= OUT_OF_ORDER_MAX_SECONDS * SECOND
    # The disorder is real: many records come after newer ones, some by more than a second.
    assert sum(line.behind > 0 for line in on_time) > len(on_time) // 10
    assert max(line.behind for line in on_time) > SECOND


def test_late_records_are_older_than_the_files_before(faulty: Run) -> None:
    _, lines = faulty
    late = [line for line in lines if line.kind == "late"]
    assert late
    for line in late:
        assert line.behind >= LATE_MIN_AGE_SECONDS * SECOND
        # Older by 30 s than everything in earlier files: with one file per micro-batch, a
        # 5 s watermark from the earlier batches drops it.
        assert line.file >= 2
        assert line.files_newest - line.created >= LATE_MIN_AGE_SECONDS * SECOND
    # Spread over the run, not bunched at the end.
    assert late[0].position < len(lines) // 2 < late[-1].position


def test_duplicates_repeat_a_line_shortly_after(faulty: Run) -> None:
    _, lines = faulty
    last_seen: dict[str, int] = {}
    duplicates = 0
    for line in lines:
        if line.kind == "duplicate":
            assert 0 < line.position - last_seen[line.text] <= DUPLICATE_MAX_DISTANCE
            duplicates += 1
        last_seen[line.text] = line.position
    assert duplicates == 200
    # Same User and Creation_Time as a record, since the whole line is the same.
    keys = Counter((line.record["User"], line.created) for line in records(lines))
    assert max(keys.values()) == 1


def test_older_records_carry_another_activity(faulty: Run) -> None:
    _, lines = faulty
    older = [line for line in lines if line.kind == "older"]
    assert len(older) == 100
    for line in older:
        newest, activity = line.user_newest
        assert 0.5 * SECOND <= newest - line.created <= 1.5 * SECOND
        assert line.record["gt"] != activity
    assert older[0].position < len(lines) // 2 < older[-1].position


def test_without_faults_nothing_is_odd(clean: Run) -> None:
    _, lines = clean
    assert Counter(line.kind for line in lines) == {"on_time": 6000}


def count_runs(lines: list[Line]) -> int:
    return sum(len(user_runs(readings)) for readings in by_user(regular(lines)).values())


def by_user(lines: list[Line]) -> dict[str, list[Line]]:
    users: dict[str, list[Line]] = defaultdict(list)
    for line in sorted(lines, key=lambda line: line.created):
        users[line.record["User"]].append(line)
    return users


def user_runs(readings: list[Line]) -> list[int]:
    return [len(list(run)) for _, run in groupby(line.record["gt"] for line in readings)]


def test_users_switch_activity_after_runs(run: Run) -> None:
    summary, lines = run
    for readings in by_user(regular(lines)).values():
        lengths = user_runs(readings)
        assert len(lengths) >= 2
        # The last run may be cut short by the end of the stream.
        assert all(RUN_READINGS[0] <= n <= RUN_READINGS[1] for n in lengths[:-1])
    assert count_runs(lines) == summary.spans


def test_phones_sample_about_every_200_ms(run: Run) -> None:
    _, lines = run
    for readings in by_user(regular(lines)).values():
        gaps = [b.created - a.created for a, b in pairwise(readings)]
        assert min(gaps) >= 0.9 * SAMPLE_PERIOD_MS * 1e6 - 1
        assert max(gaps) <= 1.1 * SAMPLE_PERIOD_MS * 1e6
        assert sum(gaps) / len(gaps) == pytest.approx(SAMPLE_PERIOD_MS * 1e6, rel=0.02)


def test_index_counts_each_device(run: Run) -> None:
    _, lines = run
    devices: dict[str, list[Line]] = defaultdict(list)
    for line in sorted(records(lines), key=lambda line: line.created):
        devices[line.record["Device"]].append(line)
    for readings in devices.values():
        indexes = [line.record["Index"] for line in readings]
        assert len(set(indexes)) == len(indexes)
        phone = [line.record["Index"] for line in readings if line.kind != "older"]
        assert phone == sorted(phone)


def malformed_kind(line: Line) -> str:
    record = line.record
    if not isinstance(record, dict):
        return "not_json"
    if "User" not in record:
        return "no_user"
    if "Creation_Time" not in record:
        return "no_creation_time"
    assert isinstance(record["Creation_Time"], str)
    return "bad_creation_time"


def test_malformed_lines_cover_every_kind(faulty: Run) -> None:
    _, lines = faulty
    malformed = [line for line in lines if line.kind == "malformed"]
    kinds = Counter(malformed_kind(line) for line in malformed)
    assert set(kinds) == {"not_json", "no_user", "no_creation_time", "bad_creation_time"}
    bad = {line.record["Creation_Time"] for line in malformed if malformed_kind(line)[0] == "b"}
    assert "soon" in bad


@pytest.mark.parametrize(
    ("events", "users", "lines_per_file", "late"),
    [
        (100, 9, 1000, 0),  # too short for any record to fall 30 s behind a closed file
        (100, 1, 1000, 0),
        (5000, 9, 1000, 25),
        (5000, 3, 1000, 25),
        (5000, 9, 4000, 0),  # files too long to close 30 s after a record in time
    ],
)
def test_small_runs_with_faults(
    tmp_path: Path, events: int, users: int, lines_per_file: int, late: int
) -> None:
    folder = tmp_path / "activity"
    summary = generate_user_activity(
        folder, events=events, users=users, lines_per_file=lines_per_file, faults=True
    )
    lines = classify(read_folder(folder))
    assert summary.records == len(records(lines)) == events
    assert summary.late == late and summary.users == users
    assert summary.malformed >= 1 and summary.duplicates >= 1
    assert not [line for line in lines if line.kind == "between"]
    for line in lines:
        if line.kind == "late":
            assert line.files_newest - line.created >= LATE_MIN_AGE_SECONDS * SECOND


@pytest.mark.parametrize(
    "options",
    [
        {"events": 0},
        {"events": 10, "users": 0},
        {"events": 10, "users": 27},
        {"events": 10, "lines_per_file": 0},
    ],
)
def test_rejects_bad_arguments(tmp_path: Path, options: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        generate_user_activity(tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()
