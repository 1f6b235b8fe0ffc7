"""Tests for the synthetic server-log generator (plain Python, no Spark)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from devtools.generators.server_logs import (
    DUPLICATE_MAX_DISTANCE,
    LATE_MIN_AGE_SECONDS,
    LOGGED_OUT,
    SITES,
    GenerationSummary,
    generate_server_logs,
)

STAMP = re.compile(r"(\d{1,2}):(\d{1,2}):(\d{4}) (\d{1,2}):(\d{1,2}):(\d{1,2})")
CUSTOMER = re.compile(r"\d+_CId")
PRODUCT = re.compile(r"\d+_PId")
DOLLARS = re.compile(r"\d+(\.\d+)?\$")
FILE_NAME = re.compile(r"part-\d{5}\.json")


@dataclass
class Line:
    file: int
    text: str
    kind: str
    record: dict | None = None
    when: datetime | None = None


def parse_stamp(value: object) -> datetime | None:
    """Parse ``d:M:yyyy H:m:s`` with or without zero padding; None when it is not a time."""
    match = STAMP.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    day, month, year, hour, minute, second = map(int, match.groups())
    try:
        return datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None


def event_kind(record: dict) -> str:
    (name,) = record["EventType"]
    return {"AddToCart": "add_to_cart", "ProductView": "product_view"}.get(name, "purchase")


def read_lines(folder: Path) -> list[Line]:
    """Re-read the output and classify every line the way a careful consumer would."""
    names = sorted(path.name for path in folder.iterdir())
    assert names == [f"part-{i:05d}.json" for i in range(len(names))]
    lines: list[Line] = []
    valid_texts: set[str] = set()
    newest: datetime | None = None
    for number, name in enumerate(names):
        for text in (folder / name).read_text(encoding="utf-8").splitlines():
            line = classify(number, text, valid_texts, newest)
            if line.when is not None and (newest is None or line.when > newest):
                newest = line.when
            if line.kind in {"add_to_cart", "product_view", "purchase", "late"}:
                valid_texts.add(text)
            lines.append(line)
    return lines


def classify(number: int, text: str, valid: set[str], newest: datetime | None) -> Line:
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return Line(number, text, "malformed")
    if not isinstance(record, dict) or not record:
        return Line(number, text, "malformed")
    when = parse_stamp(record.get("timestamp"))
    if "CustomerId" not in record:
        return Line(number, text, "missing_fields", record, when)
    if when is None:
        return Line(number, text, "bad_timestamps", record)
    if text in valid:
        return Line(number, text, "duplicates", record, when)
    if newest is not None and (newest - when).total_seconds() >= LATE_MIN_AGE_SECONDS:
        return Line(number, text, "late", record, when)
    return Line(number, text, event_kind(record), record, when)


def check_layout(record: dict) -> None:
    assert list(record) == ["timestamp", "CustomerId", "EventType", "Source"]
    assert parse_stamp(record["timestamp"]) is not None
    assert CUSTOMER.fullmatch(record["CustomerId"])
    assert record["Source"] in (*SITES, LOGGED_OUT)
    (name, body) = next(iter(record["EventType"].items()))
    assert len(record["EventType"]) == 1
    if name in {"AddToCart", "ProductView"}:
        assert set(body) == {"ProductId", "Price"}
        assert PRODUCT.fullmatch(body["ProductId"])
        assert isinstance(body["Price"], float) and body["Price"] > 0
        return
    assert name == "Purchase" and 1 <= len(body) <= 3
    for item in body:
        assert set(item) == {"ProductId", "Price", "Quantity"}
        assert PRODUCT.fullmatch(item["ProductId"])
        assert DOLLARS.fullmatch(item["Price"]) and float(item["Price"][:-1]) > 0
        assert isinstance(item["Quantity"], int) and item["Quantity"] >= 1


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[GenerationSummary, list[Line]]:
    folder = tmp_path_factory.mktemp("clean") / "logs"
    summary = generate_server_logs(folder, events=4000, seed=7, lines_per_file=700)
    return summary, read_lines(folder)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[GenerationSummary, list[Line]]:
    folder = tmp_path_factory.mktemp("faulty") / "logs"
    summary = generate_server_logs(folder, events=5000, seed=3, faults=True, lines_per_file=400)
    return summary, read_lines(folder)


def counts(lines: list[Line]) -> dict[str, int]:
    found: dict[str, int] = defaultdict(int)
    for line in lines:
        found[line.kind] += 1
    return found


def test_same_seed_gives_same_bytes(tmp_path: Path) -> None:
    def run(name: str, seed: int) -> list[bytes]:
        folder = tmp_path / name
        generate_server_logs(folder, events=800, seed=seed, faults=True, lines_per_file=300)
        return [path.read_bytes() for path in sorted(folder.iterdir())]

    assert run("a", 5) == run("b", 5)
    assert run("a2", 5) != run("c", 6)


def test_valid_lines_match_the_layout(clean: tuple[GenerationSummary, list[Line]]) -> None:
    summary, lines = clean
    assert summary.events == 4000 and len(lines) == 4000
    for line in lines:
        assert line.record is not None, line.text
        check_layout(line.record)
    stamps = [line.record["timestamp"] for line in lines]
    assert any(re.search(r" \d:", stamp) for stamp in stamps), "no unpadded hour"
    assert any(re.search(r":\d$", stamp) for stamp in stamps), "no unpadded second"


def test_clean_run_is_in_event_time_order(clean: tuple[GenerationSummary, list[Line]]) -> None:
    _, lines = clean
    times = [line.when for line in lines]
    assert times == sorted(times)
    assert len({line.record["CustomerId"] for line in lines}) == 40


def test_summary_matches_the_files(clean, faulty) -> None:
    for summary, lines in (clean, faulty):
        found = counts(lines)
        assert summary.lines == len(lines)
        assert summary.events == sum(summary.by_type.values())
        assert summary.by_type == {
            kind: found[kind] for kind in ("add_to_cart", "product_view", "purchase")
        }
        for kind in ("malformed", "missing_fields", "bad_timestamps", "duplicates", "late"):
            assert getattr(summary, kind) == found[kind], kind
        parts = summary.events + summary.malformed + summary.missing_fields
        parts += summary.bad_timestamps + summary.duplicates + summary.late
        assert summary.lines == parts
        assert summary.files == lines[-1].file + 1


def test_files_are_full_except_the_last(faulty) -> None:
    summary, lines = faulty
    sizes = counts_per_file(lines)
    assert sizes[:-1] == [400] * (summary.files - 1)
    assert 0 < sizes[-1] <= 400


def counts_per_file(lines: list[Line]) -> list[int]:
    sizes: dict[int, int] = defaultdict(int)
    for line in lines:
        sizes[line.file] += 1
    return [sizes[number] for number in sorted(sizes)]


def test_faults_are_about_one_percent_each(faulty) -> None:
    summary, _ = faulty
    assert summary.events == 5000
    for kind in ("malformed", "missing_fields", "bad_timestamps", "duplicates"):
        assert getattr(summary, kind) == 50, kind
    assert 20 <= summary.late <= 50


def test_duplicates_copy_a_recent_valid_line(faulty) -> None:
    _, lines = faulty
    on_time = [line for line in lines if line.kind != "late"]
    seen: dict[str, int] = {}
    for position, line in enumerate(on_time):
        if line.kind == "duplicates":
            assert 0 < position - seen[line.text] <= DUPLICATE_MAX_DISTANCE
        elif line.kind in {"add_to_cart", "product_view", "purchase"}:
            seen[line.text] = position
    assert any(line.kind == "duplicates" for line in lines)


def test_late_events_are_behind_the_files_before_the_previous_one(faulty) -> None:
    # Whichever batch's watermark a reader judges late rows by (this one's or the previous
    # one's), with one file per batch a line old compared with files two back is late.
    _, lines = faulty
    newest_by_file: dict[int, datetime] = {}
    for line in lines:
        if line.when is not None and line.kind != "late":
            newest_by_file[line.file] = max(line.when, newest_by_file.get(line.file, line.when))
    late = [line for line in lines if line.kind == "late"]
    for line in late:
        check_layout(line.record)
        newest = max(t for f, t in newest_by_file.items() if f <= line.file - 2)
        assert (newest - line.when).total_seconds() >= LATE_MIN_AGE_SECONDS
    assert late


def test_late_events_are_not_copies(faulty) -> None:
    _, lines = faulty
    late = [line for line in lines if line.kind == "late"]
    others = {line.text for line in lines if line.kind != "late"}
    assert len({line.text for line in late}) == len(late)
    assert not others & {line.text for line in late}
    valid = [line for line in lines if line.kind != "duplicates" and line.record]
    keys = [
        (line.record["CustomerId"], line.when)
        for line in valid
        if "CustomerId" in line.record and line.when is not None
    ]
    assert len(keys) == len(set(keys)), "a late event reuses a customer's event time"


def test_small_run_has_every_fault(tmp_path: Path) -> None:
    summary = generate_server_logs(tmp_path / "logs", events=100, faults=True, lines_per_file=50)
    for kind in ("malformed", "missing_fields", "bad_timestamps", "duplicates", "late"):
        assert getattr(summary, kind) >= 1, kind
    assert summary.events == 100


def test_customers_behave_like_shoppers(clean) -> None:
    _, lines = clean
    by_customer: dict[str, list[Line]] = defaultdict(list)
    for line in lines:
        by_customer[line.record["CustomerId"]].append(line)
    gaps = carted_purchases = 0
    for history in by_customer.values():
        carted: set[str] = set()
        for before, after in pairwise(history):
            gaps += (after.when - before.when).total_seconds() > 300
        for line in history:
            ((name, body),) = line.record["EventType"].items()
            if name == "AddToCart":
                carted.add(body["ProductId"])
            elif name == "Purchase":
                carted_purchases += any(item["ProductId"] in carted for item in body)
    assert gaps > 0
    assert carted_purchases > 0
    assert any(line.record["Source"] == LOGGED_OUT for line in lines)
    assert {event_kind(line.record) for line in lines} == {
        "add_to_cart",
        "product_view",
        "purchase",
    }


def test_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        generate_server_logs(tmp_path, events=10)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert generate_server_logs(empty, events=10).files == 1


def test_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        generate_server_logs(tmp_path / "a", events=0)
    with pytest.raises(ValueError):
        generate_server_logs(tmp_path / "b", events=10, lines_per_file=0)
    with pytest.raises(ValueError, match="ramp_up_seconds"):
        generate_server_logs(tmp_path / "c", events=10, ramp_up_seconds=-1)


def test_a_short_ramp_up_opens_one_session_per_customer(tmp_path: Path) -> None:
    """As many customers as events, all starting within a second: each event is a customer's
    first, and all of them fall in that second (the benchmark's open-sessions input)."""
    generate_server_logs(tmp_path / "logs", events=500, customers=500, ramp_up_seconds=1)
    lines = read_lines(tmp_path / "logs")
    customers = [line.record["CustomerId"] for line in lines]
    assert len(set(customers)) == len(customers) == 500
    assert max(line.when for line in lines) - min(line.when for line in lines) <= timedelta(
        seconds=1
    )


def test_progress_bar_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = generate_server_logs(tmp_path / "logs", events=300, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "300" in captured.err
    assert summary.as_dict()["events"] == 300
    assert summary.as_dict()["by_type"] == summary.by_type
