"""`runner.py lint` without Spark: one broken file per finding type in a copy of the project."""

import json
from pathlib import Path

import pytest

from engine.commands import main
from engine.definitions.pipeline import Registry
from engine.lint import Finding, lint_pipeline, lint_pipelines, schema_columns
from tests.conftest import copy_project
from tests.conftest import edit as replace_once


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's definitions."""
    return copy_project(tmp_path)


def edit(project: Path, file: str, old: str, new: str) -> Path:
    path = project / file
    replace_once(path, old, new)
    return path


def run_lint(project: Path, capsys: pytest.CaptureFixture[str], *names: str) -> tuple[int, str]:
    code = main(["--pipelines", str(project / "pipelines"), "lint", *names])
    return code, capsys.readouterr().out


TOTALS = "sql/order_status/order_totals.sql"
SPEND_WARNING = (
    "sql/customer_spend/customer_spend.sql:12:20: warning: aggregation without a WATERMARK "
    "upstream keeps one state row per group forever [unbounded-aggregation]"
)
TOTALS_WARNING = (
    f"{TOTALS}:7:15: warning: aggregation without a WATERMARK upstream keeps one state row per "
    "group forever [unbounded-aggregation]"
)

# (file, old text, new text, expected line: path relative to the copy, then the rest)
CASES = [
    pytest.param(
        TOTALS,
        "count(*) AS orders",
        "count(* AS orders",
        f"{TOTALS}:4:25: error: Expecting ) [syntax]",
        id="syntax",
    ),
    # sqlglot read these as an opaque command (and warned on stderr), or as empty clauses:
    # where Spark stops, with no line; now each where it is.
    pytest.param(
        TOTALS,
        "SELECT status",
        "SELEC status",
        f"{TOTALS}:4:1: error: expected SELECT or WITH, not 'SELEC' [syntax]",
        id="misspelt-select",
    ),
    pytest.param(
        TOTALS,
        "FROM orders",
        "FORM orders",
        f"{TOTALS}:5:4: error: Invalid expression / Unexpected token [syntax]",
        id="misspelt-from",
    ),
    pytest.param(
        TOTALS,
        "status, count(*)",
        "status,, count(*)",
        f"{TOTALS}:4:14: error: nothing after this comma [syntax]",
        id="double-comma",
    ),
    pytest.param(
        TOTALS,
        "AS updated_at\n",
        "AS updated_at,\n",
        f"{TOTALS}:4:67: error: nothing after this comma [syntax]",
        id="trailing-comma",
    ),
    pytest.param(
        TOTALS,
        "VIEW order_totals AS",
        "VIEW order_total AS",
        f"{TOTALS}:3:39: error: view 'order_total' must be named after its file 'order_totals'"
        " [view-name]",
        id="view-name",
    ),
    pytest.param(
        TOTALS,
        "FROM orders",
        "FROM order_lines",
        f"{TOTALS}:5:16: error: unknown view 'order_lines' [unknown-view]",
        id="unknown-view",
    ),
    pytest.param(
        "sql/order_status/orders.sql",
        "FROM raw_orders",
        "FROM order_totals",
        "sql/order_status/order_totals.sql: error: cycle: order_totals -> orders -> order_totals"
        " [cycle]",
        id="cycle",
    ),
    pytest.param(
        TOTALS,
        "max(arrival_time)",
        "max(arrived_at)",
        f"{TOTALS}:4:49: error: unknown column 'arrived_at' [unknown-column]",
        id="unknown-column",
    ),
    pytest.param(
        "sql/order_status/orders.sql",
        "timestamp AS arrival_time",
        "ts AS arrival_time",
        "sql/order_status/orders.sql:19:6: error: unknown column 'ts' [unknown-column]",
        id="unknown-column-in-cte",
    ),
    pytest.param(
        "sql/order_status/order_counts.sql",
        "WHERE reject_reason IS NULL",
        "WHERE o.reject_reason IS NULL",
        "sql/order_status/order_counts.sql:10:21: error: unknown column 'o.reject_reason'"
        " [unknown-column]",
        id="unknown-table-qualifier",
    ),
    pytest.param(
        "sql/server_logs/events.sql",
        "posexplode(items)",
        "posexplode(itemz)",
        "sql/server_logs/events.sql:16:29: error: unknown column 'itemz' [unknown-column]",
        id="unknown-column-in-lateral-view",
    ),
    pytest.param(
        "sql/order_status/order_counts.sql",
        "WATERMARK arrival_time DELAY",
        "WATERMARK arrived DELAY",
        "sql/order_status/order_counts.sql:9:29: error: unknown column 'arrived' in WATERMARK of"
        " 'orders' [unknown-column]",
        id="unknown-watermark-column",
    ),
    pytest.param(
        "sql/sensor_cep/sensor_samples.sql",
        "to_date(window_start)",
        "to_date(window_begin)",
        "sql/sensor_cep/sensor_samples.sql:3:30: error: unknown column 'window_begin'"
        " [unknown-column]",
        id="unknown-handler-output-column",
    ),
    pytest.param(
        "sql/sensor_cep/windowed_readings.sql",
        "AS sample_group",
        "AS sample_key",
        "pipelines/sensor_cep.yaml: error: handler window_samples reads unknown column"
        " 'sample_group' of view 'windowed_readings' [unknown-column]",
        id="handler-key-column",
    ),
    pytest.param(
        "sql/sensor_cep/readings.sql",
        " WATERMARK event_time DELAY OF INTERVAL 30 SECONDS",
        "",
        "sql/sensor_cep/readings.sql:6:19: error: deduplication without a WATERMARK upstream keeps"
        " every row's key forever; add WATERMARK <event time> DELAY OF INTERVAL ... to its input"
        " [unbounded-dedup]",
        id="distinct-without-watermark",
    ),
    pytest.param(
        "sql/user_activity/activity_events.sql",
        " WATERMARK event_time DELAY OF INTERVAL 5 SECONDS",
        "",
        "sql/user_activity/activity_events.sql:13:21: error: deduplication without a WATERMARK"
        " upstream keeps every row's key forever; add WATERMARK <event time> DELAY OF INTERVAL"
        " ... to its input [unbounded-dedup]",
        id="any-value-dedup-without-watermark",
    ),
    pytest.param(
        "sql/sensor_cep/anomalies.sql",
        "WHERE is_anomalous",
        "WHERE is_anomalous\nORDER BY event_time",
        "sql/sensor_cep/anomalies.sql:6:19: error: ORDER BY in a streaming view: only in complete"
        " mode, which this engine does not use [complete-mode-only]",
        id="order-by",
    ),
    pytest.param(
        "sql/sensor_cep/anomalies.sql",
        "WHERE is_anomalous",
        "WHERE is_anomalous\nLIMIT 10",
        "sql/sensor_cep/anomalies.sql:6:8: error: LIMIT in a streaming view: only in complete"
        " mode, which this engine does not use [complete-mode-only]",
        id="limit",
    ),
    pytest.param(
        "sql/sensor_cep/anomalies.sql",
        "current_timestamp() AS detected_at",
        "row_number() OVER (PARTITION BY device_id ORDER BY event_time) AS detected_at",
        "sql/sensor_cep/anomalies.sql:3:53: error: window function (OVER) in a streaming view: "
        "Spark refuses it on a stream, and here it would see one micro-batch's rows; use "
        "window() or session_window() in a GROUP BY, or a state handler [window-function]",
        id="window-function",
    ),
    pytest.param(
        "sql/sensor_cep/anomalies.sql",
        "FROM valid_readings",
        "FROM valid_readings JOIN (SELECT device_id AS d FROM readings) ON device_id = d",
        "sql/sensor_cep/anomalies.sql:4:42: error: join of streaming views (readings, "
        "valid_readings): this engine runs a view on each micro-batch, so rows of different "
        "batches would never meet (Spark keeps both sides in state); combine such rows in a "
        "state handler [stream-join]",
        id="join-of-two-streams",
    ),
    pytest.param(
        "sql/sensor_cep/anomalies.sql",
        "WHERE is_anomalous",
        "WHERE is_anomalous AND device_id IN (SELECT device_id FROM readings)",
        "sql/sensor_cep/anomalies.sql:5:53: error: subquery of streaming views (readings, "
        "valid_readings): this engine runs a view on each micro-batch, so rows of different "
        "batches would never meet (Spark keeps both sides in state); combine such rows in a "
        "state handler [stream-join]",
        id="subquery-of-two-streams",
    ),
    pytest.param(
        "sql/sensor_cep/readings.sql",
        "is_anomalous\n",
        "is_anomalous, uuid() AS id\n",
        "sql/sensor_cep/readings.sql:5:70: error: non-deterministic uuid() in a grouping or"
        " deduplication key [nondeterministic-key]",
        id="nondeterministic-distinct",
    ),
    pytest.param(
        "sql/order_status/order_counts.sql",
        "'5 seconds'), status",
        "'5 seconds'), status, rand()",
        "sql/order_status/order_counts.sql:11:56: error: non-deterministic rand() in a grouping"
        " or deduplication key [nondeterministic-key]",
        id="nondeterministic-group-by",
    ),
    pytest.param(
        "sql/customer_spend/customer_spend.sql",
        "sum(quantity)",
        "sum(quantiy)",
        "sql/customer_spend/customer_spend.sql:7:13: error: unknown column 'quantiy'"
        " [unknown-column]",
        id="delta-source-columns",
    ),
    # A name none of Spark's functions has: Spark stops the run when it analyses the view.
    pytest.param(
        "sql/order_status/orders.sql",
        "coalesce(is_valid_utf8(value), true)",
        "coalesc(is_valid_utf8(value), true)",
        "sql/order_status/orders.sql:9:42: error: coalesc() is not a Spark function; did you mean"
        " coalesce()? [unknown-function]",
        id="function-typo",
    ),
    pytest.param(
        "sql/customer_spend/customer_spend.sql",
        "sum(quantity)",
        "total_of(quantity)",
        "sql/customer_spend/customer_spend.sql:7:10: error: total_of() is not a Spark function"
        " [unknown-function]",
        id="unknown-function",
    ),
]

