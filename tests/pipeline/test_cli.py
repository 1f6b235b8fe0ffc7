"""The command line as a user meets it: exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from engine.definitions.tables import load_tables
from tests.conftest import PROJECT, copy_project


def runner(
    *args: str, cwd: Path = PROJECT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT / "runner.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def without_jars(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine where `make` could not fetch the Spark packages."""
    (tmp_path / "no-jars").mkdir(exist_ok=True)
    return {"STREAMLAKE_JARS": str(tmp_path / "no-jars")}


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr
    return lines[0]


def test_pipelines_lists_tables():
    result = runner("pipelines")
    assert result.returncode == 0
    assert "server_logs" in result.stdout
    assert "query main: events, quarantine" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("run", "nope"),
            "unknown pipeline 'nope' in pipelines/ (pipelines: customer_spend, order_status, "
            "sensor_cep, server_logs, user_activity; --pipelines FOLDER/pipelines reads another "
            "project's)",
        ),
        (("run", "server_logs", "--input", "/no/such/folder"), "--input: input folder not found"),
        (("run", "server_logs", "--dry-run", "--input", ""), "--input: empty; give the folder"),
        (
            ("run", "server_logs", "--input", "data/server_logs/log1.json"),
            "log1.json is a file; give the folder that holds the files",
        ),
        (
            ("run", "server_logs", "--dry-run", "--lake", "data/server_logs/log1.json"),
            "--lake: " + str(PROJECT / "data/server_logs/log1.json") + " is a file, not a folder",
        ),
        (
            ("run", "server_logs", "--lake", "data/server_logs/log1.json/lake"),
            "log1.json is a file, not a folder",
        ),
        (
            ("run", "server_logs", "--checkpoints", "data/server_logs/log1.json"),
            "--checkpoints: " + str(PROJECT / "data/server_logs/log1.json") + " is a file",
        ),
        (("quality", "--lake", "data", "--report", "README.md"), "README.md is a file, not a"),
        (("run", "server_logs", "--conf", "no_such_setting=1"), "--conf no_such_setting"),
        (
            ("run", "server_logs", "--conf", "session_timeout=soon"),
            "handler session_updates: setting session_timeout: not a duration: 'soon'",
        ),
        (
            ("run", "server_logs", "--dry-run", "--conf", "cart_ttl=0 s"),
            "handler cart_updates: setting cart_ttl: a duration above zero, not '0 s'",
        ),
        (
            ("run", "server_logs", "--dry-run", "--conf", "watermark_delay=banana"),
            "setting watermark_delay: not a duration: 'banana'",
        ),
        (
            ("run", "server_logs", "--dry-run", "--conf", "session_timeout=99999999999 days"),
            "too long a duration: '99999999999 days'",
        ),
        (
            ("run", "server_logs", "--once", "--conf", "session_timeout_mode=processing_time"),
            "--once: handler session_updates uses processing-time timeouts",
        ),
        (("query", "SELECT 1", "--lake", "/no/such/lake"), "--lake: no lake at /no/such/lake"),
        (("query", "SELECT 1", "--conf", "x=1"), "--conf x: query takes Spark settings only"),
        (
            ("query", "SELECT 1", "--conf", "spark.driver.memory=2g"),
            "--conf spark.driver.memory: a Spark setting needs --engine spark",
        ),
        (("query", "SELECT 1", "--conf", "spark.x"), "--conf spark.x: expected KEY=VALUE"),
        (("generate", "nope", "--out", "x"), "no generator for pipeline 'nope'"),
        (("broker", "--port", "99999"), "argument --port: must be at most 65535, got 99999"),
        (("serve-orders", "--port", "0"), "argument --port: must be at least 1, got 0"),
        (("run", "sensor_cep", "--conf", "source.startingOffsets=now"), "source.startingOffsets"),
        (
            ("run", "sensor_cep", "--dry-run", "--conf", "source.startingOffsets=beginning"),
            "error: source.startingOffsets: earliest or latest, not 'beginning'",
        ),
        (
            ("run", "sensor_cep", "--dry-run", "--conf", "source.timeout=0"),
            "error: source.timeout: seconds above 0, not '0'",
        ),
    ],
)
def test_user_errors_are_one_line_and_exit_2(args, message):
    result = runner(*args)
    assert result.returncode == 2, result.stderr
    assert message in one_error_line(result)


