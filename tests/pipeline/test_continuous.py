"""A run without --once: picks up files as they arrive, fires wall-clock timeouts, stops cleanly."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta

from engine.definitions.pipeline import Registry
from engine.plan import plan_pipeline
from engine.runtime.query_control import OPENING, await_sources
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import read_table

LINES = """\
{"timestamp":"20:06:2019 1:0:0", "CustomerId" : "2_CId","EventType": { "ProductView": {"ProductId":"140_PId","Price": 9.0}}, "Source" : "www.filpkart.mobile.com"}
{"timestamp":"20:06:2019 1:0:1", "CustomerId" : "2_CId","EventType": { "AddToCart": {"ProductId":"141_PId","Price": 9.5}}, "Source" : "www.filpkart.mobile.com"}
"""  # noqa: E501


def wait_until(predicate, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def test_processing_time_timeout_then_clean_stop(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    lake = tmp_path / "lake"
    pipeline = (
        Registry()
        .get("server_logs")
        .with_settings({"session_timeout_mode": "processing_time", "session_timeout": "3 seconds"})
    )
    pipeline = replace(
        pipeline, queries=tuple(replace(q, trigger="1 second") for q in pipeline.queries)
    )
    stop = threading.Event()
    done: dict = {}

    def run() -> None:
        opts = RunOptions(lake=lake, input_path=str(folder), quiet=True)
        done["result"] = run_pipeline(spark, plan_pipeline(pipeline), opts, stop=stop)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        # The file arrives while the query is already running (its tables are created first).
        wait_until(lambda: (lake / "sessions" / "_delta_log" / f"{0:020}.json").exists())
        (folder / "part-1.json").write_text(LINES)

        def closed() -> list[dict]:
            return [s for s in read_table(lake, "sessions") if s["end_reason"] == "timeout"]

        wait_until(lambda: bool(closed()))
    finally:
        stop.set()
        thread.join(180)
    assert not thread.is_alive()
    assert not spark.streams.active
    (session,) = read_table(lake, "sessions")
    last = datetime(2019, 6, 20, 1, 0, 1)
    assert session["total_events"] == 2
    assert not session["logged_in"]
    assert session["session_end"].replace(tzinfo=None) == last + timedelta(seconds=3)
    (cart,) = read_table(lake, "carts")
    assert cart["total_items"] == 1
    assert done["result"].written("main")["events"] == 2


def test_a_started_query_has_opened_its_sources(spark, tmp_path):
    # Queries open their sources one at a time: a Python data source's readers share a map
    # that each one changes, unguarded, as it opens (query_control.await_sources).
    query = (
        spark.readStream.format("rate")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        await_sources(query)
        assert query.isActive
        assert query.status["message"] not in OPENING
    finally:
        query.stop()