# What `run` refuses, `lint` reports: the plan's findings (engine/plan) are lint's first ones.
CASES += [
    pytest.param(
        "pipelines/order_status.yaml",
        "order_totals: order_totals",
        "order_total: order_totals",
        "pipelines/order_status.yaml: error: query orders: unknown table 'order_total'"
        " (tables/order_total.sql) [sink]",
        id="unknown-table",
    ),
    pytest.param(
        "pipelines/order_status.yaml",
        "order_totals: order_totals",
        "order_totals: order_total",
        "pipelines/order_status.yaml: error: query orders: table order_totals reads unknown"
        " view 'order_total' [sink]",
        id="unknown-sink-view",
    ),
    pytest.param(
        "tables/order_totals.sql",
        "'lake.mode' = 'merge'",
        "'lake.mode' = 'upsert'",
        "tables/order_totals.sql: error: lake.mode must be 'append', 'merge' or 'add', not 'upsert'"
        " [table]",
        id="table-ddl",
    ),
    pytest.param(
        "tables/order_totals.sql",
        "orders BIGINT",
        "orders DECIMAL(12, 0)",
        "tables/order_totals.sql: error: unsupported column type DECIMAL(12, 0) (supported: STRING,"
        " BIGINT, INT, SMALLINT, DOUBLE, FLOAT, BOOLEAN, DATE, TIMESTAMP, and ARRAY, STRUCT and MAP"
        " of them) [table]",
        id="table-type",
    ),
    pytest.param(
        "tables/order_totals.sql",
        ") USING DELTA",
        ") USING DELTA CLUSTER BY (status)",
        "tables/order_totals.sql: error: CLUSTER BY (status): not supported; a table here has"
        " typed columns with NOT NULL and COMMENT, PARTITIONED BY, and TBLPROPERTIES 'lake.mode',"
        " 'lake.key', 'lake.role' [table]",
        id="table-clause",
    ),
    # Quality suites, read without Great Expectations: the columns they name, their keys.
    pytest.param(
        "quality/suites/order_totals.yaml",
        "{column: orders, min_value: 1}",
        "{column: order, min_value: 1}",
        "quality/suites/order_totals.yaml: error: expect_column_values_to_be_between: unknown"
        " column 'order' (did you mean orders?) [suite]",
        id="suite-column",
    ),
    pytest.param(
        "quality/suites/order_totals.yaml",
        "expectations:",
        "expectation:",
        "quality/suites/order_totals.yaml: error: unknown key 'expectation' (known: table,"
        " derived, expectations) [suite]",
        id="suite-key",
    ),
    pytest.param(
        "quality/suites/order_totals.yaml",
        "expect_column_values_to_be_between",
        "expect_column_values_to_be_betwen",
        "quality/suites/order_totals.yaml: error: unknown expectation"
        " 'expect_column_values_to_be_betwen' (did you mean expect_column_values_to_be_between?)"
        " [suite]",
        id="suite-expectation",
    ),
    pytest.param(
        "quality/suites/order_totals.yaml",
        "min_value: 1}",
        "min_vaule: 1}",
        "quality/suites/order_totals.yaml: error: expect_column_values_to_be_between: unknown"
        " argument 'min_vaule' (did you mean min_value?) [suite]",
        id="suite-argument",
    ),
    # Expectations: a condition reads its view's columns; a bad rule line is a syntax error.
    pytest.param(
        "sql/server_logs/checked_lines.sql",
        "ELSE forall(items, i -> abs(i.price * i.quantity)",
        "ELSE forall(item, i -> abs(i.price * i.quantity)",
        "sql/server_logs/checked_lines.sql:19: error: expectation finite_amounts: unknown column"
        " 'item' of view 'checked_lines' [unknown-column]",
        id="expectation-column",
    ),
    pytest.param(
        "sql/server_logs/checked_lines.sql",
        "ELSE forall(items, i -> abs(i.price * i.quantity)",
        "ELSE forall(items, i -> absolute(i.price * i.quantity)",
        "sql/server_logs/checked_lines.sql:19: error: expectation finite_amounts: absolute() is not"
        " a Spark function [unknown-function]",
        id="expectation-function",
    ),
    pytest.param(
        "sql/sensor_cep/valid_readings.sql",
        "ON VIOLATION DROP ROW\n-- No NaN",
        "ON VIOLATION DROP\n-- No NaN",
        "sql/sensor_cep/valid_readings.sql:9: error: expected `-- CONSTRAINT name EXPECT"
        " (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]` on one line [syntax]",
        id="expectation-syntax",
    ),
    pytest.param(
        "sql/sensor_cep/readings.sql",
        "CREATE OR",
        "-- CONSTRAINT known EXPECT (device_id IS NOT NULL)\nCREATE OR",
        "sql/sensor_cep/readings.sql:4: error: expectation known: rules go on a view without"
        " DISTINCT or GROUP BY; declare them on a view that readings reads, or one that reads it"
        " [expectation]",
        id="expectation-on-stateful-view",
    ),
    pytest.param(
        "sql/sensor_cep/valid_readings.sql",
        "(NOT isnan(sensor_freq)",
        "(rand() < 0.99 AND NOT isnan(sensor_freq)",
        "sql/sensor_cep/valid_readings.sql:11: error: expectation finite_sensor_freq:"
        " non-deterministic rand() in a DROP ROW rule; the rows the view drops and those sent to"
        " quarantine could differ [nondeterministic-rule]",
        id="expectation-nondeterministic",
    ),
]


