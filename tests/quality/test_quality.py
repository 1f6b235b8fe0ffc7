"""Quality suites over small real Delta tables (delta-rs, no Spark), in process and by the CLI."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from engine.definitions.suites import expectation_arguments
from engine.definitions.tables import load_tables
from engine.errors import UserError
from engine.lake.event_log import Event, EventLog
from engine.project import Project
from engine.quality import validate_lake
from engine.quality.html import Check, TableHistory, write_report_html
from engine.quality.suites import expectation_classes, load_suite, load_suites
from engine.sinks import BatchId
from engine.sinks.delta import DeltaSink
from tests.conftest import copy_project

PROJECT = Path(__file__).resolve().parents[2]
TABLES = load_tables(PROJECT / "tables")
T = datetime(2019, 6, 20, 0, 46, 1, tzinfo=UTC)


def event(customer: str = "a", price: float = 1.0, day: int = 20) -> dict[str, Any]:
    return {
        "customer_id": customer,
        "event_time": T,
        "event_type": "add_to_cart",
        "product_id": "p",
        "price": price,
        "quantity": 1,
        "source": "www.x.com",
        "logged_out": False,
        "event_date": date(2019, 6, day),
    }


def cart(customer: str = "a", total: float = 0.3) -> dict[str, Any]:
    return {
        "customer_id": customer,
        "total_items": 2,
        "total_price": total,
        "products": [{"product_id": "p", "price": 0.1}, {"product_id": "q", "price": 0.2}],
        "updated_at": T,
    }


def sample(freq: float = 10.0, second: int = 5, anomalous: bool | None = None) -> dict[str, Any]:
    return {
        "window_start": T,
        "window_end": T + timedelta(seconds=60),
        "device_id": "377412",
        "sensor_freq": freq,
        "event_time": T + timedelta(seconds=second),
        "is_anomalous": freq < 0 if anomalous is None else anomalous,
        "part_date": T.date(),
    }


CLEAN: dict[str, list[dict[str, Any]]] = {
    "events": [event("a"), event("b", price=0.0)],
    "sessions": [
        {
            "customer_id": "a",
            "session_start": T,
            "last_event_time": T,
            "total_events": 1,
            "logged_in": True,
            "end_reason": None,
            "session_end": None,
        },
        {
            "customer_id": "a",
            "session_start": T - timedelta(hours=1),
            "last_event_time": T - timedelta(minutes=50),
            "total_events": 3,
            "logged_in": False,
            "end_reason": "timeout",
            "session_end": T - timedelta(minutes=45),
        },
    ],
    "carts": [cart("a"), cart("b")],
    "purchases": [
        {
            "customer_id": "a",
            "event_time": T,
            "product_id": "p",
            "unit_price": 2.0,
            "quantity": 2,
            "amount": 4.0,
        }
    ],
    "sensor_samples": [sample(10.0, 5), sample(-5.0, 20), sample(30.0, 59)],
    "sensor_anomalies": [
        {
            "device_id": "377412",
            "sensor_freq": -5.0,
            "event_time": T,
            "detected_at": T + timedelta(days=2000),
        }
    ],
    "activity_spans": [
        {
            "user": "a",
            "span_no": 1,
            "activity": "stand",
            "span_start": T,
            "span_end": T + timedelta(seconds=1),
            "events": 2,
            "closed": True,
        }
    ],
    "user_event_counts": [{"user": "a", "events": 2}],
    "order_counts": [
        {
            "window_start": T,
            "window_end": T + timedelta(seconds=5),
            "status": "PLACED",
            "orders": 3,
        }
    ],
    "order_totals": [{"status": "PLACED", "orders": 3, "updated_at": T}],
    "customer_spend": [
        {
            "customer_id": "a",
            "purchased_items": 1,
            "units": 2,
            "total_spent": 4.0,
            "first_purchase": T,
            "last_purchase": T,
        }
    ],
    "quarantine": [
        {
            "pipeline": "server_logs",
            "source": "part-1.json",
            "raw": "{",
            "reason": "malformed JSON",
            "ingested_at": datetime.now(UTC),
        }
    ],
}


def write(lake: Path, name: str, rows: list[dict[str, Any]], batch: int = 0) -> None:
    data = pa.Table.from_pylist(rows, schema=TABLES[name].arrow_schema)
    DeltaSink(TABLES[name], lake).write(data, BatchId("test.q.c", batch, "test", "q"))


def clean_lake(lake: Path) -> Path:
    for name, rows in CLEAN.items():
        write(lake, name, rows)
    return lake


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "runner.py", "quality", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def failures(summary: dict[str, Any]) -> dict[str, list[str]]:
    return {
        name: [e["expectation"] for e in t["expectations"] if not e["success"]]
        for name, t in summary["tables"].items()
        if not t["passed"]
    }


def test_every_table_has_a_suite_and_merged_keys_are_unique():
    suites = load_suites(
        {n: t.arrow_schema for n, t in TABLES.items()}, PROJECT / "quality" / "suites"
    )
    assert set(suites) == set(TABLES)
    for name, table in TABLES.items():
        configs = [e.configuration for e in suites[name].expectations]
        not_null = {c.kwargs["column"] for c in configs if c.type.endswith("to_not_be_null")}
        assert set(table.key) <= not_null
        if table.mode == "merge":
            unique = [
                tuple(c.kwargs.get("column_list") or [c.kwargs.get("column")])
                for c in configs
                if c.type.endswith("to_be_unique")
            ]
            assert table.key in unique, name


def test_clean_lake_passes_every_suite(tmp_path):
    lake = clean_lake(tmp_path / "lake")
    run = cli("--lake", str(lake))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[: len(CLEAN)]] == sorted(CLEAN)
    assert all(": passed (" in ln for ln in lines[: len(CLEAN)])
    summary = json.loads((lake / "_quality" / "summary.json").read_text())
    assert summary["passed"] and set(summary["tables"]) == set(CLEAN)
    assert summary["tables"]["sessions"]["version"] == 1
    assert (lake / "_quality" / "data_docs" / "index.html").is_file()


def test_corrupted_tables_fail_exactly_the_right_expectations(tmp_path):
    lake = clean_lake(tmp_path / "lake")
    write(lake, "events", [event("c", price=-1.0)], batch=1)
    # A merge cannot make a duplicate key: append one behind the sink's back.
    carts = pa.Table.from_pylist([cart("a")], schema=TABLES["carts"].arrow_schema)
    write_deltalake(str(lake / "carts"), carts, mode="append")
    write(lake, "carts", [cart("z", total=0.5)], batch=1)
    run = cli("--lake", str(lake), "--report", str(tmp_path / "report"))
    assert run.returncode == 1, run.stdout + run.stderr
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert not summary["passed"]
    assert failures(summary) == {
        "carts": [
            "expect_column_values_to_be_unique(customer_id)",
            "expect_column_values_to_be_between(total_price_error)",
        ],
        "events": ["expect_column_values_to_be_between(price)"],
    }
    counts = {
        e["expectation"]: e["unexpected_count"] for e in summary["tables"]["carts"]["expectations"]
    }
    assert counts["expect_column_values_to_be_unique(customer_id)"] == 2
    assert counts["expect_column_values_to_be_between(total_price_error)"] == 1
    # The line names values that broke each rule, as the summary does.
    assert (
        "carts: FAILED 2 of 8: expect_column_values_to_be_unique(customer_id) 2 unexpected (e.g. "
        '"a");'
    ) in run.stdout
    examples = {
        e["expectation"]: e["examples"] for e in summary["tables"]["events"]["expectations"]
    }
    assert examples["expect_column_values_to_be_between(price)"] == ["-1.0"]
    # The page a person opens: self-contained, failing tables and expectations named.
    page = (tmp_path / "report" / "index.html").read_text()
    assert '<h2>carts: <span class="bad">FAILED</span></h2>' in page
    assert '<h2>purchases: <span class="ok">passed</span></h2>' in page
    assert "expect_column_values_to_be_between(price)</td><td>1 unexpected (e.g. -1.0)" in page
    assert "https://" not in page


def test_session_rules_catch_an_inconsistent_close(tmp_path):
    bad = dict(CLEAN["sessions"][1], logged_in=True, session_end=None, customer_id="b")
    write(tmp_path, "sessions", [*CLEAN["sessions"], bad])
    report = validate_lake(tmp_path, tmp_path / "report", ["sessions"])
    [result] = report.results
    assert [o.expectation for o in result.expectations if not o.success] == [
        "expect_column_pair_values_to_be_equal(has_end_reason, has_session_end)",
        "expect_column_pair_values_to_be_equal(logged_in, is_open)",
    ]
    # The result is in the lake's event log, with what failed.
    (event,) = EventLog(tmp_path).read().to_pylist()
    assert (event["kind"], event["table_name"], event["status"]) == (
        "quality",
        "sessions",
        "failed",
    )
    assert event["rows_in"] == 3
    assert len(json.loads(event["details"])["failed"]) == 2


def test_sensor_rules_catch_a_wrong_flag_and_a_reading_outside_its_window(tmp_path):
    write(tmp_path, "sensor_samples", [*CLEAN["sensor_samples"], sample(7.0, 60, anomalous=True)])
    [result] = validate_lake(tmp_path, tmp_path / "report", ["sensor_samples"]).results
    assert [o.expectation for o in result.expectations if not o.success] == [
        "expect_column_pair_values_a_to_be_greater_than_b(window_end, event_time)",
        "expect_column_pair_values_to_be_equal(is_anomalous, negative_freq)",
    ]


def test_freshness_is_relative_to_the_validation_time(tmp_path):
    write(tmp_path, "quarantine", CLEAN["quarantine"])
    later = datetime.now(UTC) + timedelta(hours=25)
    report = validate_lake(tmp_path, tmp_path / "report", ["quarantine"], now=later)
    assert [o.expectation for o in report.results[0].expectations if not o.success] == [
        "expect_column_min_to_be_between(ingested_hours_ago)"
    ]


def test_since_last_validates_only_new_rows(tmp_path):
    lake = tmp_path / "lake"
    write(lake, "events", [event("a"), event("b")])
    write(lake, "carts", [cart("a")])
    first = validate_lake(lake, since_last=True)
    assert {r.table: r.rows for r in first.results} == {"events": 2, "carts": 1}
    write(lake, "events", [event("c", day=21), event("d", day=22), event("e", day=21)], batch=1)
    write(lake, "carts", [cart("b")], batch=1)
    again = {r.table: r for r in validate_lake(lake, since_last=True).results}
    assert again["events"].rows == 3 and again["events"].scope == "rows added since version 1"
    assert again["carts"].rows == 2 and again["carts"].scope == "whole table (merged)"
    state = json.loads((lake / "_quality" / "state.json").read_text())
    assert state["events"]["version"] == 2
    idle = {r.table: r for r in validate_lake(lake, since_last=True).results}
    assert idle["events"].rows == 0 and idle["events"].passed


def test_since_last_checks_failed_rows_again_and_a_rewritten_table_whole(tmp_path):
    lake, report = tmp_path / "lake", tmp_path / "report"

    def since_last() -> tuple[str, str, int]:
        (result,) = validate_lake(lake, report, ["events"], since_last=True).results
        return result.line().split(":")[1].split()[0], result.scope, result.rows

    write(lake, "events", [event("a"), event("b")])
    assert since_last() == ("passed", "whole table", 2)
    write(lake, "events", [event("c", price=-1.0)], batch=1)
    assert since_last() == ("FAILED", "rows added since version 1", 1)
    # The failed validation did not move the version on: its row is checked again.
    write(lake, "events", [event("d")], batch=2)
    assert since_last() == ("FAILED", "rows added since version 1", 2)
    state = json.loads((report / "state.json").read_text())
    assert state["events"]["version"] == 1

    # A run that widens quantity INT -> BIGINT rewrites every row in one overwrite commit
    # (version 4), so Delta counts them all as added: the rows appended since are not known
    # apart, and the whole table is checked.
    ddl = tmp_path / "tables"
    ddl.mkdir()
    text = (PROJECT / "tables" / "events.sql").read_text()
    (ddl / "events.sql").write_text(text.replace("quantity INT ", "quantity BIGINT "))
    wider = load_tables(ddl)["events"]
    DeltaSink(wider, lake).prepare()
    rows = pa.Table.from_pylist([event("e")], schema=wider.arrow_schema)
    DeltaSink(wider, lake).write(rows, BatchId("test.q.c", 3, "test", "q"))
    scope = "whole table (version 4 rewrote its files after version 1)"
    assert since_last() == ("FAILED", scope, 5)


def test_since_last_checks_the_whole_table_after_its_suite_changed(tmp_path):
    # The rows that passed were never held to a rule added since.
    project = Project(copy_project(tmp_path / "project"))
    lake, report = tmp_path / "lake", tmp_path / "report"

    def since_last() -> tuple[str, str, int]:
        (result,) = validate_lake(
            lake, report, ["events"], since_last=True, project=project
        ).results
        return result.line().split(":")[1].split()[0], result.scope, result.rows

    write(lake, "events", [event("a"), event("b", price=5.0)])
    assert since_last() == ("passed", "whole table", 2)
    assert since_last() == ("passed", "no rows added since version 1", 0)
    (nothing,) = validate_lake(lake, report, ["events"], since_last=True, project=project).results
    # It said "passed (0 expectations; ...)", which reads as a suite without rules.
    assert nothing.line() == (
        "events: passed (no rows to check; version 1, no rows added since version 1)"
    )
    suite = project.suites / "events.yaml"
    rule = "  - expect_column_values_to_be_between: {column: price, max_value: 2}\n"
    suite.write_text(suite.read_text() + rule)
    changed = ("FAILED", "whole table (its suite changed since version 1)", 2)
    assert since_last() == changed
    assert since_last() == changed  # until the table passes the suite as it is now


def test_missing_tables_are_skipped_unless_named(tmp_path):
    write(tmp_path, "purchases", CLEAN["purchases"])
    report = validate_lake(tmp_path)
    assert [r.table for r in report.results] == ["purchases"]
    assert report.skipped == {t: "not in the lake" for t in sorted(set(TABLES) - {"purchases"})}
    with pytest.raises(UserError, match="table 'carts' is not in the lake"):
        validate_lake(tmp_path, tables=["carts"])
    # None there at all: a report that checked nothing is refused, and none is written.
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match=r"^quality: none of the tables to check is in the lake"):
        validate_lake(empty)
    assert not any(empty.iterdir())


def test_a_table_without_a_suite_is_skipped_unless_named(tmp_path):
    project = Project(copy_project(tmp_path / "project"))
    (project.suites / "carts.yaml").unlink()
    lake = tmp_path / "lake"
    write(lake, "carts", CLEAN["carts"])
    write(lake, "events", CLEAN["events"])
    no_suite = "no suite quality/suites/carts.yaml"
    # Every table (plain `quality`), and a pipeline's tables (`run --once --quality`).
    for tables, named in (((), True), (["events", "carts", "sessions"], False)):
        report = validate_lake(lake, tables=tables, named=named, project=project)
        assert [r.table for r in report.results] == ["events"] and report.passed
        assert report.skipped["carts"] == no_suite
        assert report.skipped["sessions"] == "not in the lake"
        out = io.StringIO()
        report.print(out)
        assert "carts: skipped (no suite quality/suites/carts.yaml)\n" in out.getvalue()
    with pytest.raises(UserError, match=f"^quality: {no_suite} "):
        validate_lake(lake, tables=["carts"], project=project)


def test_a_mistake_in_another_tables_suite_is_for_that_table_to_name(tmp_path):
    # It stopped the `--quality` of every pipeline, after the run had written its rows.
    project = Project(copy_project(tmp_path / "project"))
    spend = project.suites / "customer_spend.yaml"
    spend.write_text(spend.read_text() + "  - expect_column_values_to_be_betwen: {column: units}\n")
    lake = tmp_path / "lake"
    write(lake, "events", CLEAN["events"])
    for tables, named in ((["events"], True), (["events", "carts"], False)):
        report = validate_lake(lake, tables=tables, named=named, project=project)
        assert [r.table for r in report.results] == ["events"] and report.passed
    with pytest.raises(UserError, match=r"customer_spend.yaml: unknown expectation"):
        validate_lake(lake, project=project)


def test_a_column_the_ddl_has_and_the_table_not_yet_is_said(tmp_path):
    # Between an edit of tables/ and the next run: the automatic finiteness check of a new
    # DOUBLE column stopped `quality` with `Field "discount" does not exist`, exit 1.
    project = Project(copy_project(tmp_path / "project"))
    ddl = project.tables / "carts.sql"
    ddl.write_text(ddl.read_text().replace("total_items", "discount DOUBLE,\n  total_items", 1))
    lake = tmp_path / "lake"
    write(lake, "carts", CLEAN["carts"])
    write(lake, "events", CLEAN["events"])
    report = validate_lake(lake, project=project)
    assert [r.table for r in report.results] == ["events"] and report.passed
    why = "column(s) discount of tables/carts.sql not in the table yet (the next run of its "
    assert report.skipped["carts"].startswith(why)
    with pytest.raises(UserError, match=re.escape(f"quality: table 'carts': {why}")):
        validate_lake(lake, tables=["carts"], project=project)


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("{column: total_price, min_value: 100, max_value: 0}", "min_value cannot be greater"),
        ("{column: customer_id, min_value: 1, max_value: 5}", "Column values, min_value, and"),
    ],
)
def test_a_rule_great_expectations_cannot_evaluate_is_a_usage_error(tmp_path, rule, reason):
    # It was a failed check of the data: `observed None`, no reason, exit 1.
    project = Project(copy_project(tmp_path / "project"))
    suite = project.root / "quality" / "suites" / "carts.yaml"
    suite.write_text(suite.read_text() + f"  - expect_column_values_to_be_between: {rule}\n")
    lake = tmp_path / "lake"
    write(lake, "carts", CLEAN["carts"])
    said = f"{suite}: expect_column_values_to_be_between("
    with pytest.raises(UserError, match=re.escape(said) + r"\w+\): " + re.escape(reason)):
        validate_lake(lake, tables=["carts"], project=project)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "error: quality: no suite quality/suites/nope.yaml in ./ (have: activity_spans"),
        (["--lake", "/nonexistent/lake"], "error: --lake: no lake at /nonexistent/lake"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path, args, message):
    write(tmp_path, "events", CLEAN["events"])
    run = cli(*args) if "--lake" in args else cli(*args, "--lake", str(tmp_path))
    assert run.returncode == 2
    assert run.stderr.startswith(message) and len(run.stderr.strip().splitlines()) == 1


def test_a_suite_cannot_ask_for_unknown_code(tmp_path):
    path = tmp_path / "carts.yaml"
    path.write_text(
        "table: carts\nderived:\n  x: {eval: total_price}\n"
        "expectations:\n  - expect_column_values_to_not_be_null: {column: x}\n"
    )
    with pytest.raises(UserError, match=r"carts.yaml: derived 'x': unknown kind 'eval'"):
        load_suite(path, TABLES["carts"].arrow_schema)


_CARTS_SUITE = (
    "table: carts\nexpectations:\n  - expect_column_values_to_not_be_null: {column: customer_id}\n"
)
_NOT_NULL = "expect_column_values_to_not_be_null"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The same one-line errors as a pipeline spec's (engine/definitions/yaml_files.py).
        (
            _CARTS_SUITE + "colour: red\n",
            "unknown key 'colour' (known: table, derived, expectations)",
        ),
        (
            _CARTS_SUITE.replace("expectations:", "expectaions:"),
            "unknown key 'expectaions' (known: table, derived, expectations)",
        ),
        (
            _CARTS_SUITE + "table: carts\n",
            "line 4, column 1: key 'table' repeated (first at line 1)",
        ),
        (
            "table: carts\n\tderived: {}\n",
            "line 2, column 1: found character '\\t' that cannot start any token",
        ),
        ("- table: carts\n", "expected a mapping (table, expectations), got a list"),
        (
            _CARTS_SUITE + "derived: [x]\n",
            "derived: expected a mapping (name: {kind: argument}), got a list",
        ),
        (
            _CARTS_SUITE + "derived:\n  x: {abs_diff: [1, 2]}\n",
            "derived 'x': bad argument [1, 2] for abs_diff",
        ),
        (
            f"table: carts\nexpectations:\n  - {_NOT_NULL}: 5\n",
            f"{_NOT_NULL}: expected a mapping of its arguments ({{column: ...}}), got the number 5",
        ),
        (
            f"table: carts\nexpectations:\n  - {_NOT_NULL}: {{column: [customer_id]}}\n",
            f"{_NOT_NULL}.column: expected a column name, got a list",
        ),
        (
            "table: carts\nexpectations:\n"
            "  - expect_compound_columns_to_be_unique: {column_list: customer_id}\n",
            "expect_compound_columns_to_be_unique.column_list: expected a list of columns, "
            "got the text 'customer_id'",
        ),
        # A misspelt name: the close one is named.
        (
            _CARTS_SUITE.replace("to_not_be_null", "to_not_be_nul"),
            f"unknown expectation 'expect_column_values_to_not_be_nul' (did you mean {_NOT_NULL}?)",
        ),
        (
            "table: carts\nexpectations:\n  - expect_table_to_be_tidy: {}\n",
            "unknown expectation 'expect_table_to_be_tidy'",
        ),
        (
            _CARTS_SUITE.replace("{column: customer_id}", "{column: customer_id, mostl: 0.9}"),
            f"{_NOT_NULL}: unknown argument 'mostl' (did you mean mostly?)",
        ),
        # The values of the arguments are GX's to check.
        (
            _CARTS_SUITE.replace("{column: customer_id}", "{column: customer_id, mostly: 2}"),
            f"{_NOT_NULL}.mostly: ensure this value is less than or equal to 1.0",
        ),
        (
            "table: carts\nexpectations:\n"
            "  - expect_column_values_to_be_between: {column: customer_id}\n",
            "expect_column_values_to_be_between: min_value and max_value cannot both be None",
        ),
        (
            _CARTS_SUITE.replace("customer_id", "custmer_id"),
            f"{_NOT_NULL}: unknown column 'custmer_id' (did you mean customer_id?)",
        ),
        (
            _CARTS_SUITE + "derived:\n  n: {size_of: product}\n",
            "derived 'n' reads unknown column 'product' (did you mean products?)",
        ),
        # A helper with a column's name would replace it: the rules on it would check the
        # helper (found by a helper session: a failing range on total_spent passed).
        (
            _CARTS_SUITE + "derived:\n  total_price: {is_negative: total_items}\n",
            "derived 'total_price' has a column's name; give it one of its own",
        ),
        (
            _CARTS_SUITE + "derived:\n  total_price_is_finite: {is_not_null: customer_id}\n",
            "derived 'total_price_is_finite' has a finiteness check's name; give it one of its own",
        ),
        # A helper over a column of another type: pandas' own words, exit 1, or a text's length.
        (
            _CARTS_SUITE + "derived:\n  n: {size_of: customer_id}\n",
            "derived 'n': size_of reads a list; customer_id is not (string)",
        ),
        (
            _CARTS_SUITE + "derived:\n  n: {is_negative: customer_id}\n",
            "derived 'n': is_negative reads a number; customer_id is not (string)",
        ),
        (
            _CARTS_SUITE + "derived:\n  n: {seconds_between: [updated_at, total_items]}\n",
            "derived 'n': seconds_between reads timestamps; total_items is not (int64)",
        ),
        (
            _CARTS_SUITE + "derived:\n  n: {hours_before_run: customer_id}\n",
            "derived 'n': hours_before_run reads a timestamp; customer_id is not (string)",
        ),
        (
            _CARTS_SUITE + "derived:\n  n: {sum_of: products.product_id}\n",
            "derived 'n': sum_of reads a list of structs with a number field; "
            "products.product_id is not (string)",
        ),
        (
            _CARTS_SUITE + "derived:\n  n: {sum_of: customer_id.x}\n",
            "derived 'n': sum_of reads a list of structs with a number field; customer_id.x is not",
        ),
        (
            _CARTS_SUITE
            + "derived:\n  n: {size_of: products}\n  m: {abs_diff: [n, customer_id]}\n",
            "derived 'm': abs_diff reads numbers; customer_id is not (string)",
        ),
    ],
)
def test_a_bad_suite_is_one_line_naming_file_and_key(tmp_path, text, message):
    path = tmp_path / "carts.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_suite(path, TABLES["carts"].arrow_schema)
    assert str(err.value) == f"{path}: {message}"


def test_expectation_list_is_great_expectations():
    # engine/definitions/gx_expectations.txt is what lint knows of GX without importing it:
    # the expectation classes quality builds from, with the fields each one's model takes.
    installed = {name: set(cls.__fields__) for name, cls in expectation_classes().items()}
    listed = {name: set(args) for name, args in expectation_arguments().items()}
    assert listed == installed


def test_run_quality_needs_once():
    run = subprocess.run(
        [sys.executable, "runner.py", "run", "server_logs", "--quality"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert (
        run.stderr
        == "error: --quality: only with --once (a continuous run has no end to check at)\n"
    )


def test_nan_and_infinity_fail_the_suite_naming_the_column(tmp_path):
    nan, inf = float("nan"), float("inf")
    # NULL is not a finiteness failure (events.price is NULL for some event types).
    write(
        tmp_path, "events", [event("a", price=nan), event("b", price=inf), event("c"), event("d")]
    )
    write(tmp_path, "events", [dict(event("e"), price=None)], batch=1)
    write(tmp_path, "purchases", [dict(CLEAN["purchases"][0], unit_price=-inf, amount=-inf)])
    bad_cart = cart("b")
    bad_cart["products"] = [{"product_id": "p", "price": 0.1}, {"product_id": "q", "price": nan}]
    write(tmp_path, "carts", [cart("a"), bad_cart])
    report = validate_lake(tmp_path, tmp_path / "report", ["events", "purchases", "carts"])
    failed = {
        r.table: {o.expectation: o.unexpected_count for o in r.expectations if not o.success}
        for r in report.results
    }
    assert failed == {
        "events": {"expect_column_values_to_be_in_set(price_is_finite)": 2},
        "purchases": {
            "expect_column_values_to_be_between(unit_price)": 1,
            "expect_column_values_to_be_between(amount)": 1,
            "expect_column_values_to_be_in_set(unit_price_is_finite)": 1,
            "expect_column_values_to_be_in_set(amount_is_finite)": 1,
        },
        # total_price_error is NaN there, which pandas (so GX) skips as missing: only the
        # finiteness check sees the bad price.
        "carts": {"expect_column_values_to_be_in_set(products_is_finite)": 1},
    }
    # The summary stays JSON (no bare NaN) whatever the observed values are.
    text = (tmp_path / "report" / "summary.json").read_text()
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text.replace(
        '"Infinity"', ""
    ).replace('"-Infinity"', "")
    assert json.loads(text)["passed"] is False


def test_text_that_is_not_utf8_does_not_stop_the_report(tmp_path):
    # As another writer (or an older pipeline) could leave it: bytes in a STRING column.
    lake = clean_lake(tmp_path / "lake")
    raw = pa.array([b'{"CustomerId": "caf\xe9"', b"\xff\xfe"], pa.binary()).view(pa.string())
    rows = pa.Table.from_pylist(CLEAN["quarantine"] * 2, schema=TABLES["quarantine"].arrow_schema)
    rows = rows.set_column(rows.schema.get_field_index("raw"), "raw", raw)
    write_deltalake(str(lake / "quarantine"), rows, mode="append")
    events = pa.Table.from_pylist([event("x")], schema=TABLES["events"].arrow_schema)
    bad_id = pa.array([b"\xe9_CId"], pa.binary()).view(pa.string())
    write_deltalake(
        str(lake / "events"), events.set_column(0, "customer_id", bad_id), mode="append"
    )
    run = cli("--lake", str(lake))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = {ln.split(":")[0]: ln for ln in run.stdout.splitlines()[: len(CLEAN)]}
    assert sorted(lines) == sorted(CLEAN)
    assert (
        lines["quarantine"].startswith("quarantine: passed (") and " 3 rows)" in lines["quarantine"]
    )
    assert lines["events"].startswith("events: passed (") and " 3 rows)" in lines["events"]


def marks(page: str) -> list[tuple[str, str]]:
    """The report page's pass/fail strip marks, in order: (class, tooltip)."""
    return re.findall(r'<span class="mark (pass|fail)" title="([^"]*)">', page)


