"""user_activity on a hand-made input with known duplicates, late and out-of-order events."""

from __future__ import annotations

import io
from datetime import datetime

import pytest

from engine.definitions.pipeline import Registry
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import PROJECT, read_table, staged

SCENARIO = PROJECT / "tests" / "data" / "user_activity_scenario"
T0 = datetime(2015, 2, 23, 10, 18, 53)

# Worked out by hand from the scenario files (seconds after T0):
# part 1: a stand 0, 1, walk 2 (closes the stand run), a duplicate of a@1; b bike 0, 3; garbage
# part 2: a sit 1.8 (older than the walk run's end, another activity: ignored), walk 2.5, walk
#         1.9 (the run's activity: extends it back); b stand 10 (closes bike). Watermark 5.
# part 3: a walk 4 (behind the watermark: late), stand 12 (closes walk); a duplicate of b@10;
#         a record without User.
EXPECTED_SPANS = [
    ("a", 1, "stand", 0.0, 1.0, 2, True),
    ("a", 2, "walk", 1.9, 2.5, 3, True),
    ("a", 3, "stand", 12.0, 12.0, 1, False),
    ("b", 1, "bike", 0.0, 3.0, 2, True),
    ("b", 2, "stand", 10.0, 10.0, 1, False),
]


# Tables written by Spark (delta-spark), and by delta-rs on the embedded path.
@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_scenario_gives_exact_spans_counts_and_accounting(spark, tmp_path, writer):
    lake = tmp_path / "lake"
    pipeline = Registry().get("user_activity").with_settings({"source.maxFilesPerTrigger": "1"})
    folder = staged(SCENARIO, tmp_path / "in")
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True, writer=writer)
    result = run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)

    spans = [
        (
            r["user"],
            r["span_no"],
            r["activity"],
            (r["span_start"].replace(tzinfo=None) - T0).total_seconds(),
            (r["span_end"].replace(tzinfo=None) - T0).total_seconds(),
            r["events"],
            r["closed"],
        )
        for r in read_table(lake, "activity_spans")
    ]
    assert sorted(spans) == EXPECTED_SPANS
    # Duplicates never count; the ignored older event is still an event of the user.
    counts = {r["user"]: r["events"] for r in read_table(lake, "user_event_counts")}
    assert counts == {"a": 7, "b": 3}
    totals = result.listener.totals["main"]
    assert (totals.source_rows, totals.accepted, totals.duplicates, totals.late) == (15, 10, 2, 1)
    assert sorted(r["reason"] for r in read_table(lake, "quarantine")) == [
        "malformed JSON",
        "missing User",
    ]
    assert totals.handler_counts == {"activity_span_updates": {"ignored_older_other_activity": 1}}
    from engine.quality import validate_lake

    checked = validate_lake(lake, tmp_path / "report", pipeline.tables)
    assert checked.passed and len(checked.results) == 3
    report = io.StringIO()
    result.report(report)
    assert "handler activity_span_updates: ignored_older_other_activity 1\n" in report.getvalue()
