"""server_logs over Spark Connect: a real Connect server (pyspark's own, with the project's
Delta jar) runs the queries, its Python workers import the project only from the zip the run
sends, and the tables equal a local run's; a setting only the server takes is one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import PIPE

import pyspark
import pytest

from devtools.broker import free_port
from engine.definitions.pipeline import Registry
from engine.lake.event_log import EventLog
from engine.plan import plan_pipeline
from engine.runtime.conf import DEFAULT_CONF
from engine.runtime.jars import find_packages
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import PROJECT, read_table
from tests.pipeline.spark_processes import DATA, guarded_python, run_server_logs, stop

SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
TABLES = ("events", "sessions", "carts", "purchases", "quarantine")


@contextmanager
def connect_server(root: Path) -> Iterator[tuple[str, Path, subprocess.Popen]]:
    """A Spark Connect server on 127.0.0.1 with the Delta jar, as a user starts one; its URL,
    the markers folder its Python workers leave a file in, and its process."""
    root.mkdir(exist_ok=True)
    python, markers = guarded_python(root)
    port = free_port()
    conf = {
        **DEFAULT_CONF,
        **find_packages().spark_conf(),
        "spark.driver.memory": "1g",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    }
    # Nothing of the test's Python path reaches the server's workers.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=str(python))
    args = [str(SPARK_SUBMIT), "--class", SERVER]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    with (root / "server.log").open("w") as log:
        # A group of its own: a test that kills the server kills its Python workers with it.
        server = subprocess.Popen(
            [*args, "spark-internal"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert server.poll() is None, (root / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Spark Connect server did not start"
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", markers, server
    finally:
        stop(server)


@pytest.fixture(scope="module")
def connect(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The module's Connect server: its URL and its workers' markers folder."""
    with connect_server(tmp_path_factory.mktemp("connect")) as (url, markers, _):
        yield url, markers


def test_spark_connect_writes_the_tables_of_a_local_run(spark, connect, tmp_path):
    url, markers = connect
    remote = run_server_logs(tmp_path / "connect", f"spark.remote={url}", cwd=tmp_path)
    assert remote.returncode == 0, remote.stderr + remote.stdout
    # The report's figures come from the writer's records beside the checkpoint: the writer
    # ran in the server's Python process, not in this one.
    assert "query main: input lines 8 = 7 events + 1 quarantined" in remote.stdout
    assert "rows written: events 7, quarantine 1, purchases 1, sessions 4, carts 2" in (
        remote.stdout
    )
    assert any(markers.iterdir()), "no Python worker of the server ran through the guard"
    events = EventLog(tmp_path / "connect").read().to_pylist()
    stop_details = json.loads([e for e in events if e["kind"] == "run_stop"][-1]["details"])
    assert stop_details["rows_written"]["events"] == 7

    plan = plan_pipeline(Registry().get("server_logs"), once=True)
    opts = RunOptions(lake=tmp_path / "local", once=True, input_path=str(DATA), quiet=True)
    run_pipeline(spark, plan, opts)
    for table in TABLES:
        got = read_table(tmp_path / "connect", table, drop=("ingested_at",))
        assert got == read_table(tmp_path / "local", table, drop=("ingested_at",)), table


def test_a_setting_of_the_server_is_one_line_exit_2(connect, tmp_path):
    url, _ = connect
    result = run_server_logs(
        tmp_path / "lake", f"spark.remote={url}", "spark.driver.memory=4g", cwd=tmp_path
    )
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2, result.stderr
    assert lines == [
        "error: --conf spark.driver.memory=4g: a setting of the Spark Connect server, not of a "
        "session; set it where the server starts"
    ]


def test_a_server_that_dies_mid_run_ends_the_run_in_one_line_exit_2(tmp_path):
    """pyspark retries each call to a server that went away for ten minutes or more: the run
    printed nothing for an hour and ignored SIGTERM. Now it ends within a minute, in one line."""
    lake = tmp_path / "lake"
    with connect_server(tmp_path / "server") as (url, _, server):
        args = [sys.executable, str(PROJECT / "runner.py"), "run", "server_logs"]
        args += ["--lake", str(lake), "--input", str(DATA), "--conf", f"spark.remote={url}"]
        run = subprocess.Popen(args, cwd=tmp_path, stdout=PIPE, stderr=PIPE, text=True)
        try:
            # Batch 0 planned: the run is under way, its query in the server.
            planned = lake / "_checkpoints" / "server_logs" / "main" / "offsets" / "0"
            deadline = time.monotonic() + 300
            while not planned.exists() and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            assert planned.exists(), run.communicate(timeout=30)
            # As a machine that fails: the server and its Python workers (which would
            # otherwise retry their own calls to it for ten minutes) end at once.
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            _, stderr = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
    assert run.returncode == 2, stderr
    line = (
        f"--conf spark.remote={url}: the Spark Connect server stopped answering during the run "
        "(its queries ran there): run again once it answers; the run resumes from its checkpoints"
    )
    assert stderr.splitlines() == [f"error: {line}"]
    stops = [e for e in EventLog(lake).read().to_pylist() if e["kind"] == "run_stop"]
    assert [(e["status"], e["message"]) for e in stops] == [("failed", line)]