def test_report_page_draws_the_last_validations_and_the_rows_over_time(tmp_path):
    outcomes = [True, False, True, True, True, True, False, True, True, False, True, True]
    checks = [
        Check(
            T + timedelta(hours=i), ok, rows=10 * i, whole=i % 2 == 0, failed=() if ok else ("x",)
        )
        for i, ok in enumerate(outcomes)
    ]
    written = [(T, 10), (T + timedelta(hours=3), 25), (T + timedelta(hours=11), 40)]
    history = TableHistory(checks, written, [(c.at, c.rows) for c in checks if c.whole])
    result = {"passed": True, "version": 3, "scope": "whole table", "rows": 5, "expectations": []}
    tables = {"events": result, "carts": result}
    summary = {"validated_at": "x", "lake": "l", "passed": True, "skipped": {}, "tables": tables}
    page = write_report_html(summary, tmp_path, tmp_path, {"events": history}, last=10)
    text = page.read_text(encoding="utf-8")
    # The newest 10, oldest first, each with its time, and what failed when it failed.
    events, carts = text.split('href="#t-carts"')
    assert [m[0] for m in marks(events)] == ["pass" if ok else "fail" for ok in outcomes[2:]]
    assert marks(events)[0][1] == "2019-06-20 02:46 UTC: passed (20 rows)"
    assert marks(events)[7][1] == "2019-06-20 09:46 UTC: FAILED: x (90 rows)"
    assert ">✗</span>" in events and "2 failed of 10" in events
    # One vertex per batch, one dot per whole-table validation; a table with no past says so.
    (points,) = re.findall(r'<polyline points="([^"]*)"', events)
    assert len(points.split()) == 3
    assert events.count("<circle ") == 6
    assert marks(carts) == [] and "none logged" in carts and "no rows logged" in carts
    assert "https://" not in text and "<script" not in text


