"""Tests for the synthetic sensor-reading generator (plain Python, no Spark)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from devtools.broker import Broker
from devtools.generators.sensor_cep import (
    ANOMALY_RATE,
    DUPLICATE_MAX_DISTANCE,
    LATE_MIN_AGE_SECONDS,
    OUT_OF_ORDER_MAX_SECONDS,
    READINGS_PER_SECOND,
    START_TIME,
    GenerationSummary,
    SensorLines,
    generate_sensor_cep,
)
from engine.errors import UserError
from tests.conftest import consume

STAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}")
STAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


@dataclass
class Line:
    position: int
    text: str
    kind: str  # on_time, late, duplicate, malformed, or between (neither on time nor late)
    record: dict | None = None
    when: datetime | None = None
    behind: float = 0.0  # seconds behind the newest reading written before it


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not STAMP.fullmatch(value):
        return None
    try:
        return datetime.strptime(value, STAMP_FORMAT)
    except ValueError:
        return None


def is_reading(record: object) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("device_id"), int)
        and isinstance(record.get("sensor_freq"), float)
        and parse_time(record.get("event_time")) is not None
    )


def classify(texts: list[str]) -> list[Line]:
    """Sort every line the way a careful consumer would, in write order."""
    lines: list[Line] = []
    seen: set[str] = set()
    newest: datetime | None = None
    for position, text in enumerate(texts):
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            record = None
        if not is_reading(record):
            lines.append(Line(position, text, "malformed", record))
            continue
        when = parse_time(record["event_time"])
        if text in seen:
            lines.append(Line(position, text, "duplicate", record, when))
            continue
        seen.add(text)
        behind = 0.0 if newest is None else max(0.0, (newest - when).total_seconds())
        if behind <= OUT_OF_ORDER_MAX_SECONDS:
            kind = "on_time"
        elif behind >= LATE_MIN_AGE_SECONDS:
            kind = "late"
        else:
            kind = "between"
        lines.append(Line(position, text, kind, record, when, behind))
        newest = when if newest is None else max(newest, when)
    return lines


def read_folder(folder: Path) -> list[str]:
    names = sorted(path.name for path in folder.iterdir())
    assert names == [f"part-{i:05d}.json" for i in range(1, len(names) + 1)]
    return [text for name in names for text in (folder / name).read_text().splitlines()]


Run = tuple[GenerationSummary, list[Line]]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("clean") / "readings"
    summary = generate_sensor_cep(folder, events=6000, seed=7, lines_per_file=1000)
    return summary, classify(read_folder(folder))


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("faulty") / "readings"
    summary = generate_sensor_cep(folder, events=20_000, seed=3, faults=True, lines_per_file=2500)
    return summary, classify(read_folder(folder))


@pytest.fixture(params=["clean", "faulty"])
def run(request: pytest.FixtureRequest) -> Run:
    return request.getfixturevalue(request.param)


def test_same_seed_gives_same_bytes(tmp_path: Path) -> None:
    def files(name: str, seed: int) -> list[bytes]:
        folder = tmp_path / name
        generate_sensor_cep(folder, events=5000, seed=seed, faults=True, lines_per_file=700)
        return [path.read_bytes() for path in sorted(folder.iterdir())]

    assert files("a", 5) == files("b", 5)
    assert files("c", 5) != files("d", 6)


def test_readings_have_the_seed_layout(run: Run) -> None:
    _, lines = run
    readings = [line for line in lines if line.kind in {"on_time", "late"}]
    for line in readings:
        # Same keys, order and spacing as json.dumps: the seed's layout exactly.
        assert json.dumps(line.record) == line.text
        assert list(line.record) == ["device_id", "sensor_freq", "event_time"]
        assert 100_000 <= line.record["device_id"] <= 999_999
    assert min(line.when for line in readings) == START_TIME


def test_summary_matches_the_files(run: Run) -> None:
    summary, lines = run
    found = Counter(line.kind for line in lines)
    readings = [line for line in lines if line.kind in {"on_time", "late"}]
    times = [line.when for line in readings]
    assert found["between"] == 0
    assert summary.as_dict() == {
        "lines": len(lines),
        "events": len(readings),
        "anomalies": sum(line.record["sensor_freq"] < 0 for line in readings),
        "late": found["late"],
        "duplicates": found["duplicate"],
        "malformed": found["malformed"],
        "devices": len({line.record["device_id"] for line in readings}),
        "files": summary.files,
        "first_event_time": min(times).strftime(STAMP_FORMAT)[:-3],
        "last_event_time": max(times).strftime(STAMP_FORMAT)[:-3],
    }
    assert summary.lines == summary.events + summary.duplicates + summary.malformed


@pytest.mark.parametrize(
    ("fixture", "events", "anomalies", "late", "duplicates", "malformed", "devices"),
    [
        ("clean", 6000, 60, 0, 0, 0, 3),
        ("faulty", 20_000, 200, 100, 60, 60, 10),
    ],
)
def test_counts_follow_the_rates(
    request: pytest.FixtureRequest,
    fixture: str,
    events: int,
    anomalies: int,
    late: int,
    duplicates: int,
    malformed: int,
    devices: int,
) -> None:
    summary, _ = request.getfixturevalue(fixture)
    assert (
        summary.events,
        summary.anomalies,
        summary.late,
        summary.duplicates,
        summary.malformed,
        summary.devices,
    ) == (events, anomalies, late, duplicates, malformed, devices)
    assert anomalies == round(events * ANOMALY_RATE)


def test_on_time_readings_are_at_most_25_seconds_out_of_order(run: Run) -> None:
    _, lines = run
    on_time = [line for line in lines if line.kind == "on_time"]
    assert max(line.behind for line in on_time) <= OUT_OF_ORDER_MAX_SECONDS
    # The disorder is real: many readings come after newer ones, some by many seconds.
    assert sum(line.behind > 0 for line in on_time) > len(on_time) // 10
    assert max(line.behind for line in on_time) > 15


def test_late_readings_are_at_least_90_seconds_behind(faulty: Run) -> None:
    _, lines = faulty
    late = [line for line in lines if line.kind == "late"]
    assert late
    assert min(line.behind for line in late) >= LATE_MIN_AGE_SECONDS
    # Spread over the run, not bunched at the end.
    assert late[0].position < len(lines) // 2 < late[-1].position


def test_readings_come_at_about_20_per_second(clean: Run) -> None:
    summary, lines = clean
    times = sorted(line.when for line in lines)
    span = (times[-1] - times[0]).total_seconds()
    assert span == pytest.approx(summary.events / READINGS_PER_SECOND, rel=0.05)
    per_minute = Counter(int((t - START_TIME).total_seconds() // 60) for t in times)
    full_minutes = [per_minute[m] for m in range(int(span // 60))]
    assert all(1100 <= count <= 1300 for count in full_minutes), full_minutes


def test_anomalies_are_negative_and_other_readings_positive(faulty: Run) -> None:
    _, lines = faulty
    by_device: dict[int, list[float]] = {}
    for line in lines:
        if line.kind in {"on_time", "late"}:
            by_device.setdefault(line.record["device_id"], []).append(line.record["sensor_freq"])
    anomalies = [f for values in by_device.values() for f in values if f < 0]
    assert len(anomalies) == 200
    for values in by_device.values():
        normal = [f for f in values if f >= 0]
        assert min(normal) >= 0.5
        assert 15 <= sum(normal) / len(normal) <= 85
    # Each device has its own level.
    means = sorted(sum(v) / len(v) for v in by_device.values())
    assert means[-1] - means[0] > 10


def test_duplicates_repeat_a_line_shortly_after(faulty: Run) -> None:
    _, lines = faulty
    last_seen: dict[str, int] = {}
    duplicates = 0
    for line in lines:
        if line.kind == "duplicate":
            assert 0 < line.position - last_seen[line.text] <= DUPLICATE_MAX_DISTANCE
            assert line.text in last_seen
            duplicates += 1
        last_seen[line.text] = line.position
    assert duplicates == 60


def malformed_kind(line: Line) -> str:
    if line.record is None:
        return "not_json"
    if "event_time" not in line.record:
        return "no_event_time"
    if "device_id" not in line.record:
        return "no_device_id"
    assert parse_time(line.record["event_time"]) is None
    return "bad_event_time"


def test_malformed_lines_cover_every_kind(faulty: Run) -> None:
    _, lines = faulty
    kinds = Counter(malformed_kind(line) for line in lines if line.kind == "malformed")
    assert set(kinds) == {"not_json", "no_event_time", "no_device_id", "bad_event_time"}
    bad = {
        line.record.get("event_time")
        for line in lines
        if line.kind == "malformed" and isinstance(line.record, dict)
    }
    assert "yesterday" in bad


def test_faults_keep_the_same_readings() -> None:
    def readings(faults: bool) -> set[str]:
        texts = [text for text, _ in SensorLines(events=6000, seed=11, faults=faults)]
        return {line.text for line in classify(texts) if line.kind in {"on_time", "late"}}

    assert readings(faults=False) == readings(faults=True)


@pytest.mark.parametrize(
    ("events", "late"),
    [
        (100, 0),  # too short for any reading to fall 90 s behind
        (5000, 25),
    ],
)
def test_small_runs_with_faults(events: int, late: int) -> None:
    stream = SensorLines(events=events, faults=True)
    lines = classify([text for text, _ in stream])
    summary = stream.summary()
    assert summary.events == events and summary.late == late
    assert summary.malformed >= 1 and summary.duplicates >= 1 and summary.anomalies >= 1
    assert not [line for line in lines if line.kind == "between"]


@pytest.mark.parametrize(
    "options",
    [{"events": 0}, {"events": 10, "devices": 0}, {"events": 10, "lines_per_file": 0}],
)
def test_rejects_bad_arguments(tmp_path: Path, options: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        generate_sensor_cep(tmp_path / "out", **options)


@pytest.mark.parametrize(
    "url",
    ["kafka://", "kafka://host/topic", "kafka://host:9092", "kafka://host:9092/", "kafka:/h:1/t"],
)
def test_rejects_a_malformed_kafka_url(url: str) -> None:
    with pytest.raises(UserError, match=r"^--out: expected kafka://HOST:PORT/TOPIC"):
        generate_sensor_cep(url, events=10)


@pytest.mark.parametrize("create_topic", [True, False])
def test_kafka_output_matches_the_folder(tmp_path: Path, create_topic: bool) -> None:
    folder = tmp_path / "readings"
    expected = generate_sensor_cep(folder, events=500, seed=4, faults=True)
    with Broker().start(["readings"] if create_topic else []) as broker:
        summary = generate_sensor_cep(
            f"kafka://{broker.servers}/readings", events=500, seed=4, faults=True
        )
        messages = [
            (m.key(), m.value()) for m in consume(broker.servers, "readings", expect=summary.lines)
        ]
    assert summary == GenerationSummary(**{**expected.as_dict(), "files": 0})
    assert [value.decode() for _, value in messages] == read_folder(folder)
    for key, value in messages:
        try:
            record = json.loads(value)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and "device_id" in record:
            assert key == str(record["device_id"]).encode()
        else:
            assert key is None


def test_unreachable_broker_is_a_user_error() -> None:
    started = time.monotonic()
    with pytest.raises(UserError, match=r"^--out: kafka broker 127\.0\.0\.1:1 unreachable"):
        generate_sensor_cep("kafka://127.0.0.1:1/x", events=10)
    assert time.monotonic() - started < 15


def test_sensor_lines_are_read_once() -> None:
    stream = SensorLines(events=10)
    assert len(list(stream)) == 10
    with pytest.raises(RuntimeError):
        iter(stream)
