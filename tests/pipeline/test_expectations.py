"""Expectations enforced while streaming, on real runs: `init` makes a pipeline whose rules
warn and drop (on the batch part of its query); server_logs' checked_lines shows them in the
streaming part; FAIL UPDATE stops the query with nothing committed, in either part."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from engine.definitions.expectations import parse_expectations
from engine.definitions.pipeline import Registry
from engine.definitions.sql import SparkStreaming, pinned_condition
from engine.errors import UserError
from engine.lake.event_log import EventLog
from engine.lake.guard import batch_time_ms, last_committed
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, run_pipeline
from tests.conftest import PROJECT, copy_project, edit, read_table
from tests.pipeline.test_bad_input import log
from tests.pipeline.test_cli import one_error_line, runner


def _batch_checks(lake: Path) -> list[dict]:
    events = EventLog(lake).read().to_pylist()
    return [json.loads(e["details"]).get("expectations") for e in events if e["kind"] == "batch"]


def test_init_then_run_then_quality_on_a_fresh_name(spark, tmp_path):
    project = copy_project(tmp_path / "project")
    pipelines = str(project / "pipelines")
    # Typed in the folder that holds the project: paths as named from there.
    # This interpreter is `python` on the PATH, as in an activated environment.
    path = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    made = runner("--pipelines", pipelines, "init", "shop", cwd=tmp_path, env=path)
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == [
        "created project/pipelines/shop.yaml",
        "created project/sql/shop/lines.sql",
        "created project/sql/shop/records.sql",
        "created project/sql/shop/kept.sql",
        "created project/sql/shop/quarantine.sql",
        "created project/tables/shop.sql",
        "created project/quality/suites/shop.yaml",
        "created project/data/shop/sample.jsonl",
        "created project/tests/pipeline/test_shop.py",
        "created project/tests/conftest.py",  # the copy has none: the generated test's fixture
        f"next: python {PROJECT}/runner.py --pipelines {pipelines} run shop --once && "
        f"python {PROJECT}/runner.py --pipelines {pipelines} quality",
    ]
    linted = runner("--pipelines", pipelines, "lint", "shop")
    assert (linted.returncode, linted.stdout.strip()) == (
        0,
        "lint: 1 pipeline, 4 SQL files, no findings",
    )

    # The generated test, run as it is: the sample through the pipeline, rows and counts exact.
    path = project / "tests" / "pipeline" / "test_shop.py"
    spec = importlib.util.spec_from_file_location("generated_test_shop", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.test_pipeline_on_its_sample(spark, tmp_path)
    lake = tmp_path / "lake"
    assert _batch_checks(lake) == [
        {
            "records": {
                "rows": 9,
                "dropped": 4,
                "has_id": 1,
                "has_event_time": 1,
                "non_negative_amount": 1,
                "finite_amount": 1,
                "known_currency": 1,
            }
        }
    ]
    # A dropped row keeps its fields, the line as read among them; NULLs are written, not
    # left out.
    dropped = {r["reason"]: r["raw"] for r in read_table(lake, "quarantine")}
    assert json.loads(dropped["expectation has_event_time"]) == {
        "id": "a7",
        "amount": 2.0,
        "currency": "EUR",
        "event_time": None,
        "event_date": None,
        "raw": '{"id": "a7", "amount": 2.0, "currency": "EUR", "event_time": "yesterday"}',
    }

    # Beside the counts, what each rule does: `log` counts only DROP ROW rules as dropped.
    (batch,) = [e for e in EventLog(lake).read().to_pylist() if e["kind"] == "batch"]
    assert json.loads(batch["details"])["rules"] == {
        "records": {
            "drop": ["has_id", "has_event_time", "non_negative_amount", "finite_amount"],
            "warn": ["known_currency"],
        }
    }

    checked = runner("--pipelines", pipelines, "quality", "--lake", str(lake), "shop")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "shop: passed" in checked.stdout
    logged = runner("--pipelines", pipelines, "log", "shop", "--lake", str(lake))
    lines = logged.stdout.splitlines()
    assert [line.split()[3] for line in lines] == ["run_start", "batch", "run_stop", "quality"]
    assert lines[1].endswith(
        "records: 9 checked, 4 dropped (has_id 1, has_event_time 1, non_negative_amount 1, "
        "finite_amount 1), warned: known_currency 1"
    )
    assert lines[3].endswith("shop: passed")
    # Another pipeline's log holds none of it, the validation of shop included.
    other = runner("--pipelines", pipelines, "log", "customer_spend", "--lake", str(lake))
    assert other.stdout == f"no events of customer_spend in {lake} (a run writes them)\n"
    # A table without a suite is skipped, not failed, unless it is named.
    (project / "quality" / "suites" / "shop.yaml").unlink()
    unsuited = runner("--pipelines", pipelines, "quality", "--lake", str(lake))
    assert unsuited.returncode == 0, unsuited.stdout + unsuited.stderr
    assert "shop: skipped (no suite quality/suites/shop.yaml)\n" in unsuited.stdout
    named = runner("--pipelines", pipelines, "quality", "--lake", str(lake), "shop")
    assert named.returncode == 2
    assert one_error_line(named).startswith("error: quality: no suite quality/suites/shop.yaml")

    again = runner("--pipelines", pipelines, "init", "shop")
    assert again.returncode == 2
    assert (
        one_error_line(again)
        == f"error: init: {project / 'pipelines' / 'shop.yaml'} already exists"
    )
    bad = runner("--pipelines", pipelines, "init", "Shop-2")
    assert bad.returncode == 2
    assert "'Shop-2' is not a usable pipeline name" in one_error_line(bad)


def test_init_in_a_folder_of_its_own_writes_a_test_that_passes_there(tmp_path):
    # A project of one's own has none of this project's tests/: the generated test gets its
    # fixture and reader from the engine, and pytest run in the folder passes it as it is.
    folder = tmp_path / "mine"
    made = runner("--pipelines", str(folder / "pipelines"), "init", "shop")
    assert made.returncode == 0, made.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[-1].startswith("1 passed")


def test_fail_update_on_the_batch_part_commits_nothing(spark, tmp_path):
    project = copy_project(tmp_path / "project")
    runner("--pipelines", str(project / "pipelines"), "init", "shop")
    records = project / "sql" / "shop" / "records.sql"
    edit(
        records,
        "CREATE OR",
        "-- CONSTRAINT small EXPECT (amount < 10) ON VIOLATION FAIL UPDATE\nCREATE OR",
    )
    lake = tmp_path / "lake"
    plan = plan_pipeline(Registry(project / "pipelines").get("shop"), once=True)
    with pytest.raises(UserError) as caught:
        run_pipeline(spark, plan, RunOptions(lake=lake, once=True, quiet=True), out=io.StringIO())
    assert str(caught.value) == (
        f"query main: {records}:11: expectation small failed (ON VIOLATION FAIL UPDATE), so the "
        'batch is not committed; row: {"id":"a1","amount":12.5,"currency":"EUR",'
        '"event_time":"2026-01-05T10:00:00.000Z","event_date":"2026-01-05","raw":"{\\"id\\": '
        '\\"a1\\", \\"amount\\": 12.5, \\"currency\\": \\"EUR\\", \\"event_time\\": '
        '\\"2026-01-05 10:00:00\\"}"}'
    )
    _nothing_committed(lake, "shop", ["shop", "quarantine"], str(caught.value))


def test_sql_spark_stops_on_is_named_by_file_line_and_column(spark, tmp_path):
    # A cast that fails under ANSI mode, on the batch's rows: Spark quotes the view's SQL.
    project = copy_project(tmp_path / "project")
    runner("--pipelines", str(project / "pipelines"), "init", "shop")
    kept = project / "sql" / "shop" / "kept.sql"
    edit(kept, "SELECT id, amount,", "SELECT id,\n  amount + CAST(currency AS DOUBLE) AS amount,")
    lake = tmp_path / "lake"
    plan = plan_pipeline(Registry(project / "pipelines").get("shop"), once=True)
    with pytest.raises(UserError) as caught:
        run_pipeline(spark, plan, RunOptions(lake=lake, once=True, quiet=True), out=io.StringIO())
    assert str(caught.value).startswith(
        f"query main: {kept}:4:12: [CAST_INVALID_INPUT] The value 'EUR' of the type \"STRING\" "
        'cannot be cast to "DOUBLE"'
    )
    assert str(caught.value).endswith("return NULL instead.")  # no engine frame after it
    _nothing_committed(lake, "shop", ["shop", "quarantine"], str(caught.value))


def _nothing_committed(lake: Path, pipeline: str, tables: list[str], message: str) -> None:
    assert last_committed(lake / "_checkpoints" / pipeline / "main") is None
    for table in tables:
        assert read_table(lake, table) == []
    events = EventLog(lake).read().to_pylist()
    assert [e["kind"] for e in events] == ["run_start", "error", "run_stop"]
    assert events[1]["message"] == message


def _server_logs(project: Path, rules: str, *, view: str = "checked_lines") -> tuple[object, Path]:
    path = project / "sql" / "server_logs" / f"{view}.sql"
    edit(path, "CREATE OR", f"{rules}\nCREATE OR")
    return plan_pipeline(Registry(project / "pipelines").get("server_logs"), once=True), path


def _input(tmp_path: Path) -> str:
    folder = tmp_path / "in"
    folder.mkdir()
    lines = [log(), log(source='"LoggedOut"'), log(cid='"1029_CId"'), log(ts='"20:06:9999 0:46:1"')]
    (folder / "part-1.json").write_text("".join(f"{line}\n" for line in lines))
    return str(folder)


def test_warn_and_drop_on_the_streaming_part_are_counted(spark, tmp_path):
    project = copy_project(tmp_path / "project")
    plan, _ = _server_logs(project, "-- CONSTRAINT logged_in EXPECT (NOT logged_out)")
    lake, out = tmp_path / "lake", io.StringIO()
    opts = RunOptions(lake=lake, once=True, quiet=True, input_path=_input(tmp_path))
    result = run_pipeline(spark, plan, opts, out=out)
    result.report(out)
    # The warning keeps the logged-out line; the year 9999 is dropped before the watermark.
    assert len(read_table(lake, "events")) == 3
    (dropped,) = read_table(lake, "quarantine")
    assert dropped["reason"] == "expectation event_time_in_range"
    # Judged on the batch at the batch's own time, which Spark kept in the offset log.
    batch_ms = batch_time_ms(lake / "_checkpoints" / "server_logs" / "main", 0)
    assert dropped["ingested_at"].timestamp() * 1000 == batch_ms
    counts = {
        "rows": 4,
        "dropped": 1,
        "logged_in": 1,
        "event_time_in_range": 1,
        "finite_prices": 0,
        "finite_amounts": 0,
    }
    assert dict(result.listener.totals["main"].expectations["checked_lines"]) == counts
    assert [c for c in _batch_checks(lake) if c] == [{"checked_lines": counts}]
    report = out.getvalue()
    assert (
        "query main: expectations of checked_lines: 4 rows, 1 dropped; event_time_in_range 1 "
        "broken (drop), finite_prices 0 broken (drop), finite_amounts 0 broken (drop), "
        "logged_in 1 broken (warn)"
    ) in report
    assert (
        "input lines 4 = 3 events + 1 quarantined + 0 duplicates dropped + 0 late dropped\n"
        in report
    )


def test_a_where_before_the_deduplication_is_said_in_the_accounting(spark, tmp_path):
    # Rows a WHERE drops unseen are no event, quarantine, duplicate or late row: the line
    # says where such a gap comes from and how to count them, not only that it is there.
    project = copy_project(tmp_path / "project")
    log_lines = project / "sql" / "server_logs" / "log_lines.sql"
    edit(
        log_lines, "DELAY OF INTERVAL 1 MINUTE", "DELAY OF INTERVAL 1 MINUTE\nWHERE NOT logged_out"
    )
    plan = plan_pipeline(Registry(project / "pipelines").get("server_logs"), once=True)
    out = io.StringIO()
    opts = RunOptions(lake=tmp_path / "lake", once=True, quiet=True, input_path=_input(tmp_path))
    run_pipeline(spark, plan, opts, out=out).report(out)
    assert (
        "input lines 4 = 2 events + 1 quarantined + 0 duplicates dropped + 0 late dropped "
        "(NOT ACCOUNTED FOR: 1: rows a WHERE drops before the deduplication, or lost; filter "
        "after it, or with a DROP ROW expectation, to count them)\n"
    ) in out.getvalue()


def test_fail_update_on_the_streaming_part_commits_nothing(spark, tmp_path):
    project = copy_project(tmp_path / "project")
    rule = "-- CONSTRAINT one_customer EXPECT (customer_id = '1028_CId') ON VIOLATION FAIL UPDATE"
    plan, path = _server_logs(project, rule)
    lake = tmp_path / "lake"
    opts = RunOptions(lake=lake, once=True, quiet=True, input_path=_input(tmp_path))
    with pytest.raises(UserError) as caught:
        run_pipeline(spark, plan, opts, out=io.StringIO())
    message = str(caught.value)
    assert message.startswith(
        f"query main: {path}:20: expectation one_customer failed (ON VIOLATION FAIL UPDATE), so "
        "the batch is not committed; row: {"
    )
    assert '"customer_id":"1029_CId"' in message and "\n" not in message
    _nothing_committed(lake, "server_logs", ["events", "quarantine", "sessions"], message)


def test_a_condition_that_is_not_true_or_false_is_named_before_the_run(spark, tmp_path):
    # Spark cast it to a boolean row by row: 'product_view' failed the batch, exit 1. A view
    # computed on each batch only: tests/pipeline/test_sensor_cep.py.
    project = copy_project(tmp_path / "project")
    plan, path = _server_logs(project, "-- CONSTRAINT has_type EXPECT (event_type)")
    lake = tmp_path / "lake"
    opts = RunOptions(lake=lake, once=True, quiet=True, input_path=_input(tmp_path))
    with pytest.raises(UserError) as caught:
        run_pipeline(spark, plan, opts, out=io.StringIO())
    assert str(caught.value).endswith(
        f"{path}:20: expectation has_type: EXPECT (event_type) is string, "
        "not a condition (true or false)"
    )
    assert last_committed(lake / "_checkpoints" / "server_logs" / "main") is None


DAILY = """-- Records per currency per day of event time.
CREATE OR REPLACE TEMP VIEW daily_totals AS
SELECT window.start AS day_start, currency, count(*) AS records
FROM records WATERMARK event_time DELAY OF INTERVAL 1 HOUR
GROUP BY window(event_time, '1 day'), currency
"""
DAILY_TABLE = """-- Records per currency per day.
CREATE TABLE till_daily (day_start TIMESTAMP, currency STRING, records BIGINT) USING DELTA
TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'day_start, currency')
"""


def test_rows_an_aggregation_drops_as_late_are_counted(spark, tmp_path):
    # A window aggregate added to init's pipeline, in a query of its own: a record behind its
    # watermark was dropped by Spark with no trace in the report or the log.
    import os

    from engine.project import Project
    from engine.scaffold import init_pipeline

    project = copy_project(tmp_path / "project")
    init_pipeline("till", Project(project))
    (project / "sql" / "till" / "daily_totals.sql").write_text(DAILY)
    (project / "tables" / "till_daily.sql").write_text(DAILY_TABLE)
    spec = project / "pipelines" / "till.yaml"
    edit(spec, "maxFilesPerTrigger: 10", "maxFilesPerTrigger: 1")
    daily = (
        "queries:\n  daily:\n    output_mode: update\n    sinks:\n      till_daily: daily_totals\n"
    )
    edit(spec, "settings: {}", daily + "settings: {}")
    inputs = tmp_path / "input"
    inputs.mkdir()
    late = [("b2", "2026-01-05 10:00:00"), ("b3", "2026-01-05 11:00:00")]  # one day, one group
    for n, records in enumerate([[("b1", "2026-01-07 10:00:00")], late]):
        part = inputs / f"part-{n}.jsonl"
        lines = [{"id": i, "amount": 1.0, "currency": "EUR", "event_time": t} for i, t in records]
        part.write_text("\n".join(json.dumps(line) for line in lines))
        os.utime(part, (1_700_000_000 + n, 1_700_000_000 + n))  # read in this order
    lake = tmp_path / "lake"
    plan = plan_pipeline(Registry(project / "pipelines").get("till"), once=True)
    options = RunOptions(lake=lake, once=True, quiet=True, input_path=str(inputs))
    out = io.StringIO()
    run_pipeline(spark, plan, options, out=out).report(out)

    assert sorted(r["id"] for r in read_table(lake, "till")) == ["b1", "b2", "b3"]
    assert [r["records"] for r in read_table(lake, "till_daily")] == [1]  # b2, b3 came too late
    # Spark counts the two late rows after its partial aggregation: one row of their day.
    said = (
        "query daily: at least 1 late dropped (rows behind the watermark; Spark counts an "
        "aggregation's once per group and partition)\n"
    )
    assert said in out.getvalue()
    logged = EventLog(lake).read().to_pylist()
    assert sum(e["late"] or 0 for e in logged if e["query"] == "daily") == 1


_INF, _NAN, _BIG_INT = float("inf"), float("nan"), 2**31 - 1
# A line's items as (price, quantity), and what finite_prices and finite_amounts give.
FINITE_RULES = [
    ([(1.5, 2)], True, True),
    ([], True, True),
    (None, None, None),
    ([(_NAN, 1)], False, True),  # NaN * 1 is NaN, not Infinity: finite_prices drops it
    ([(_INF, 1)], False, False),
    ([(-_INF, 2)], False, False),
    ([(1e308, 1)], True, True),
    ([(1e308, 2)], True, False),
    ([(-1e308, 2)], True, False),
    ([(1e300, -(2**31))], True, False),
    ([(1e308, 1), (1.0, 3)], True, True),  # past the bound, and every amount finite
    ([(2e154, _BIG_INT), (1e154, 1)], True, True),
    ([(1e200, 1), (1e-200, _BIG_INT)], True, True),
    ([(1.0, 1), (_NAN, 3)], False, True),
    ([(None, 1)], None, None),
    ([(1.0, None)], True, None),
    ([(1.0, 1), None], None, None),
    ([(None, 1), (_INF, 1)], False, False),
    ([(0.0, -(2**31)), (-0.0, 5)], True, True),
]
_LAMBDAS = {
    "finite_prices": "forall(items, i -> NOT isnan(i.price) AND abs(i.price) != double('Inf'))",
    "finite_amounts": "forall(items, i -> abs(i.price * i.quantity) != double('Inf'))",
}


def _drawn_items(count: int) -> list[list | None]:
    """Lines of 0-4 items of edge-case prices and quantities, some NULL."""
    pick = random.Random(11)
    prices = [0.0, -1.0, 2.5, 1e308, -1e308, 1e154, 5e-324, _NAN, _INF, -_INF, None]
    quantities = [0, 1, -1, 3, _BIG_INT, -(2**31), None]
    return [
        [
            None if pick.random() < 0.05 else (pick.choice(prices), pick.choice(quantities))
            for _ in range(pick.randint(0, 4))
        ]
        for _ in range(count)
    ]


@pytest.mark.parametrize("batch_ms", [None, 1_700_000_000_000], ids=["as-written", "pinned"])
def test_the_finite_rules_of_checked_lines_give_what_their_lambdas_give(spark, batch_ms):
    # The rules avoid a lambda for speed (the file says how); they must stay the lambdas' rules.
    text = (PROJECT / "sql" / "server_logs" / "checked_lines.sql").read_text()
    rules = {r.name: r.condition for r in parse_expectations(text, SparkStreaming)}
    cases = [items for items, _, _ in FINITE_RULES] + _drawn_items(400)
    lines = [
        (n, None if items is None else [None if i is None else ("p", *i) for i in items])
        for n, items in enumerate(cases)
    ]
    schema = "n INT, items ARRAY<STRUCT<product_id: STRING, price: DOUBLE, quantity: INT>>"
    columns = [f"({pinned_condition(rules[name], batch_ms)}) AS {name}" for name in _LAMBDAS]
    columns += [f"({lambda_}) AS {name}_lambda" for name, lambda_ in _LAMBDAS.items()]
    got = spark.createDataFrame(lines, schema).selectExpr("n", *columns).orderBy("n").collect()

    assert [(r["finite_prices"], r["finite_amounts"]) for r in got[: len(FINITE_RULES)]] == [
        (prices, amounts) for _, prices, amounts in FINITE_RULES
    ]
    differ = [(r["n"], name) for r in got for name in _LAMBDAS if r[name] != r[f"{name}_lambda"]]
    assert differ == []
