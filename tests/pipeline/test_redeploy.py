"""Changing the SQL of a pipeline that has a lake: additive changes reach the tables on both
writers, changes Spark cannot resume from are named before anything runs, `--full-refresh`
rebuilds from the input, and `--dry-run` says what a run would do."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.lake import read_arrow
from engine.lake.event_log import EventLog, event_lines
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import PROJECT, copy_project, edit, read_table, staged
from tests.pipeline.test_cli import one_error_line, runner

SCENARIO = PROJECT / "tests" / "data" / "server_logs_scenario"
TABLES = ("events", "quarantine", "purchases", "sessions", "carts")
CHECKPOINT = Path("_checkpoints") / "server_logs" / "main"
# What the in-process runs use (tests/conftest.py); a CLI run must say the same.
SHUFFLE = ("--conf", "spark.sql.shuffle.partitions=2")


def run(spark, project: Path, lake: Path, folder: Path, **options) -> None:
    pipeline = Registry(project / "pipelines").get("server_logs")
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True, **options)
    run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)


def dry_run(project: Path, lake: Path, folder: Path, *args: str) -> subprocess.CompletedProcess:
    return runner(
        "--pipelines", str(project / "pipelines"), "run", "server_logs", "--dry-run",
        "--lake", str(lake), "--input", str(folder), *SHUFFLE, *args,
    )  # fmt: skip


@pytest.fixture(scope="module")
def first_run(spark, tmp_path_factory) -> Path:
    """A folder with `in/` (the scenario's first file) and the `lake` of a run over it, from
    the project as it is; `all/` holds every file of the scenario."""
    root = tmp_path_factory.mktemp("first")
    staged(SCENARIO, root / "all")
    (root / "in").mkdir()
    shutil.copy(root / "all" / "part-1.json", root / "in")
    run(spark, PROJECT, root / "lake", root / "in")
    return root


@pytest.fixture
def workspace(first_run: Path, tmp_path: Path) -> Path:
    """A copy of the first run's folder, with a copy of the project's definitions in
    `project/`."""
    ws = tmp_path / "ws"
    shutil.copytree(first_run, ws)
    copy_project(ws / "project")
    # The checkpoint names the files it read by their paths, and a file stream resumes only in
    # the folder it read: the copy's checkpoint reads as if its run had read the copy's `in/`.
    for log in sorted((ws / "lake" / CHECKPOINT / "sources" / "0").iterdir()):
        if log.suffix == ".crc":  # Hadoop's checksum of the old text would refuse the new
            log.unlink()
        else:
            log.write_text(log.read_text().replace(f"file://{first_run}/", f"file://{ws}/"))
    return ws


def add_event_kind_and_widen_quantity(project: Path) -> None:
    edit(
        project / "sql" / "server_logs" / "events.sql",
        "  to_date(event_time) AS event_date",
        "  to_date(event_time) AS event_date,\n  upper(event_type) AS event_kind",
    )
    ddl = project / "tables" / "events.sql"
    edit(
        ddl,
        "the partition column'\n",
        "the partition column',\n  event_kind STRING COMMENT 'event_type in capitals'\n",
    )
    edit(ddl, "  quantity INT COMMENT", "  quantity BIGINT COMMENT")
    edit(
        ddl, "'Items bought (Purchase), 1 otherwise'", "'Items bought; 1 for a view or a cart line'"
    )
    edit(ddl, "  source STRING COMMENT '", "  source STRING COMMENT 'Edited: ")


# The lake was written by Spark; each writer evolves it its own way (Spark SQL's ALTER TABLE,
# delta-rs' alter API).
@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_a_new_column_and_a_wider_type_reach_the_table(spark, workspace: Path, writer: str):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    before = read_table(lake, "events")
    add_event_kind_and_widen_quantity(project)
    plan = dry_run(project, lake, folder, "--conf", f"lake.writer={writer}")
    assert plan.returncode == 0, plan.stderr
    evolve = (
        "table events: evolve (add column event_kind STRING; widen quantity INT -> BIGINT; "
        "comment on quantity; comment on source)"
    )
    assert evolve in plan.stdout.splitlines()
    assert "table sessions: keep" in plan.stdout.splitlines()
    assert f"query main: resume at batch 2 (checkpoint {lake / CHECKPOINT})" in plan.stdout

    shutil.copy(workspace / "all" / "part-2.json", folder)
    run(spark, project, lake, folder, writer=writer)
    events = DeltaTable(str(lake / "events"))
    types = {f.name: str(f.type) for f in events.schema().fields}
    assert types["quantity"] == 'PrimitiveType("long")'
    # An edited comment reaches the table (DESCRIBE showed the old one for good).
    comments = {f.name: f.metadata.get("comment") for f in events.schema().fields}
    assert comments["quantity"] == "Items bought; 1 for a view or a cart line"
    assert comments["source"].startswith("Edited: ")
    rows = read_table(lake, "events")
    old = [r for r in rows if r["event_kind"] is None]
    assert [{k: v for k, v in r.items() if k != "event_kind"} for r in old] == before
    new = [r for r in rows if r["event_kind"] is not None]
    assert new and all(r["event_kind"] == r["event_type"].upper() for r in new)
    # The new column is a commit of its own in the table's history (Spark and delta-rs name
    # the operation differently).
    operations = [h["operation"] for h in events.history()]
    assert ("ADD COLUMNS" if writer == "spark" else "ADD COLUMN") in operations
    # The lake still agrees with the checkpoint, which now has the new fingerprint.
    again = dry_run(project, lake, folder, "--conf", f"lake.writer={writer}")
    assert again.returncode == 0, again.stdout
    assert "table events: keep" in again.stdout.splitlines()


def rename_source(project: Path) -> None:
    edit(project / "sql" / "server_logs" / "events.sql", "  source,\n", "  source AS site,\n")
    edit(project / "tables" / "events.sql", "  source STRING", "  site STRING")


def test_a_renamed_column_is_refused_then_rebuilt_by_full_refresh(spark, workspace: Path):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    before = {t: read_table(lake, t, drop=("ingested_at",)) for t in TABLES}
    version = DeltaTable(str(lake / "events")).version()
    rename_source(project)
    plan = dry_run(project, lake, folder)
    assert plan.returncode == 2
    refusal = (
        f"table events: refused: {project / 'tables' / 'events.sql'}: column source is gone "
        "(dropped or renamed), but the table has it; undo the change, or run with "
        "--full-refresh to rebuild events of server_logs from the input"
    )
    assert refusal in plan.stdout.splitlines()
    # Two changes to one table: one line, the advice once, in the dry run and the run alike.
    ddl = project / "tables" / "events.sql"
    edit(ddl, "  site STRING", "  site STRING,\n  channel STRING NOT NULL")
    edit(
        project / "sql" / "server_logs" / "events.sql",
        "  source AS site,\n",
        "  source AS site,\n  'web' AS channel,\n",
    )
    both = (
        f"{ddl}: column source is gone (dropped or renamed), but the table has it; {ddl}: new "
        "column channel is NOT NULL"
    )
    (line,) = [ln for ln in dry_run(project, lake, folder).stdout.splitlines() if both in ln]
    assert line.count("undo the change") == 1
    with pytest.raises(UserError, match=re.escape(both)) as refused:
        run(spark, project, lake, folder)
    assert str(refused.value).count("undo the change") == 1
    edit(ddl, "  site STRING,\n  channel STRING NOT NULL", "  site STRING")
    edit(
        project / "sql" / "server_logs" / "events.sql",
        "  source AS site,\n  'web' AS channel,\n",
        "  source AS site,\n",
    )
    with pytest.raises(UserError, match="column source is gone"):
        run(spark, project, lake, folder)
    assert DeltaTable(str(lake / "events")).version() == version  # nothing was written

    plan = dry_run(project, lake, folder, "--full-refresh", "events")
    assert plan.returncode == 0, plan.stdout
    assert "table events: rebuild all rows from the input (old versions stay readable)" in (
        plan.stdout
    )
    assert "--full-refresh also rebuilds carts, purchases, quarantine, sessions" in plan.stdout
    run(spark, project, lake, folder, full_refresh=("events",))
    renamed = [
        {("site" if k == "source" else k): v for k, v in r.items()} for r in before["events"]
    ]
    assert read_table(lake, "events") == sorted(
        renamed, key=lambda r: [str(r[k]) for k in sorted(r)]
    )
    for table in TABLES[1:]:
        assert read_table(lake, table, drop=("ingested_at",)) == before[table]
    # The rows before the rebuild are still there, by time travel.
    old = read_arrow(DeltaTable(str(lake / "events"), version=version))
    assert "source" in old.column_names and old.num_rows == len(before["events"])
    assert list(lake.glob("_checkpoints/server_logs/main.before-full-refresh-*"))
    # The event log says the run rebuilt them (history shows only a write of 0 rows).
    start = [e for e in EventLog(lake).read().to_pylist() if e["kind"] == "run_start"][-1]
    assert start["message"].split("; ") == [
        f"table {t}: rebuild all rows from the input (old versions stay readable)" for t in TABLES
    ]


# A view that does not fit its table: each is refused before the run changes the lake, with
# or without --full-refresh (which would otherwise have emptied the tables first).
MISFITS = [
    (  # a column the table declares and the view lacks
        "tables/purchases.sql",
        "  amount DOUBLE NOT NULL COMMENT 'unit_price * quantity'\n",
        "  amount DOUBLE NOT NULL COMMENT 'unit_price * quantity',\n  note STRING\n",
        "view 'purchases' lacks column(s) note of table purchases",
        True,
    ),
    (  # a column only the view has, which no step reads: it would be lost unseen
        "sql/server_logs/purchases.sql",
        "  price * quantity AS amount\n",
        "  price * quantity AS amount,\n  upper(product_id) AS product_code\n",
        "view 'purchases' has column(s) product_code that table purchases lacks",
        True,
    ),
    (  # a DOUBLE into an INT column would cut 12.5 to 12
        "sql/server_logs/purchases.sql",
        "  quantity,\n",
        "  quantity * 1.5D AS quantity,\n",
        "view 'purchases' gives column quantity as DOUBLE, which table purchases would cut to INT",
        False,  # Spark's types: only the run finds it
    ),
]


@pytest.mark.parametrize(("file", "old", "new", "message", "linted"), MISFITS)
def test_a_view_that_does_not_fit_its_table_changes_nothing(
    spark, workspace: Path, file: str, old: str, new: str, message: str, linted: bool
):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    before = {t: (read_table(lake, t), DeltaTable(str(lake / t)).version()) for t in TABLES}
    edit(project / file, old, new)
    # The dry run says it too (it said keep, exit 0), as lint finds it without Spark.
    plan = dry_run(project, lake, folder)
    assert (plan.returncode, message in plan.stdout) == ((2, True) if linted else (0, False))
    for refresh in (None, ("purchases",)):
        with pytest.raises(UserError, match=re.escape(message)):
            run(spark, project, lake, folder, full_refresh=refresh)
        assert {t: (read_table(lake, t), DeltaTable(str(lake / t)).version()) for t in TABLES} == (
            before
        )
        assert (lake / CHECKPOINT).is_dir()
        assert not list(lake.glob("_checkpoints/server_logs/main.before-full-refresh-*"))


def test_a_changed_dedup_key_is_refused_naming_the_file(workspace: Path):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    log_lines = project / "sql" / "server_logs" / "log_lines.sql"
    edit(
        log_lines,
        "SELECT DISTINCT customer_id, event_time, event_type, items, source, logged_out\n",
        "SELECT customer_id, event_time, any_value(event_type) AS event_type,\n"
        "  any_value(items) AS items, any_value(source) AS source,\n"
        "  any_value(logged_out) AS logged_out\n",
    )
    edit(
        log_lines,
        "DELAY OF INTERVAL 1 MINUTE",
        "DELAY OF INTERVAL 1 MINUTE\nGROUP BY customer_id, event_time",
    )
    commits = sorted((lake / CHECKPOINT / "commits").iterdir())
    cli = runner(
        "--pipelines", str(project / "pipelines"), "run", "server_logs", "--once",
        "--lake", str(lake), "--input", str(folder), *SHUFFLE,
    )  # fmt: skip
    assert cli.returncode == 2
    line = one_error_line(cli)
    assert line.startswith(f"error: {log_lines}: deduplication key of log_lines changed (")
    assert "-> customer_id, event_time)" in line and "--full-refresh" in line
    assert sorted((lake / CHECKPOINT / "commits").iterdir()) == commits
    plan = dry_run(project, lake, folder)
    assert plan.returncode == 2
    assert f"query main: refused: {log_lines}: deduplication key of log_lines" in plan.stdout


def test_changed_shuffle_partitions_are_refused(workspace: Path):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    plan = dry_run(project, lake, folder, "--conf", "spark.sql.shuffle.partitions=3")
    assert plan.returncode == 2
    assert (
        f"query main: refused: --conf spark.sql.shuffle.partitions=3: checkpoint "
        f"{lake / CHECKPOINT} was built with 2, which Spark keeps for its state"
    ) in plan.stdout


def test_an_unchanged_project_resumes(workspace: Path):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    plan = dry_run(project, lake, folder)
    assert plan.returncode == 0, plan.stdout
    assert plan.stdout.splitlines()[1:] == [
        *(f"table {t}: keep" for t in TABLES),
        f"query main: resume at batch 2 (checkpoint {lake / CHECKPOINT})",
    ]


def test_a_changed_view_resumes_naming_the_tables_that_keep_old_rows(spark, workspace: Path):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    purchases = project / "sql" / "server_logs" / "purchases.sql"
    edit(purchases, "WHERE event_type = 'purchase'", "WHERE event_type = 'purchase' AND price > 1")
    note = (
        f"query main: {purchases} changed since its last run; the rows already in purchases stay "
        "as the old logic made them (--full-refresh purchases rebuilds them from the input)"
    )
    plan = dry_run(project, lake, folder)
    assert plan.returncode == 0, plan.stdout
    assert plan.stdout.splitlines()[-1] == note
    out = io.StringIO()
    pipeline = Registry(project / "pipelines").get("server_logs")
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True)
    run_pipeline(spark, plan_pipeline(pipeline, once=True), opts, out=out)
    assert note in out.getvalue().splitlines()
    # The event log keeps it with the run's start: when the logic changed.
    starts = [e for e in EventLog(lake).read().to_pylist() if e["kind"] == "run_start"]
    assert starts[-1]["message"] == note
    assert any(line.endswith(f"; {note}") for line in event_lines(EventLog(lake).read()))
    # Said once: the checkpoint now runs with the new logic.
    assert dry_run(project, lake, folder).stdout.splitlines()[-1].startswith("query main: resume")


def test_full_refresh_is_refused_when_an_input_file_is_gone(workspace: Path, first_run: Path):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    # The copied checkpoint lists the first run's files: point its file-source log at this
    # copy's input, then lose a file of it.
    log = lake / CHECKPOINT / "sources" / "0" / "0"
    log.write_text(log.read_text().replace(str(first_run), str(workspace)))
    (folder / "part-1.json").unlink()
    plan = dry_run(project, lake, folder, "--full-refresh")
    assert plan.returncode == 2
    assert (
        f"query main: refused: --full-refresh: input file {folder / 'part-1.json'} was read "
        "before and is gone (1 gone in all); the tables were left as they are"
    ) in plan.stdout


def test_full_refresh_creates_a_table_not_made_yet(workspace: Path):
    """A table the full refresh finds missing is created, not said to be rebuilt."""
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    shutil.rmtree(lake / "carts")
    plan = dry_run(project, lake, folder, "--full-refresh")
    assert plan.returncode == 0, plan.stdout
    lines = plan.stdout.splitlines()
    assert "table carts: create" in lines
    assert "table sessions: rebuild all rows from the input (old versions stay readable)" in lines


def test_full_refresh_of_a_socket_is_refused(tmp_path: Path):
    cli = runner("run", "order_status", "--full-refresh", "--lake", str(tmp_path / "lake"))
    assert cli.returncode == 2
    assert one_error_line(cli) == (
        "error: --full-refresh: pipeline order_status reads a socket, which cannot send its "
        "lines again; the tables were left as they are"
    )


def test_full_refresh_of_an_unknown_table_is_refused(tmp_path: Path):
    cli = runner("run", "server_logs", "--full-refresh", "nope", "--lake", str(tmp_path))
    assert cli.returncode == 2
    assert one_error_line(cli) == (
        "error: --full-refresh nope: not a table of pipeline server_logs (its tables: events, "
        "quarantine, purchases, sessions, carts)"
    )


def test_full_refresh_is_refused_when_kafka_retention_dropped_the_start(broker, tmp_path: Path):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from tests.conftest import produce

    produce(broker.servers, "sensor-readings", ["a", "b", "c"])
    admin = AdminClient({"bootstrap.servers": broker.servers})
    # What retention does to old messages: the partition now starts at offset 2.
    deleted = admin.delete_records([TopicPartition("sensor-readings", 0, 2)])
    for future in deleted.values():
        future.result(timeout=30)
    plan = runner(
        "run", "sensor_cep", "--dry-run", "--full-refresh", "--lake", str(tmp_path / "lake"),
        "--conf", f"kafka.bootstrap.servers={broker.servers}",
    )  # fmt: skip
    assert plan.returncode == 2, plan.stderr
    assert (
        "refused: --full-refresh: kafka topic sensor-readings partition 0 starts at offset 2: "
        "its retention no longer holds the start, so a replay would miss messages"
    ) in plan.stdout


def test_a_file_stream_resumes_only_in_the_folder_it_read(spark, tmp_path: Path):
    # On resuming, Spark lists the last batch's files again under the folder given: another
    # --input failed with "Wrong basePath ..." (exit 1), after the run had changed the lake.
    from engine.project import Project
    from engine.scaffold import init_pipeline

    project = copy_project(tmp_path / "project")
    init_pipeline("till", Project(project))
    first, other, lake = tmp_path / "first", tmp_path / "other", tmp_path / "lake"
    # Input kept by date: the folder to name is the one the run was given, not the file's.
    shutil.copytree(project / "data" / "till", first / "2019" / "06" / "20")
    shutil.copytree(project / "data" / "till", other)
    pipeline = Registry(project / "pipelines").get("till")
    opts = RunOptions(lake=lake, once=True, input_path=str(first), quiet=True)
    run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)

    def run_cli(folder: Path) -> subprocess.CompletedProcess:
        return runner(
            "--pipelines", str(project / "pipelines"), "run", "till", "--once",
            "--lake", str(lake), "--input", str(folder), *SHUFFLE,
        )  # fmt: skip

    moved = run_cli(other)
    assert moved.returncode == 2
    assert one_error_line(moved) == (
        f"error: --input {other}: checkpoint {lake / '_checkpoints' / 'till' / 'main'} read "
        f"{first / '2019' / '06' / '20' / 'sample.jsonl'} last, outside that folder, and a file "
        f"stream resumes only in the folder it read: give --input {first}, or read this folder "
        "from its start with "
        "other --checkpoints and --new-checkpoint"
    )
    again = run_cli(first)
    assert again.returncode == 0, again.stderr
    assert "query main: 0 batches" in again.stdout


def test_another_folder_is_refused_after_a_last_batch_that_read_no_file(workspace: Path):
    # The --once run's last batch only moved the watermark: with no files of its own to list,
    # another folder was read into the checkpoint, as new files (found 2026-11-29).
    project, lake, other = workspace / "project", workspace / "lake", workspace / "all"
    checkpoint = lake / CHECKPOINT
    offsets = [(checkpoint / "offsets" / b).read_text().splitlines()[2] for b in ("0", "1")]
    assert offsets[0] == offsets[1], "the run's last batch read files: this test needs none"
    plan = dry_run(project, lake, other)
    assert plan.returncode == 2, plan.stdout
    read = sorted((workspace / "in").iterdir())[-1]
    assert (
        f"query main: refused: --input {other}: checkpoint {checkpoint} read {read} last, "
        "outside that folder"
    ) in plan.stdout


def test_a_new_table_resumes_saying_it_gets_only_new_input(workspace: Path):
    project, lake, folder = workspace / "project", workspace / "lake", workspace / "in"
    view = project / "sql" / "server_logs" / "big_purchases.sql"
    view.write_text(
        "-- Purchases of more than 100.\nCREATE OR REPLACE TEMP VIEW big_purchases AS\n"
        "SELECT customer_id, amount FROM purchases WHERE amount > 100\n"
    )
    (project / "tables" / "big_purchases.sql").write_text(
        "-- Purchases of more than 100.\nCREATE TABLE big_purchases (\n"
        "  customer_id STRING NOT NULL COMMENT 'Customer id',\n"
        "  amount DOUBLE NOT NULL COMMENT 'Amount'\n) USING DELTA\n"
    )
    spec = project / "pipelines" / "server_logs.yaml"
    edit(spec, "  carts: cart_updates\n", "  carts: cart_updates\n  big_purchases: big_purchases\n")
    plan = dry_run(project, lake, folder)
    assert plan.returncode == 0, plan.stdout
    assert plan.stdout.splitlines()[-3:] == [
        "table big_purchases: create",
        f"query main: resume at batch 2 (checkpoint {lake / CHECKPOINT})",
        f"query main: {view} added since its last run; big_purchases gets only the input read "
        "from now on (--full-refresh big_purchases rebuilds them from the input)",
    ]


def test_a_shared_rebuild_by_spark_deletes_only_its_rows_and_names_its_pipeline(spark, tmp_path):
    from engine.lake.history import table_history
    from engine.sinks.delta import DeltaSink
    from engine.sinks.spark_delta import SparkDeltaSink
    from tests.unit.test_sinks import TABLES as DEFINED
    from tests.unit.test_sinks import batch, quarantine_rows

    table = DEFINED["quarantine"]
    DeltaSink(table, tmp_path).write(quarantine_rows("server_logs", "order_status"), batch(0))
    SparkDeltaSink(table, tmp_path, spark).rebuild("server_logs", shared=True)
    assert [r["pipeline"] for r in read_table(tmp_path, "quarantine")] == ["order_status"]
    newest = table_history(tmp_path, "quarantine").to_pylist()[0]
    assert (newest["operation"], newest["pipeline"]) == ("DELETE (full refresh)", "server_logs")
    # The session's later commits carry no such note.
    assert spark.conf.get("spark.databricks.delta.commitInfo.userMetadata", None) is None
