"""order_status against the real order server (a TCP socket) and over a real Kafka topic."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from deltalake import DeltaTable

from devtools.broker import Broker, free_port
from devtools.generators.order_status import generate_order_status
from devtools.order_server import OrderServer
from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.plan import plan_pipeline
from engine.quality import validate_lake
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import PROJECT, copy_project, edit, read_table
from tests.pipeline.test_cli import runner


def sums(lake) -> tuple[int, int, Counter]:
    counts = read_table(lake, "order_counts")
    totals = read_table(lake, "order_totals")
    by_status = Counter({r["status"]: r["orders"] for r in totals})
    return sum(r["orders"] for r in counts), sum(by_status.values()), by_status


def tables_made(lake) -> bool:
    """Both tables have their first commit: a folder alone may be a table being created."""
    return all(DeltaTable.is_deltatable(str(lake / t)) for t in ("order_counts", "order_totals"))


def test_counts_and_totals_add_up_to_what_the_server_sent(spark, tmp_path):
    lake = tmp_path / "lake"
    port = free_port()
    server = OrderServer(port=port, rate=20, count=120, seed=5).listen()
    served: dict = {}
    serving = threading.Thread(
        target=lambda: served.update(summary=server.serve(threading.Event()))
    )
    serving.start()
    pipeline = Registry().get("order_status").with_settings({"source.port": str(port)})
    stop = threading.Event()
    out = io.StringIO()
    run = threading.Thread(
        target=lambda: run_pipeline(
            spark, plan_pipeline(pipeline), RunOptions(lake=lake, quiet=True), stop=stop, out=out
        )
    )
    run.start()
    try:
        serving.join(120)
        assert served["summary"].total == 120
    finally:
        # A clean stop processes what the socket delivered before it stops.
        stop.set()
        run.join(180)
        server.close()
    windows, total, by_status = sums(lake)
    assert windows == total == 120
    assert by_status == Counter(served["summary"].by_status)
    rows = read_table(lake, "order_counts")
    assert all((r["window_end"] - r["window_start"]).seconds == 5 for r in rows)
    assert len({r["window_start"] for r in rows}) >= 2  # 6 s of orders span at least two windows
    checked = validate_lake(lake, tmp_path / "report", ["order_counts", "order_totals"])
    assert checked.passed

    # A stateful edit is refused, with advice that a socket can take: --full-refresh, which
    # the same command refuses for a socket, was advised.
    project = copy_project(tmp_path / "project")
    sql = project / "sql" / "order_status" / "order_totals.sql"
    edit(sql, "max(arrival_time) AS updated_at", "min(arrival_time) AS updated_at")
    plan = runner(
        "--pipelines", str(project / "pipelines"), "run", "order_status", "--dry-run",
        "--lake", str(lake),
    )  # fmt: skip
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert plan.stdout.splitlines()[-1].endswith(
        "undo the change, or write order_counts, order_totals, quarantine anew in another lake "
        "(--lake): pipeline order_status reads a socket, which cannot send its lines again, so "
        "--full-refresh cannot rebuild them"
    ), plan.stdout


def test_a_stop_ends_while_the_server_keeps_sending(spark, tmp_path):
    lake = tmp_path / "lake"
    server = OrderServer(port=free_port(), rate=50, seed=6).listen()
    served: dict = {}
    serving_stop = threading.Event()
    serving = threading.Thread(target=lambda: served.update(summary=server.serve(serving_stop)))
    serving.start()
    pipeline = Registry().get("order_status").with_settings({"source.port": str(server.port)})
    stop = threading.Event()
    run = threading.Thread(
        target=lambda: run_pipeline(
            spark, plan_pipeline(pipeline), RunOptions(lake=lake, quiet=True), stop=stop
        )
    )
    run.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (tables_made(lake) and sums(lake)[1]):
            time.sleep(0.5)
        stop.set()
        run.join(60)
        assert not run.is_alive() and serving.is_alive()  # stopped while orders kept coming
    finally:
        stop.set()
        serving_stop.set()
        run.join(180)
        serving.join(30)
        server.close()
    windows, total, _ = sums(lake)
    assert 0 < windows == total <= served["summary"].total


def serve(server: OrderServer, into: dict) -> None:
    into["summary"] = server.serve(threading.Event())


def test_a_restart_goes_on_from_the_checkpoint_and_loses_nothing_sent_while_up(tmp_path):
    # Spark's own socket source numbered each connection's lines from -1 again, so the second
    # run failed ("Offsets committed out of order") and its orders were lost. The server sends
    # only while a run reads it (a count, waited for): what a stopped run misses is lost.
    lake, port = tmp_path / "lake", free_port()
    sent: Counter = Counter()
    for count, seed, stop_signal in ((40, 1, signal.SIGTERM), (30, 2, signal.SIGINT)):
        with OrderServer(port=port, rate=20, count=count, seed=seed) as server:
            served: dict = {}
            serving = threading.Thread(target=serve, args=(server, served))
            serving.start()
            command = ["run", "order_status", "--lake", str(lake), "--conf"]
            proc = subprocess.Popen(
                [sys.executable, str(PROJECT / "runner.py"), *command, f"source.port={port}"],
                cwd=PROJECT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            serving.join(240)
            assert served["summary"].total == count, proc.poll()
            proc.send_signal(stop_signal)
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err
            assert not err.strip()
            assert "query orders: " in out  # the report of a run that ended cleanly
            sent.update(served["summary"].by_status)
    windows, total, by_status = sums(lake)
    assert windows == total == 70
    assert by_status == sent


# The Python source is the one a tansu broker or a Spark without the connector's jar gets: it
# refused the spec's socket options (host, port), which the run carried over to the topic.
@pytest.mark.parametrize("connector", ["native", "python"])
def test_the_same_sql_over_a_kafka_topic(spark, tmp_path, connector):
    with Broker().start(["orders"]) as broker:
        summary = generate_order_status(
            f"kafka://{broker.servers}/orders", events=300, seed=2, faults=True
        )
        pipeline = (
            Registry()
            .get("order_status")
            .with_settings(
                {
                    "source.kind": "kafka",
                    "source.topic": "orders",
                    "kafka.bootstrap.servers": broker.servers,
                    "source.maxRecordsPerBatch": "100",
                    "source.connector": connector,
                }
            )
        )
        lake = tmp_path / "lake"
        run_pipeline(
            spark, plan_pipeline(pipeline, once=True), RunOptions(lake=lake, once=True, quiet=True)
        )
    windows, total, by_status = sums(lake)
    assert windows == total == summary.orders == 300
    assert by_status == Counter({k: v for k, v in summary.by_status.items() if v})
    assert len(read_table(lake, "quarantine")) == summary.malformed > 0


def test_once_is_refused_for_a_socket():
    with pytest.raises(UserError, match="--once: pipeline order_status reads a socket"):
        plan_pipeline(Registry().get("order_status"), once=True)
