"""Spark's MERGE of a batch reads only the files that can hold the batch's keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from engine.sinks.spark_delta import SparkDeltaSink
from engine.testing import read_table
from tests.unit.test_sinks import TABLES, batch

START = datetime(2019, 6, 20, 0, 46, 1, 123456, tzinfo=UTC)


def sessions(spark, customers: list[str], start: datetime, events: int):
    row = {"last_event_time": start + timedelta(seconds=5), "total_events": events}
    rows = [{"customer_id": c, "session_start": start, **row, "logged_in": True} for c in customers]
    table = pa.Table.from_pylist(rows, schema=TABLES["sessions"].arrow_schema)
    return spark.createDataFrame(table).repartition(1)


def added_files(table: Path, version: int) -> list[Path]:
    log = table / "_delta_log" / f"{version:020}.json"
    actions = [json.loads(line) for line in log.open()]
    return [table / a["add"]["path"] for a in actions if "add" in a]


def test_a_merge_reads_only_the_files_that_can_hold_its_keys(spark, tmp_path):
    sink = SparkDeltaSink(TABLES["sessions"], tmp_path, spark)
    sink.prepare()
    for n in range(3):  # three batches of five sessions each, in key ranges of their own
        customers = [f"c{n}{i}" for i in range(5)]
        sink.write(sessions(spark, customers, START + timedelta(hours=n), 1), batch(n))
    # The files of the first and last batch are taken away: a MERGE that opened them would fail.
    away = [f for version in (1, 3) for f in added_files(sink.path, version)]
    for f in away:
        f.rename(f.with_suffix(".away"))
    # One session of the middle batch goes on. Its key has microseconds: the range's text
    # must still match the stored row, or the MERGE would insert a second one.
    sink.write(sessions(spark, ["c12"], START + timedelta(hours=1), 7), batch(3))
    for f in away:
        f.with_suffix(".away").rename(f)
    table = read_table(tmp_path, "sessions")
    assert len(table) == 15
    assert [r["total_events"] for r in table if r["customer_id"] == "c12"] == [7]
