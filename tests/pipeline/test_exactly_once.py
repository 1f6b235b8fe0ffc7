"""Generated logs with faults: every line accounted for, and a SIGKILL mid-stream followed by a
restart gives exactly the tables of an uninterrupted run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devtools.generators.server_logs import GenerationSummary, generate_server_logs
from engine.definitions.pipeline import Registry
from engine.lake.event_log import EventLog
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, RunResult, run_pipeline
from tests.conftest import PROJECT, batches_committed, read_table
from tests.pipeline.spark_processes import kill_after_batches

TABLES = ("events", "sessions", "carts", "purchases", "quarantine")
ONE_FILE_PER_BATCH = {"source.maxFilesPerTrigger": "1"}


def snapshot(lake: Path) -> dict[str, list[dict]]:
    # ingested_at is the wall-clock time of the batch, different in every run.
    return {t: read_table(lake, t, drop=("ingested_at",)) for t in TABLES}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, GenerationSummary]:
    folder = tmp_path_factory.mktemp("gen") / "in"
    summary = generate_server_logs(folder, events=2000, seed=7, faults=True, lines_per_file=400)
    assert summary.files >= 5 and summary.late and summary.duplicates
    return folder, summary


@pytest.fixture(scope="module")
def reference(spark, generated, tmp_path_factory) -> tuple[Path, RunResult]:
    folder, _ = generated
    lake = tmp_path_factory.mktemp("reference") / "lake"
    pipeline = Registry().get("server_logs").with_settings(ONE_FILE_PER_BATCH)
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True)
    return lake, run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)


def test_every_line_is_an_event_a_quarantine_row_a_duplicate_or_late(generated, reference):
    _, summary = generated
    lake, result = reference
    totals = result.listener.totals["main"]
    quarantined = result.rows("main")["quarantine"]
    assert totals.accepted == summary.events
    assert totals.duplicates == summary.duplicates
    assert totals.late == summary.late
    assert quarantined == summary.malformed + summary.missing_fields + summary.bad_timestamps
    assert totals.source_rows == summary.lines
    assert totals.accepted + totals.duplicates + totals.late + quarantined == summary.lines
    reasons = {r["reason"].split(":")[0] for r in read_table(lake, "quarantine")}
    assert reasons == {"malformed JSON", "missing CustomerId", "unparseable timestamp"}
    sessions = read_table(lake, "sessions")
    assert sum(s["total_events"] for s in sessions) == summary.events
    # The event log: the run's start and stop, and each batch once with its figures.
    events = EventLog(lake).read().to_pylist()
    assert [e["kind"] for e in events if e["kind"] != "batch"] == ["run_start", "run_stop"]
    assert events[-1]["status"] == "finished"
    batches = [e for e in events if e["kind"] == "batch"]
    assert [e["batch_id"] for e in batches] == list(range(totals.last_batch + 1))
    assert sum(e["rows_in"] for e in batches) == summary.lines
    assert sum(e["duplicates"] for e in batches) == summary.duplicates
    assert sum(e["rows_out"] for e in batches) == sum(result.written("main").values())


# The reference lake is written by Spark; the embedded delta-rs writer must give it too.
@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_sigkill_mid_stream_then_restart_gives_the_same_tables(
    generated, reference, tmp_path, writer
):
    folder, _ = generated
    lake, _ = reference
    lake2 = tmp_path / "lake"
    command = [
        sys.executable,
        str(PROJECT / "runner.py"),
        "run",
        "server_logs",
        "--once",
        "--input",
        str(folder),
        "--lake",
        str(lake2),
        "--conf",
        "source.maxFilesPerTrigger=1",
        "--conf",
        f"lake.writer={writer}",
    ]
    checkpoint = lake2 / "_checkpoints" / "server_logs" / "main"
    kill_after_batches(command, checkpoint, 2)
    files = len(list(folder.glob("*.json")))
    assert batches_committed(checkpoint) < files, "the kill must land mid-stream"

    restart = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert restart.returncode == 0, restart.stderr
    assert snapshot(lake2) == snapshot(lake)
    # Each committed batch is in the event log once, whether logged live or after the kill.
    logged = [e["batch_id"] for e in EventLog(lake2).read().to_pylist() if e["kind"] == "batch"]
    assert sorted(logged) == list(range(batches_committed(checkpoint)))