# A view that does not fit its table: the run refused it only after Spark had started, and
# `run --dry-run` said keep, exit 0.
CASES += [
    pytest.param(
        "tables/order_totals.sql",
        "  updated_at TIMESTAMP NOT NULL",
        "  note STRING,\n  updated_at TIMESTAMP NOT NULL",
        "tables/order_totals.sql: error: view 'order_totals' lacks column(s) note of table"
        " order_totals [table-fit]",
        id="table-column-not-in-view",
    ),
    pytest.param(
        "sql/server_logs/purchases.sql",
        "  price * quantity AS amount",
        "  price * quantity AS amount,\n  source",
        "tables/purchases.sql: error: view 'purchases' has column(s) source that table purchases"
        " lacks: declare them in the table or leave them out of the view [table-fit]",
        id="view-column-not-in-table",
    ),
]


@pytest.mark.parametrize(("file", "old", "new", "expected"), CASES)
def test_one_finding_per_broken_file(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    file: str,
    old: str,
    new: str,
    expected: str,
) -> None:
    edit(project, file, old, new)
    pipeline = file.split("/")[1] if file.startswith("sql/") else Path(file).stem
    pipeline = "order_status" if file.startswith(("tables/", "quality/")) else pipeline
    code, out = run_lint(project, capsys, pipeline)
    lines = out.splitlines()
    assert f"{project}/{expected}" in lines or expected in lines, out
    if file.startswith("tables/"):  # a broken table file is named for its own cause
        assert "unknown table" not in out
    assert code == 1
    assert lines[-1].startswith("lint: 1 pipeline, ")