@pytest.mark.parametrize("args", [("--debug", "run", "nope"), ("run", "nope", "--debug")])
def test_debug_before_or_after_the_command_shows_the_trace(args):
    result = runner(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.splitlines()[-1].startswith("error: unknown pipeline 'nope'")


@pytest.mark.parametrize(
    "command",
    [
        ("run", "server_logs", "--once", "--dry-run"),
        ("query", "SELECT * FROM events"),
        ("quality",),
        ("log",),
        ("history", "events"),
    ],
)
def test_a_table_given_for_the_lake_is_one_line_and_exit_2(tmp_path, command):
    # A table's folder for the lake: `quality` passed, checking nothing, and wrote its report
    # inside the table; `run` would have made a lake of five tables there.
    table = tmp_path / "lake" / "events"
    write_deltalake(str(table), pa.table({"x": [1]}))
    before = sorted(p.name for p in table.iterdir())
    for lake, message in (
        (table, f"--lake: {table} is a Delta table; "),
        (table / "x=1", f"--lake: {table / 'x=1'} is inside the Delta table {table}; "),
    ):
        result = runner(*command, "--lake", str(lake))
        assert result.returncode == 2, result.stderr
        line = one_error_line(result)
        assert line.startswith(f"error: {message}"), line
        assert line.endswith(f"the lake is the folder that holds the tables ({table.parent})")
    assert sorted(p.name for p in table.iterdir()) == before


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (("run", "server_logs", "--once", "--dry-run", "--lake", "{lake}"), "--checkpoints"),
        (("quality", "--lake", "{lake}"), "--report"),
    ],
)
def test_a_folder_inside_a_table_for_checkpoints_or_a_report_is_one_line_and_exit_2(
    tmp_path, command, option
):
    # Delta's VACUUM deletes the files in a table's folder that the table does not list: a
    # checkpoint there would be lost, and the run would read its input again.
    table = tmp_path / "lake" / "events"
    write_deltalake(str(table), pa.table({"x": [1]}))
    before = sorted(p.name for p in table.iterdir())
    args = [arg.format(lake=tmp_path / "lake") for arg in command]
    result = runner(*args, option, str(table / "kept"))
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == (
        f"error: {option}: {table / 'kept'} is inside the Delta table {table}; give a folder "
        "outside the tables (Delta's VACUUM deletes the files in a table's folder that it does "
        "not list)"
    )
    assert sorted(p.name for p in table.iterdir()) == before


