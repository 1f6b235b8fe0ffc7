"""server_logs on a real Spark standalone cluster (a master and one worker from the installed
pyspark) gives exactly the tables of a local run; an unreachable master is one line, exit 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from devtools.broker import free_port
from engine.definitions.pipeline import Registry
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import PROJECT, read_table
from tests.pipeline.spark_processes import DATA, guarded_python, run_server_logs, stop

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
TABLES = ("events", "sessions", "carts", "purchases", "quarantine")
WALL_CLOCK = ("ingested_at",)  # quarantine's read time differs between any two runs


def wait_for_worker(ui_port: int, process: subprocess.Popen, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "spark master exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
                if json.load(r).get("aliveworkers", 0) >= 1:
                    return
        except (OSError, ValueError):  # not listening yet, or an empty page while starting
            pass
        time.sleep(0.5)
    raise AssertionError("the spark worker did not register with the master")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A standalone master and one worker (1 core, 1 GiB) on 127.0.0.1; its URL and folder."""
    root = tmp_path_factory.mktemp("cluster")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    # Clean environment: nothing of the test's PYTHONPATH reaches the executors.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(root / "logs"))
    processes: list[subprocess.Popen] = []

    def spawn(main: str, args: list[str]) -> subprocess.Popen:
        """A Spark daemon (`org.apache.spark.deploy.<main>`), its output in <root>/<name>.log."""
        log = root / f"{main.split('.')[0]}.log"
        return subprocess.Popen(
            [str(SPARK_CLASS), f"org.apache.spark.deploy.{main}", *args],
            cwd=root,
            env=env,
            stdout=log.open("w"),  # closed when the process exits
            stderr=subprocess.STDOUT,
        )

    try:
        master_cmd = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]
        processes.append(spawn("master.Master", master_cmd))
        worker_cmd = [
            f"spark://127.0.0.1:{port}",
            *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
            *("--webui-port", str(worker_ui), "--work-dir", str(root / "work")),
        ]
        processes.append(spawn("worker.Worker", worker_cmd))
        wait_for_worker(ui, processes[0])
        yield f"spark://127.0.0.1:{port}", root
    finally:
        for process in reversed(processes):
            stop(process)


def test_standalone_cluster_writes_the_tables_of_a_local_run(spark, cluster, tmp_path):
    master, root = cluster
    python, markers = guarded_python(tmp_path)
    env = {**os.environ, "PYSPARK_PYTHON": str(python)}
    # Run from an unrelated folder: nothing may depend on the driver's working directory.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    on_cluster = run_server_logs(
        tmp_path / "cluster", f"spark.master={master}", env=env, cwd=elsewhere
    )
    assert on_cluster.returncode == 0, on_cluster.stderr + on_cluster.stdout
    # The local run: the test session's own local Spark, same input and settings.
    plan = plan_pipeline(Registry().get("server_logs"), once=True)
    opts = RunOptions(lake=tmp_path / "local", once=True, input_path=str(DATA), quiet=True)
    run_pipeline(spark, plan, opts)

    assert any(markers.iterdir()), "no executor Python worker ran through the guard"
    apps = list((root / "work").glob("app-*"))
    assert apps, "the run did not execute on the cluster's worker"
    for table in TABLES:
        got = read_table(tmp_path / "cluster", table, drop=WALL_CLOCK)
        want = read_table(tmp_path / "local", table, drop=WALL_CLOCK)
        assert got == want, table
        assert want or table == "purchases", f"{table} is empty"

    # An ad-hoc query on the cluster: what DuckDB answers, computed by the worker.
    sql = "SELECT event_type, count(*) AS n FROM events GROUP BY event_type ORDER BY event_type"
    query = [sys.executable, str(PROJECT / "runner.py"), "query", sql]
    query += ["--lake", str(tmp_path / "cluster"), "--format", "json"]
    answers = [
        subprocess.run(
            [*query, *options], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
        )
        for options in ((), ("--engine", "spark", "--conf", f"spark.master={master}"))
    ]
    assert [a.returncode for a in answers] == [0, 0], answers[1].stderr
    assert json.loads(answers[1].stdout) == json.loads(answers[0].stdout) != []
    assert len(list((root / "work").glob("app-*"))) == len(apps) + 1


def test_unreachable_master_is_one_line_exit_2_and_writes_nothing(tmp_path):
    closed = free_port()  # bound and released: nothing listens there
    result = run_server_logs(
        tmp_path / "lake", f"spark.master=spark://127.0.0.1:{closed}", cwd=tmp_path
    )
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: --conf spark.master=spark://127.0.0.1:{closed}")
    assert "unreachable" in lines[0]
    # Said before the run's lock is taken (engine/lake/run_lock.py): the new lake is not made.
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        # Forms Spark cannot parse: before, exit 1 with "An error occurred while calling
        # None.org.apache.spark.api.java.JavaSparkContext", or (empty, a bad heap size) with
        # "Java gateway process exited", neither naming the setting.
        ("spark.master=spark//127.0.0.1:{port}", "--conf spark.master=spark//127.0.0.1:{port}"),
        ("spark.master=spark://127.0.0.1:{port}/", "--conf spark.master=spark://127.0.0.1:{port}/"),
        ("spark.master=local[x]", "--conf spark.master=local[x]"),
        ("spark.master=", "--conf spark.master=: expected"),
        ("spark.driver.memory=abc", "--conf spark.driver.memory=abc"),
        (
            "spark.scheduler.maxRegisteredResourcesWaitingTime=soon",
            "--conf spark.scheduler.maxRegisteredResourcesWaitingTime=soon: expected a time",
        ),
        ("spark.remote=http://127.0.0.1:15002", "--conf spark.remote=http://127.0.0.1:15002"),
        # A port that takes connections but speaks no gRPC: the client waited for ever.
        (
            "spark.remote=sc://127.0.0.1:{port}",
            "--conf spark.remote=sc://127.0.0.1:{port}: no Spark Connect server answers at "
            "127.0.0.1:{port} within 5 s",
        ),
        # Spark checks a SQL setting's value only when the run first reads a setting.
        ("spark.sql.shuffle.partitions=abc", "--conf spark.sql.shuffle.partitions=abc: "),
    ],
)
def test_a_setting_spark_cannot_start_with_is_one_line_exit_2(tmp_path, setting, named):
    # Something listens at {port}, as a master would: the URL's form is what is wrong.
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        setting, named = setting.format(port=port), named.format(port=port)
        result = run_server_logs(tmp_path / "lake", setting, cwd=tmp_path)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {named}"), lines[0]
    assert not (tmp_path / "lake").exists()  # said before the run's lock is taken


def test_a_master_without_a_worker_is_one_line_exit_2(tmp_path):
    # The worker not started (or busy): Spark waited for ever, printing nothing, lake made.
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(tmp_path)}
    master = subprocess.Popen(
        [
            *(str(SPARK_CLASS), "org.apache.spark.deploy.master.Master"),
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert master.poll() is None and time.monotonic() < deadline, "no master"
            time.sleep(0.5)
        # Spark's setting for how long to wait for executors, so that the test waits 5 s, not
        # the 60 s a run waits without it.
        result = run_server_logs(
            tmp_path / "lake",
            f"spark.master=spark://127.0.0.1:{port}",
            "spark.scheduler.maxRegisteredResourcesWaitingTime=5s",
            cwd=tmp_path,
        )
    finally:
        stop(master)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(
        f"error: --conf spark.master=spark://127.0.0.1:{port}: no executor started within 5 s "
        "(spark.scheduler.maxRegisteredResourcesWaitingTime)"
    )
