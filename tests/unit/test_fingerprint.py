"""What a checkpoint was built from, and the changes it cannot resume from (no Spark)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from engine.definitions.handler import STATE_BUCKETS
from engine.definitions.pipeline import Registry
from engine.plan import fingerprint as fingerprint_module
from engine.plan import plan_pipeline
from engine.plan.fingerprint import (
    conf_changes,
    logic_changes,
    query_fingerprint,
    state_changes,
)
from handlers.carts import CartHandler
from handlers.sessions import SessionHandler
from tests.conftest import copy_project, edit


def fingerprint(
    pipelines: Path, name: str, query: str = "main", settings: dict[str, str] | None = None
) -> dict:
    plan = plan_pipeline(Registry(pipelines).get(name).with_settings(settings or {}))
    return query_fingerprint(
        plan.queries[query],
        steps=plan.steps,
        handlers={n: h for n, (_, h) in plan.handlers.items()},
        tables=plan.tables,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_project(tmp_path)


def test_server_logs_state_is_listed(project: Path):
    state = {
        (s["step"], s["what"]): s["value"]
        for s in fingerprint(project / "pipelines", "server_logs")["state"]
    }
    assert state[("log_lines", "watermark column")] == ["event_time"]
    assert state[("log_lines", "deduplication key")] == [
        "customer_id", "event_time", "event_type", "items", "source", "logged_out"
    ]  # fmt: skip
    assert state[("session_updates", "handler key")] == ["customer_id"]
    assert state[("cart_updates", "handler key")] == ["customer_id"]


# (pipeline, file, old text, new text, what the change says; None: nothing Spark cannot resume)
CHANGES = [
    (
        "server_logs",
        "sql/server_logs/log_lines.sql",
        "SELECT DISTINCT customer_id, event_time, event_type, items, source, logged_out",
        "SELECT DISTINCT customer_id, event_time, event_type, items, logged_out",
        "log_lines.sql: deduplication key of log_lines changed (customer_id, event_time, "
        "event_type, items, source, logged_out -> customer_id, event_time, event_type, items, "
        "logged_out)",
    ),
    (
        "server_logs",
        "sql/server_logs/log_lines.sql",
        "WATERMARK event_time DELAY OF INTERVAL 1 MINUTE",
        "WATERMARK event_time DELAY OF INTERVAL 5 MINUTES",
        None,  # Spark takes a new delay from the next batch on
    ),
    (
        "order_status",
        "sql/order_status/order_counts.sql",
        "GROUP BY window(arrival_time, '5 seconds'), status",
        "GROUP BY window(arrival_time, '10 seconds'), status",
        "order_counts.sql: grouping of order_counts changed (WINDOW(arrival_time, '5 seconds'), "
        "status -> WINDOW(arrival_time, '10 seconds'), status)",
    ),
    (
        "order_status",
        "sql/order_status/order_counts.sql",
        "count(*) AS orders",
        "count(*) AS orders, max(status) AS last_status",
        "order_counts.sql: aggregates of order_counts changed (COUNT(*) -> COUNT(*), MAX(status))",
    ),
    (
        "server_logs",
        "tables/sessions.sql",
        "'lake.key' = 'customer_id, session_start'",
        "'lake.key' = 'customer_id'",
        "sessions.sql: lake.key changed (customer_id, session_start -> customer_id)",
    ),
    # The handler keeps each window's readings by its start: longer windows are other groups.
    (
        "sensor_cep",
        "sql/sensor_cep/windowed_readings.sql",
        "window(event_time, '60 seconds', '30 seconds')",
        "window(event_time, '120 seconds', '30 seconds')",
        "windowed_readings.sql: input windows of window_samples changed (WINDOW(event_time, "
        "'60 seconds', '30 seconds') -> WINDOW(event_time, '120 seconds', '30 seconds'))",
    ),
    (
        "sensor_cep",
        "sql/sensor_cep/windowed_readings.sql",
        "  is_anomalous\n",
        "  is_anomalous,\n  sensor_freq * 2 AS doubled\n",
        None,  # a column more for the handler's input: not its windows
    ),
    (
        "server_logs",
        "sql/server_logs/events.sql",
        "  to_date(event_time) AS event_date",
        "  to_date(event_time) AS event_date,\n  upper(event_type) AS event_kind",
        None,  # stateless
    ),
]


@pytest.mark.parametrize(("name", "file", "old", "new", "message"), CHANGES)
def test_changes_the_state_cannot_follow_are_named(
    project: Path, name: str, file: str, old: str, new: str, message: str | None
):
    query = "main" if name != "order_status" else "orders"
    before = fingerprint(project / "pipelines", name, query)
    edit(project / file, old, new)
    found = state_changes(before, fingerprint(project / "pipelines", name, query))
    if message is None:
        assert found == []
    else:
        assert found == [f"{project / file.rsplit('/', 1)[0]}/{message}"]


def test_a_handler_key_change_is_named(project: Path, monkeypatch: pytest.MonkeyPatch):
    before = fingerprint(project / "pipelines", "server_logs")
    monkeypatch.setattr(SessionHandler, "key", ("customer_id", "source"))
    (found,) = state_changes(before, fingerprint(project / "pipelines", "server_logs"))
    assert found.endswith(
        "handlers/sessions.py: handler key of session_updates changed "
        "(customer_id -> customer_id, source)"
    )


def test_a_checkpoint_with_state_per_key_is_named(project: Path):
    """A fingerprint from before state by bucket of keys has no layout: the change is named."""
    now = fingerprint(project / "pipelines", "server_logs")
    before = {**now, "state": [s for s in now["state"] if s["what"] != "handler state layout"]}
    found = state_changes(before, now)
    assert sorted(f.rsplit(": ", 1)[1] for f in found) == [
        f"handler state layout of cart_updates added (keys in {STATE_BUCKETS} buckets)",
        f"handler state layout of session_updates added (keys in {STATE_BUCKETS} buckets)",
    ]


def test_a_checkpoint_from_before_input_windows_were_kept_resumes(project: Path):
    """Its fingerprint has no input windows: they are not named as added."""
    now = fingerprint(project / "pipelines", "sensor_cep")
    assert ("window_samples", "input windows") in {(s["step"], s["what"]) for s in now["state"]}
    before = {**now, "state": [s for s in now["state"] if s["what"] != "input windows"]}
    assert state_changes(before, now) == []


def test_a_new_stateful_step_is_named(project: Path):
    before = fingerprint(project / "pipelines", "server_logs")
    edit(project / "sql/server_logs/events.sql", "SELECT\n", "SELECT DISTINCT\n")
    (found,) = state_changes(before, fingerprint(project / "pipelines", "server_logs"))
    assert found == (
        f"{project}/sql/server_logs/events.sql: state of events added (deduplication key "
        "customer_id, event_time, event_type, item_index, product_id, price, quantity, source, "
        "logged_out, event_date)"
    )


def test_a_view_made_stateful_is_one_change(project: Path):
    """An aggregation added to a query is one change, not one per piece of its state."""
    now = fingerprint(project / "pipelines", "order_status", "orders")
    before = {**now, "state": [s for s in now["state"] if s["step"] != "order_counts"]}
    counts = project / "sql/order_status/order_counts.sql"
    state = (
        "(watermark column arrival_time; grouping WINDOW(arrival_time, '5 seconds'), status; "
        "aggregates COUNT(*))"
    )
    assert state_changes(before, now) == [f"{counts}: state of order_counts added {state}"]
    assert state_changes(now, before) == [f"{counts}: state of order_counts is gone {state}"]


def offsets_file(checkpoint: Path, batch: int, conf: dict[str, str]) -> None:
    """An entry of Spark's offset log, as Spark writes it."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": conf}
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{json.dumps(meta)}\n{{"logOffset":0}}')