def test_report_page_shows_pass_and_fail_over_validations(tmp_path):
    log = EventLog(tmp_path)
    batches = [CLEAN["events"], [event("c", price=-1.0)], [event("d")]]
    for batch, rows in enumerate(batches):
        now = T + timedelta(days=batch)
        write(tmp_path, "events", rows, batch=batch)
        written = Event(
            kind="batch",
            run_id="r",
            batch_id=batch,
            event_time=now - timedelta(hours=1),
            details={"rows_written": {"events": len(rows)}},
        )
        log.append([written], batch=("test.q.c", batch))
        validate_lake(tmp_path, tmp_path / "report", ["events"], since_last=True, now=now)
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    # The page includes the validation that wrote it (the newest mark); the failed row is
    # checked again with the next batch's, as the failed validation kept the version.
    failed = "FAILED: expect_column_values_to_be_between(price) 1 unexpected (e.g. -1.0)"
    assert marks(page) == [
        ("pass", "2019-06-20 00:46 UTC: passed (2 rows)"),
        ("fail", f"2019-06-21 00:46 UTC: {failed} (1 row)"),
        ("fail", f"2019-06-22 00:46 UTC: {failed} (2 rows)"),
    ]
    assert "2 failed of 3" in page
    (points,) = re.findall(r'<polyline points="([^"]*)"', page)
    assert len(points.split()) == 3 and "written 4" in page
    # Only the first validation checked the whole table, so only it counts the table's rows.
    assert page.count("<circle ") == 1 and "in table 2" in page