def test_project_sql_is_clean_but_for_two_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    result = lint_pipelines(Registry())
    assert result.errors == 0
    assert [f.code for f in result.findings] == ["unbounded-aggregation"] * 2
    assert main(["lint"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        SPEND_WARNING,
        TOTALS_WARNING,
        "lint: 5 pipelines, 23 SQL files, no errors, 2 warnings",
    ]


@pytest.mark.parametrize("name", ["server_logs", "user_activity", "sensor_cep"])
@pytest.mark.parametrize("kind", ["files", "kafka"])
def test_sql_reads_only_the_columns_every_source_has(name: str, kind: str) -> None:
    """`--conf source.kind=kafka` runs the same SQL (server_logs read a files-only column)."""
    pipeline = Registry().get(name).with_settings({"source.kind": kind, "source.topic": "t"})
    assert pipeline.source.kind == kind
    _, findings = lint_pipeline(pipeline)
    assert [f for f in findings if f.severity == "error"] == []


UNBOUNDED = "7:15: warning: aggregation without a WATERMARK upstream"


@pytest.mark.parametrize(
    ("comment", "shown", "summary"),
    [
        (
            "  -- noqa: unbounded-aggregation (four statuses)",
            [],
            "no findings (1 silenced by noqa)",
        ),
        ("  -- NOQA", [], "no findings (1 silenced by noqa)"),
        # A code that silences nothing is a warning of its own: a stale one would hide the
        # next warning of its line.
        (
            "  -- noqa: non-deterministic-key, unbounded-aggregation",
            ["7:18: warning: noqa code non-deterministic-key silences no warning on this line"],
            "no errors, 1 warning (1 silenced by noqa)",
        ),
        (
            "  -- noqa: unknown-column",
            [UNBOUNDED, "7:18: warning: noqa code unknown-column silences no warning on this line"],
            "no errors, 2 warnings",
        ),
        ("  -- no qa", [UNBOUNDED], "no errors, 1 warning"),
    ],
)
def test_noqa_on_its_line_silences_a_warning(
    project: Path, capsys: pytest.CaptureFixture[str], comment: str, shown: list[str], summary: str
) -> None:
    edit(project, TOTALS, "GROUP BY status\n", f"GROUP BY status{comment}\n")
    code, out = run_lint(project, capsys, "order_status")
    assert code == 0
    *lines, last = out.splitlines()
    assert len(lines) == len(shown), out
    for line, expected in zip(lines, shown, strict=True):
        assert line.removeprefix(f"{project}/").startswith(f"{TOTALS}:{expected}"), line
    assert last == f"lint: 1 pipeline, 4 SQL files, {summary}"


def test_a_view_summed_into_an_add_table_keeps_no_state_and_so_no_warning(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It runs on each batch: the warning said its groups were kept forever (found by a user).
    spend = "sql/customer_spend/customer_spend.sql"
    edit(project, spend, "round(sum(amount), 2) AS total_spent,", "sum(amount) AS total_spent")
    edit(project, spend, "  min(event_time) AS first_purchase,\n", "")
    edit(project, spend, "  max(event_time) AS last_purchase\n", "")
    table = "tables/customer_spend.sql"
    edit(project, table, "rounded to cents',", "rounded to cents'")
    edit(project, table, "'lake.mode' = 'merge'", "'lake.mode' = 'add'")
    for column in ("first", "last"):
        edit(project, table, f"  {column}_purchase TIMESTAMP NOT NULL", "--")
    (project / "quality" / "suites" / "customer_spend.yaml").unlink()  # it reads those two
    code, out = run_lint(project, capsys, "customer_spend")
    assert (code, out.splitlines()) == (0, ["lint: 1 pipeline, 1 SQL file, no findings"]), out


def test_noqa_does_not_silence_an_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `run` would stop on the error all the same, so the noqa silences nothing.
    edit(project, TOTALS, "AS updated_at\n", "AS updated_at, nope  -- noqa\n")
    code, out = run_lint(project, capsys, "order_status")
    assert code == 1
    assert "unknown column 'nope'" in out
    assert f"{project}/{TOTALS}:4:75: warning: `-- noqa` silences no warning on this line" in out
    assert out.splitlines()[-1] == ("lint: 1 pipeline, 4 SQL files, 1 error, 2 warnings")


def test_findings_as_json_rows(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(project, TOTALS, "max(arrival_time)", "max(arrived_at)")
    code, out = run_lint(project, capsys, "order_status", "--format", "json")
    assert code == 1
    assert json.loads(out) == [
        {
            "file": str(project / "sql/order_status/order_totals.sql"),
            "line": 4,
            "col": 49,
            "severity": "error",
            "code": "unknown-column",
            "message": "unknown column 'arrived_at'",
        },
        {
            "file": str(project / "sql/order_status/order_totals.sql"),
            "line": 7,
            "col": 15,
            "severity": "warning",
            "code": "unbounded-aggregation",
            "message": "aggregation without a WATERMARK upstream keeps one state row per group "
            "forever",
        },
    ]
    assert run_lint(project, capsys, "server_logs", "--format", "json") == (0, "[]\n")


def test_clean_pipeline_and_unknown_pipeline(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_lint(project, capsys, "server_logs") == (
        0,
        "lint: 1 pipeline, 6 SQL files, no findings\n",
    )
    assert main(["--pipelines", str(project / "pipelines"), "lint", "nope"]) == 2
    assert "unknown pipeline 'nope'" in capsys.readouterr().err


def test_an_unused_noqa_in_the_pipeline_yaml(project: Path) -> None:
    spec = edit(project, "pipelines/order_status.yaml", "settings: {}", "settings: {}  # noqa")
    line = spec.read_text().splitlines().index("settings: {}  # noqa") + 1
    findings = lint_pipelines(Registry(project / "pipelines"), ["order_status"]).findings
    stale = [(f.path.name, f.line, f.severity) for f in findings if f.code == "unused-noqa"]
    assert stale == [("order_status.yaml", line, "warning")]


def test_findings_sorted_by_file_then_line(project: Path) -> None:
    edit(project, TOTALS, "max(arrival_time)", "max(arrived_at)")
    edit(project, TOTALS, "SELECT status", "SELECT nope, status")
    edit(project, "sql/order_status/orders.sql", "timestamp AS arrival_time", "ts AS arrival_time")
    findings = lint_pipelines(Registry(project / "pipelines"), ["order_status"]).findings
    where = [(f.path.name, f.line) for f in findings]
    assert where == sorted(where, key=lambda w: (str(w[0]), w[1] or 0))
    assert [f.message for f in findings if f.path.name == "order_totals.sql"][:2] == [
        "unknown column 'nope'",
        "unknown column 'arrived_at'",
    ]
    assert isinstance(findings[0], Finding)


def test_schema_columns_reads_top_level_names_only() -> None:
    ddl = "customer_id STRING, products ARRAY<STRUCT<product_id: STRING, price: DOUBLE>>, n INT"
    assert schema_columns(ddl) == ["customer_id", "products", "n"]


@pytest.mark.parametrize(
    ("sql", "made", "why"),
    [
        ("sql/order_statuss", False, "no such folder (the spec's sql:)"),
        ("empty", True, "no .sql files"),
    ],
)
def test_a_spec_without_its_sql_folder_is_that_one_finding(
    project: Path, capsys: pytest.CaptureFixture[str], sql: str, made: bool, why: str
) -> None:
    # Not also every view that tables and handlers read, reported unknown, listed first.
    if made:
        (project / sql).mkdir()
    edit(project, "pipelines/order_status.yaml", "sql: sql/order_status", f"sql: {sql}")
    code, out = run_lint(project, capsys, "order_status")
    assert out.splitlines()[0] == f"{project}/{sql}: error: {why} [no-sql]"
    assert (code, len(out.splitlines())) == (1, 2)