def test_pinned_settings_come_from_the_newest_offset_log_entry(tmp_path: Path):
    offsets_file(tmp_path, 0, {"spark.sql.shuffle.partitions": "4"})
    offsets_file(tmp_path, 1, {"spark.sql.shuffle.partitions": "2", "other": "x"})
    assert conf_changes(tmp_path, {"spark.sql.shuffle.partitions": "2"}) == []
    (found,) = conf_changes(tmp_path, {"spark.sql.shuffle.partitions": "3"})
    assert found == (
        f"--conf spark.sql.shuffle.partitions=3: checkpoint {tmp_path} was built with 2, "
        "which Spark keeps for its state"
    )
    assert conf_changes(tmp_path / "new", {"spark.sql.shuffle.partitions": "3"}) == []


_ALL = ("events", "quarantine", "purchases", "sessions", "carts")


# (file, old text, new text, what is said to have changed, the tables whose rows stay as the
# old logic made them): changes a checkpoint resumes over, which the run then names.
LOGIC = [
    (
        "sql/server_logs/purchases.sql",
        "WHERE event_type = 'purchase'",
        "WHERE event_type = 'purchase' AND price > 0",
        ["sql/server_logs/purchases.sql changed"],
        ("purchases",),
    ),
    # Layout and comments are not logic.
    (
        "sql/server_logs/purchases.sql",
        "WHERE event_type = 'purchase'",
        "-- only purchases\nwhere   event_type = 'purchase'",
        [],
        (),
    ),
    (
        "sql/server_logs/events.sql",
        "  to_date(event_time) AS event_date",
        "  to_date(event_time) AS event_date,\n  upper(event_type) AS event_kind",
        ["sql/server_logs/events.sql changed"],
        ("events", "purchases", "sessions", "carts"),
    ),
    # A rule is logic too: the rows it drops go to quarantine instead of every table below.
    (
        "sql/server_logs/checked_lines.sql",
        "CONSTRAINT finite_prices",
        "CONSTRAINT finite_price",
        ["sql/server_logs/checked_lines.sql changed"],
        _ALL,
    ),
]