def test_a_lake_or_input_without_permission_is_one_line_and_exit_2():
    # Not below tmp_path: pytest keeps that private to its user, and the run below may be
    # another user's.
    base = Path(tempfile.mkdtemp())
    base.chmod(0o755)
    locked = base / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        args = [sys.executable, str(PROJECT / "runner.py"), "run", "server_logs", "--once"]
        args += ["--dry-run", "--lake", str(locked / "lake")]
        if os.geteuid() == 0:  # root may write anywhere: ask as an unprivileged user
            args = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *args]
        result = subprocess.run(args, cwd=PROJECT, capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        assert one_error_line(result) == f"error: --lake: no permission to write in {locked}"
        assert list(locked.iterdir()) == []
        hidden, open_ = base / "hidden", base / "open"
        hidden.mkdir()
        hidden.chmod(0o000)
        open_.mkdir()
        open_.chmod(0o777)
        args[args.index("--lake") + 1] = str(open_ / "lake")
        result = subprocess.run(
            [*args, "--input", str(hidden)],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2, result.stderr
        assert one_error_line(result) == f"error: --input: no permission to read {hidden}"
        # Paths below a folder that may not be searched: they were exit 1, `[Errno 13] ...`.
        below = hidden / "x"
        runner_py = args[: args.index(str(PROJECT / "runner.py")) + 1]
        dry_run = [*runner_py, "run", "server_logs", "--once", "--dry-run"]
        for command, message in (
            ([*args, "--input", str(below)], "--input: permission denied"),
            ([*args, "--checkpoints", str(below)], "--checkpoints: permission denied"),
            ([*dry_run, "--lake", str(below)], "--lake: permission denied"),
            ([*runner_py, "query", "SELECT 1", "--lake", str(below)], "--lake: permission denied"),
            ([*runner_py, "generate", "server_logs", "--out", str(below)], "permission denied"),
        ):
            result = subprocess.run(
                command, cwd=PROJECT, capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 2, result.stderr
            assert one_error_line(result) == f"error: {message}: {below}"
    finally:
        for folder in (locked, base / "hidden"):
            if folder.exists():
                folder.chmod(0o755)
        shutil.rmtree(base)


def test_native_kafka_without_the_connector_jar_is_one_line(tmp_path):
    import socket

    args = ("run", "sensor_cep", "--once", "--conf", "source.connector=native")
    # Something listens where the broker would, so the run gets past the probe to Spark.
    with socket.create_server(("127.0.0.1", 0)) as listening:
        servers = f"127.0.0.1:{listening.getsockname()[1]}"
        result = runner(
            *args, "--conf", f"kafka.bootstrap.servers={servers}",
            "--lake", str(tmp_path / "lake"), env=without_jars(tmp_path),
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "source.connector: native needs Spark's Kafka connector (spark-sql-kafka jar)" in (
        one_error_line(result)
    )


def test_a_delta_source_without_the_delta_jar_is_one_line(tmp_path):
    # The embedded path wrote `purchases` with delta-rs; customer_spend streams it with Spark.
    lake = tmp_path / "lake"
    schema = load_tables(PROJECT / "tables")["purchases"].arrow_schema
    write_deltalake(lake / "purchases", pa.Table.from_pylist([], schema=schema))
    result = runner(
        "run", "customer_spend", "--once", "--lake", str(lake), env=without_jars(tmp_path)
    )
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == (
        "error: source.kind: delta needs Delta Lake for Spark (delta-spark jar), which this "
        "Spark session does not have (`make` fetches it into .jars); cannot read table"
        " 'purchases'"
    )
    assert not (lake / "customer_spend").exists()


def test_a_socket_server_that_is_not_there_is_one_line_and_writes_nothing(tmp_path):
    from devtools.broker import free_port

    lake, port = tmp_path / "lake", free_port()
    result = runner("run", "order_status", "--lake", str(lake), "--conf", f"source.port={port}")
    assert result.returncode == 2, result.stderr
    assert one_error_line(result).startswith(
        f"error: source.host/source.port: no server accepts connections on 127.0.0.1:{port} "
    )
    # Said before Spark started and before the run lock: the new lake is not made at all.
    assert not lake.exists()


def test_a_second_run_of_a_pipeline_on_a_lake_is_refused_until_the_first_ends(tmp_path):
    from engine.lake.run_lock import run_lock

    lake = tmp_path / "lake"
    # Another process runs server_logs on the lake (it holds the lock as a run does).
    hold = "from engine.lake.run_lock import run_lock; import pathlib, sys, time\n"
    hold += "with run_lock(pathlib.Path(sys.argv[1]), 'server_logs'):\n"
    hold += "    print('holding', flush=True); time.sleep(600)\n"
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(lake)], cwd=PROJECT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        for args in (("--once",), ("--full-refresh",)):
            result = runner("run", "server_logs", *args, "--lake", str(lake))
            assert result.returncode == 2, result.stderr
            assert one_error_line(result) == (
                f"error: --lake {lake}: pipeline server_logs is already running on this lake "
                f"(process {holder.pid}); wait for that run to end or stop it"
            )
        assert sorted(p.name for p in lake.iterdir()) == ["_runs"]  # no table, no checkpoint
        with run_lock(lake, "user_activity"):  # another pipeline on the same lake may run
            pass
    finally:
        holder.kill()  # as a crash would: the lock goes with the process
        holder.wait()
    with run_lock(lake, "server_logs"):
        assert (lake / "_runs" / "server_logs.lock").read_text() == f"{os.getpid()}\n"


def test_spark_writer_without_the_delta_jar_is_one_line_and_writes_nothing(tmp_path):
    lake = tmp_path / "lake"
    args = ("run", "server_logs", "--once", "--lake", str(lake), "--conf", "lake.writer=spark")
    result = runner(*args, env=without_jars(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "--conf lake.writer=spark: this Spark session has no Delta Lake" in one_error_line(
        result
    )
    assert not [p for p in lake.iterdir() if (p / "_delta_log").exists()]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # Caught by sqlglot before Spark starts.
        ("CREATE OR REPLACE TEMP VIEW purchases AS SELECT FROM WHERE", "purchases.sql:1:"),
        ("CREATE OR REPLACE TEMP VIEW purchases AS SELECT * FROM nowhere", "unknown view"),
        # Caught by Spark's analyzer.
        (
            "CREATE OR REPLACE TEMP VIEW purchases AS SELECT no_such_column FROM events",
            "UNRESOLVED_COLUMN",
        ),
    ],
)
def test_bad_sql_in_a_step_names_the_file(tmp_path, sql, message):
    project = copy_project(tmp_path)
    (project / "sql" / "server_logs" / "purchases.sql").write_text(sql)
    result = runner(
        "--pipelines",
        str(project / "pipelines"),
        "run",
        "server_logs",
        "--once",
        "--lake",
        str(tmp_path / "lake"),
    )
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert str(project / "sql" / "server_logs" / "purchases.sql") in line
    assert message in line


def test_run_with_quality_refuses_a_broken_suite_before_the_run(tmp_path):
    # The suite was read after the run: the batch was written, then exit 2.
    project = copy_project(tmp_path)
    suite = project / "quality" / "suites" / "purchases.yaml"
    suite.write_text(suite.read_text() + "  - expect_column_values_to_be_between: {column: qty\n")
    lake = tmp_path / "lake"
    pipelines = str(project / "pipelines")
    run = runner(
        "--pipelines", pipelines, "run", "server_logs", "--once", "--quality", "--lake", str(lake)
    )
    assert run.returncode == 2, run.stderr
    assert f"{suite}:" in one_error_line(run)
    assert not lake.exists()


def test_run_with_quality_then_query_the_bundled_sample(tmp_path):
    lake = tmp_path / "lake"
    started_in = tmp_path / "work"
    started_in.mkdir()
    run = runner("run", "server_logs", "--once", "--quality", "--lake", str(lake), cwd=started_in)
    assert run.returncode == 0, run.stderr
    # The bundled sample: data/server_logs (see data/README.md).
    assert "input lines 8 = 7 events + 1 quarantined" in run.stdout
    assert "carts: passed" in run.stdout and "sessions: passed" in run.stdout
    assert (lake / "_quality" / "index.html").is_file()
    assert list(started_in.iterdir()) == []  # no spark-warehouse/ where the user stood
    result = runner(
        "query",
        "SELECT customer_id, total_items, total_price FROM carts",
        "--lake",
        str(lake),
        "--format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(result.stdout), key=lambda r: r["customer_id"]) == [
        {"customer_id": "1020_CId", "total_items": 1, "total_price": 956.0},
        {"customer_id": "1028_CId", "total_items": 2, "total_price": 6.0},
    ]
    sessions = runner(
        "query",
        "SELECT customer_id, total_events, end_reason FROM sessions ORDER BY 1",
        "--lake",
        str(lake),
        "--format",
        "csv",
    )
    assert sessions.stdout.splitlines() == [
        "customer_id,total_events,end_reason",
        "1010_CId,1,",
        "1020_CId,2,logout",
        "1028_CId,4,timeout",
    ]
    # What the lake holds, from its Delta logs, the tables' comments included; the same on
    # either engine (Spark is not started for it).
    tables = runner("query", "SHOW TABLES", "--lake", str(lake), "--format", "csv")
    assert tables.stdout.split() == [
        "tableName",
        "_event_log",  # what the runs did, queryable as any table
        "carts",
        "events",
        "purchases",
        "quarantine",
        "sessions",
    ]
    for engine in ("duckdb", "spark"):
        described = runner(
            "query", "DESCRIBE carts", "--lake", str(lake), "--format", "csv", "--engine", engine
        )
        assert described.returncode == 0, described.stderr
        assert described.stdout.splitlines()[:3] == [
            "col_name,data_type,comment",
            "customer_id,string,Customer id",
            "total_items,bigint,Lines in the cart",
        ]
    # The table's settings as its DDL gave them (Spark's writer keeps them), and Delta's detail.
    shown = runner("query", "SHOW TBLPROPERTIES carts", "--lake", str(lake), "--format", "csv")
    assert shown.stdout.splitlines() == [
        "key,value",
        "delta.minReaderVersion,1",
        "delta.minWriterVersion,2",
        "lake.key,customer_id",
        "lake.mode,merge",
    ]
    detail = runner("query", "DESCRIBE DETAIL events", "--lake", str(lake), "--format", "json")
    (row,) = json.loads(detail.stdout)
    assert (row["location"], row["partitionColumns"], row["properties"]) == (
        (lake / "events").resolve().as_uri().replace("file:///", "file:/"),
        ["event_date"],
        {"lake.mode": "append"},
    )
    assert row["numFiles"] == len(list((lake / "events").rglob("*.parquet"))) > 0
    missing = runner("query", "SELECT * FROM nope", "--lake", str(lake))
    assert missing.returncode == 2
    assert "unknown table 'nope'" in one_error_line(missing)
    write = runner("query", "DROP TABLE carts", "--lake", str(lake))
    assert write.returncode == 2
    assert "read-only" in one_error_line(write)
    # `query ... | head`: more rows than the pipe holds, and a reader that leaves after one.
    many = "SELECT a.* FROM events a, events b, events c, events d, events e"
    head = subprocess.Popen(
        [sys.executable, str(PROJECT / "runner.py"), "query", many, "--lake", str(lake)],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert head.stdout is not None and head.stdout.readline()
    head.stdout.close()
    assert head.wait(120) == 141
    assert head.stderr is not None and head.stderr.read() == b""


def test_sigterm_stops_a_continuous_run_cleanly(tmp_path):
    lake = tmp_path / "lake"
    proc = subprocess.Popen(
        [sys.executable, str(PROJECT / "runner.py"), "run", "server_logs", "--lake", str(lake)],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = {}
    for line in proc.stdout:
        if line.startswith("[") and " batch 0:" in line:
            started[line[1 : line.index("]")]] = line
        if set(started) == {"main"}:
            break
    # To the whole process group, as a scheduler or `timeout` sends it: Spark's JVM used to
    # stop itself under the run ("Cannot call methods on a stopped SparkContext", exit 1).
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "query main: input lines 8 = 7 events + 1 quarantined" in out
    assert not err.strip()
    assert (lake / "sessions" / "_delta_log").is_dir()
    # No watermark before the first batch: Spark's epoch 0 is not shown as a 1970 time.
    assert started["main"].rstrip().endswith("watermark -"), started


def test_a_once_run_cut_short_by_sigterm_says_so(tmp_path):
    """A scheduler's SIGTERM before `--once` has read its input: exit 143, not a clean 0, and
    the event log says the run stopped, not that it finished."""
    folder, lake = tmp_path / "in", tmp_path / "lake"
    folder.mkdir()
    lines = [
        ln
        for f in sorted((PROJECT / "data" / "server_logs").iterdir())
        for ln in f.read_text().splitlines()
    ]
    for i, line in enumerate(lines):
        (folder / f"part-{i}.json").write_text(line + "\n")
    command = ["run", "server_logs", "--once", "--input", str(folder), "--lake", str(lake)]
    proc = subprocess.Popen(
        [
            sys.executable,
            str(PROJECT / "runner.py"),
            *command,
            "--conf",
            "source.maxFilesPerTrigger=1",
        ],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    for line in proc.stdout:
        if line.startswith("[main] batch 0:"):
            break
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "run stopped before all input was read; the next run goes on from there" in out
    assert not err.strip()
    log = runner("log", "server_logs", "--lake", str(lake), "--last", "1")
    assert "run_stop     stopped before all input was read; rows written:" in log.stdout
