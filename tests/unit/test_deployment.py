"""Planning a run against a lake without Spark: a new lake, and which queries a full refresh
starts again."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.plan import plan_pipeline
from engine.plan.deployment import plan_deployment
from tests.conftest import copy_project, edit


def deployment(pipelines: Path, name: str, lake: Path, conf=None, **options):
    plan = plan_pipeline(Registry(pipelines).get(name))
    return plan_deployment(
        plan, lake=lake, checkpoint_root=lake / "_checkpoints", conf=conf or {}, **options
    )


def test_a_new_lake_creates_every_table_and_starts_every_query(tmp_path: Path):
    plan = deployment(Registry().folder, "server_logs", tmp_path / "lake")
    checkpoint = tmp_path / "lake" / "_checkpoints" / "server_logs" / "main"
    assert plan.lines() == [
        *(f"table {t}: create" for t in ("events", "quarantine", "purchases", "sessions", "carts")),
        f"query main: start from the beginning of the input (checkpoint {checkpoint})",
    ]
    assert plan.refusals == []


# sensor_cep with three queries: `samples` writes sensor_samples, `bad` writes quarantine, and
# `main` writes sensor_anomalies and quarantine too.
@pytest.mark.parametrize(
    ("tables", "rebuilt"),
    [
        (("sensor_samples",), {"samples"}),
        (("sensor_anomalies",), {"bad", "main"}),
        (("quarantine",), {"bad", "main"}),
        ((), {"bad", "main", "samples"}),
    ],
)
def test_a_full_refresh_starts_again_every_query_writing_a_rebuilt_table(
    tmp_path: Path, tables: tuple[str, ...], rebuilt: set[str]
):
    project = copy_project(tmp_path / "project")
    edit(
        project / "pipelines" / "sensor_cep.yaml",
        "  main:\n    trigger: 5 seconds\n",
        "  main:\n    trigger: 5 seconds\n    sinks:\n      quarantine: quarantine\n"
        "  bad:\n    sinks:\n      quarantine: quarantine\n"
        "  samples:\n    sinks:\n      sensor_samples: sensor_samples\n",
    )
    # Read from files (--input): a Kafka source would ask the broker whether it can replay.
    plan = deployment(
        project / "pipelines",
        "sensor_cep",
        tmp_path / "lake",
        full_refresh=tables,
        input_path=str(tmp_path),
    )
    assert {q.name for q in plan.queries.values() if q.verb == "rebuild"} == rebuilt


def test_a_full_refresh_of_an_unknown_table_is_refused(tmp_path: Path):
    with pytest.raises(UserError, match="--full-refresh nope: not a table of pipeline"):
        deployment(Registry().folder, "server_logs", tmp_path, full_refresh=("nope",))


@pytest.mark.parametrize("value", ["abc", "0", "-4", "2.5", ""])
def test_a_shuffle_partition_count_that_is_no_count_is_refused(tmp_path: Path, value: str):
    # It was compared with the checkpoint's count, and the advice was to rebuild the tables.
    conf = {"spark.sql.shuffle.partitions": value}
    with pytest.raises(UserError) as refused:
        deployment(Registry().folder, "server_logs", tmp_path, conf=conf)
    assert str(refused.value) == (
        f"--conf spark.sql.shuffle.partitions={value}: expected a whole number above 0"
    )


def test_a_dry_run_refuses_what_lint_finds_the_run_would_stop_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from engine.commands import main

    project = copy_project(tmp_path / "project")
    args = ["--pipelines", str(project / "pipelines"), "run", "order_status", "--dry-run"]
    args += ["--lake", str(tmp_path / "lake")]
    assert main(args) == 0
    edit(project / "sql" / "order_status" / "order_totals.sql", "max(arrival_time)", "max(arival)")
    assert main(args) == 2  # Spark's analysis of the first batch would stop the run
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"refused: {project}/sql/order_status/order_totals.sql:4:45: unknown column 'arival'"
        " [unknown-column]"
    )
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("input_path", [None, "in"])
def test_a_checkpoint_of_another_kafka_topic_is_refused(tmp_path: Path, input_path):
    from engine.plan.fingerprint import write_fingerprint

    def planned(topic: str):
        pipeline = Registry().get("sensor_cep").with_settings({"source.topic": topic})
        return plan_deployment(
            plan_pipeline(pipeline),
            lake=tmp_path / "lake",
            checkpoint_root=tmp_path / "checkpoints",
            conf={},
            input_path=input_path and str(tmp_path / input_path),
        )

    (tmp_path / "in").mkdir()
    first = planned("readings-a").queries["main"]
    write_fingerprint(first.checkpoint, first.fingerprint)
    (first.checkpoint / "commits").mkdir(parents=True)
    (first.checkpoint / "commits" / "0").write_text("v1\n{}")
    refusals = [r for r in planned("readings-b").refusals if "topic" in r]
    # Its offsets are the first topic's: the Python source would read the other from them.
    # Files given with --input read no topic.
    changed = "source.topic changed (readings-a -> readings-b): checkpoint"
    assert [changed in r for r in refusals] == ([] if input_path else [True])