@pytest.mark.parametrize(("file", "old", "new", "said", "tables"), LOGIC)
def test_logic_changes_name_the_file_and_the_tables_below_it(
    project: Path, file: str, old: str, new: str, said: list[str], tables: tuple[str, ...]
):
    before = fingerprint(project / "pipelines", "server_logs")
    edit(project / file, old, new)
    found, below = logic_changes(before, fingerprint(project / "pipelines", "server_logs"))
    assert found == [f"{project}/{s}" for s in said]
    assert tuple(below) == tables


def test_a_setting_a_handler_reads_is_logic(project: Path):
    before = fingerprint(project / "pipelines", "server_logs")
    after = fingerprint(project / "pipelines", "server_logs", settings={"cart_ttl": "1 hour"})
    assert logic_changes(before, after) == (
        ["setting cart_ttl changed (none -> 1 hour)"],
        ["carts"],
    )


def test_a_handler_module_is_logic(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    before = fingerprint(project / "pipelines", "server_logs")
    edited = tmp_path / "carts.py"
    source = Path(inspect.getsourcefile(CartHandler)).read_text()
    # A comment is not logic; code is.
    edited.write_text(source + "# a note\n")
    module_file = fingerprint_module._handler_file
    monkeypatch.setattr(
        fingerprint_module,
        "_handler_file",
        lambda h: str(edited) if isinstance(h, CartHandler) else module_file(h),
    )
    assert logic_changes(before, fingerprint(project / "pipelines", "server_logs")) == ([], [])
    edited.write_text(source + "MAX_PRODUCTS = 100\n")
    after = fingerprint(project / "pipelines", "server_logs")
    assert logic_changes(before, after) == ([f"{edited} changed"], ["carts"])


def test_a_fingerprint_from_before_the_logic_was_kept_names_nothing(project: Path):
    now = fingerprint(project / "pipelines", "server_logs")
    before = {"state": now["state"], "tables": {t: {**w} for t, w in now["tables"].items()}}
    for written in before["tables"].values():
        del written["reads"]
    edit(project / "sql/server_logs/purchases.sql", "= 'purchase'", "= 'purchase' AND price > 0")
    assert logic_changes(before, fingerprint(project / "pipelines", "server_logs")) == ([], [])
    assert state_changes(before, now) == []
