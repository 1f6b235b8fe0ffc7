"""Expectations declared in SQL comment lines: what each line reads as, and what is refused,
with its line; and where the planner puts the rows they drop. No Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.definitions.expectations import Expectation, ExpectationError, parse_expectations
from engine.definitions.pipeline import Registry
from engine.definitions.sql import SparkStreaming, pinned_condition
from engine.errors import UserError
from engine.plan import check_pipeline, plan_pipeline
from tests.conftest import copy_project, edit


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("-- CONSTRAINT ok EXPECT (x > 0)", ("ok", "x > 0", "warn")),
        ("-- CONSTRAINT ok EXPECT (x > 0) ON VIOLATION DROP ROW", ("ok", "x > 0", "drop")),
        ("-- CONSTRAINT ok EXPECT (x > 0) ON VIOLATION FAIL UPDATE", ("ok", "x > 0", "fail")),
        # Keywords in any case and spacing; the name is lower-cased like a view's.
        ("--constraint Ok expect(x > 0)  on violation  drop row ", ("ok", "x > 0", "drop")),
        # Parentheses inside the condition, and a lambda.
        (
            "-- CONSTRAINT p EXPECT ((a + 1) * 2 > b AND forall(xs, i -> i > 0))",
            ("p", "(a + 1) * 2 > b AND forall(xs, i -> i > 0)", "warn"),
        ),
        (
            "-- CONSTRAINT t EXPECT (t BETWEEN TIMESTAMP '2000-01-01' AND current_timestamp())",
            ("t", "t BETWEEN TIMESTAMP '2000-01-01' AND current_timestamp()", "warn"),
        ),
        # Other comments are comments.
        ("-- constraints are checked below", None),
        ("-- a CONSTRAINT in a sentence", None),
    ],
)
def test_rule_lines(line, expected):
    rules = parse_expectations(f"-- A view.\n{line}\nSELECT 1", SparkStreaming)
    if expected is None:
        assert rules == ()
    else:
        assert rules == (Expectation(*expected, line=2),)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-- CONSTRAINT ok x > 0", "expected `-- CONSTRAINT name EXPECT (condition)"),
        ("-- CONSTRAINT ok EXPECT (x > 0) ON VIOLATION SKIP", "expected `-- CONSTRAINT"),
        ("-- CONSTRAINT 9lives EXPECT (x > 0)", "expected `-- CONSTRAINT"),
        ("-- CONSTRAINT ok EXPECT ()", "expectation ok: the condition is empty"),
        ("-- CONSTRAINT ok EXPECT (x >)", "expectation ok:"),
        ("-- CONSTRAINT rows EXPECT (x > 0)", "expectation rows: the name is taken"),
        ("-- CONSTRAINT dropped EXPECT (x > 0)", "expectation dropped: the name is taken"),
        # A misspelt CONSTRAINT on a line shaped like a rule: it was a comment, the rule lost.
        ("-- CONSTRAINTS ok EXPECT (x > 0) ON VIOLATION DROP ROW", "expected `-- CONSTRAINT"),
        ("-- CONSTRIANT ok EXPECT(x > 0)", "expected `-- CONSTRAINT"),
        ("-- CONSTRAINS ok expect (x > 0)", "expected `-- CONSTRAINT"),
    ],
)
def test_bad_rule_lines(line, message):
    with pytest.raises(ExpectationError, match=None) as caught:
        parse_expectations(f"SELECT 1\n\n{line}", SparkStreaming)
    assert str(caught.value).startswith(message)
    assert caught.value.line == 3


@pytest.mark.parametrize(
    ("condition", "pinned"),
    [
        ("t <= current_timestamp()", "t <= TIMESTAMP_MILLIS(1700000000123)"),
        ("t <= now() + INTERVAL 1 DAY", "t <= TIMESTAMP_MILLIS(1700000000123) + INTERVAL '1' DAY"),
        ("d = current_date", "d = TO_DATE(TIMESTAMP_MILLIS(1700000000123))"),
        ("x > 0", "x > 0"),
    ],
)
def test_the_current_time_is_pinned_to_the_batch(condition, pinned):
    # On a batch, SQL sees the batch's timestamp, as the streaming part does.
    assert pinned_condition(condition, 1_700_000_000_123) == pinned
    assert pinned_condition(condition, None) == condition


def test_a_rule_declared_twice():
    text = "-- CONSTRAINT a EXPECT (x > 0)\n-- CONSTRAINT A EXPECT (x < 9)"
    with pytest.raises(ExpectationError, match="expectation a is declared twice") as caught:
        parse_expectations(text, SparkStreaming)
    assert caught.value.line == 2


def test_server_logs_rules_and_where_their_drops_go():
    plan = plan_pipeline(Registry().get("server_logs"))
    rules = plan.steps["checked_lines"].expectations
    assert [(r.name, r.action) for r in rules] == [
        ("event_time_in_range", "drop"),
        ("finite_prices", "drop"),
        ("finite_amounts", "drop"),
    ]
    (query,) = plan.queries.values()
    assert (query.quarantine, query.drops, query.drops_after_dedup) == (
        "quarantine",
        ("checked_lines",),
        (),
    )


def _refused(project: Path, pipeline: str) -> str:
    spec = Registry(project / "pipelines").get(pipeline)
    plan, findings = check_pipeline(spec)
    assert plan is None
    return str(min(f for f in findings if f.severity == "error").error())


def test_rules_on_a_stateful_view_are_refused(tmp_path):
    project = copy_project(tmp_path)
    path = project / "sql" / "server_logs" / "log_lines.sql"
    edit(path, "CREATE OR", "-- CONSTRAINT x EXPECT (customer_id != '')\nCREATE OR")
    message = _refused(project, "server_logs")
    assert message == (
        f"{path}:3: expectation x: rules go on a view without DISTINCT or GROUP BY; declare "
        "them on a view that log_lines reads, or one that reads it"
    )


def test_a_drop_needs_a_quarantine_table(tmp_path):
    project = copy_project(tmp_path)
    edit(project / "pipelines" / "server_logs.yaml", "  quarantine: quarantine\n", "")
    message = _refused(project, "server_logs")
    assert message.endswith(
        "checked_lines.sql:9: expectation event_time_in_range drops rows to quarantine, but "
        "pipeline server_logs writes no table with 'lake.role' = 'quarantine'"
    )


def test_a_drop_below_a_stateful_step_feeding_handlers_is_refused(tmp_path):
    # events sits between the deduplication and the handlers: its dropped rows would need a
    # second copy of the deduplication's state.
    project = copy_project(tmp_path)
    path = project / "sql" / "server_logs" / "events.sql"
    edit(path, "CREATE OR", "-- CONSTRAINT x EXPECT (price > 0) ON VIOLATION DROP ROW\nCREATE OR")
    with pytest.raises(UserError) as caught:
        plan_pipeline(Registry(project / "pipelines").get("server_logs"))
    assert str(caught.value) == (
        f"{path}: the rows view events drops (ON VIOLATION DROP ROW) cannot reach quarantine in "
        "query main: what it reads is not among the query's streaming rows (cart_updates, "
        "events, parsed_logs, session_updates); declare the rule on a view above the stateful "
        "step, or on one that reads the handlers' rows"
    )


def test_a_drop_below_the_handlers_is_computed_on_the_batch(tmp_path):
    project = copy_project(tmp_path)
    path = project / "sql" / "server_logs" / "purchases.sql"
    edit(
        path, "CREATE OR", "-- CONSTRAINT x EXPECT (amount < 1000) ON VIOLATION DROP ROW\nCREATE OR"
    )
    (query,) = plan_pipeline(Registry(project / "pipelines").get("server_logs")).queries.values()
    assert query.batch_steps == (
        "checked_lines__dropped",
        "purchases",
        "purchases__dropped",
        "quarantine",
    )
    assert query.drops == ("checked_lines", "purchases")
    # Its rows were events the deduplication accepted: the run's accounting leaves them out.
    assert query.drops_after_dedup == ("purchases",)
