"""A handler of a project of one's own runs in Spark: its module is loaded from the
project's file, which Spark's Python workers cannot import, so it is sent to them by value."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.plan import plan_pipeline
from engine.project import Project
from engine.runtime.run import RunOptions, run_pipeline
from engine.scaffold import init_pipeline
from tests.conftest import edit, read_table
from tests.unit.test_project_handlers import own_project


def test_a_projects_own_handler_runs_and_resumes(spark, tmp_path: Path):
    root = own_project(tmp_path / "shop")
    lake = tmp_path / "lake"

    def run() -> None:
        pipeline = Registry(root / "pipelines").get("shop")
        options = RunOptions(lake=lake, once=True, quiet=True)
        run_pipeline(spark, plan_pipeline(pipeline, once=True), options, out=io.StringIO())

    run()
    totals = {
        r["currency"]: (r["amount"], r["records"]) for r in read_table(lake, "currency_totals")
    }
    # The kept records of init's sample: a1 EUR 12.5, a3 EUR 0.0, a2 USD 3.0, a8 USD 5.5, a4 GBP.
    assert totals == {"EUR": (12.5, 2), "USD": (8.5, 2), "GBP": (7.25, 1)}
    assert sorted(r["id"] for r in read_table(lake, "shop")) == ["a1", "a2", "a3", "a4", "a8"]
    assert len(read_table(lake, "quarantine")) == 5

    # The next run starts from the state the first one kept.
    (root / "data" / "shop" / "more.jsonl").write_text(
        '{"id": "c1", "amount": 10.0, "currency": "EUR", "event_time": "2026-01-08 10:00:00"}\n'
    )
    run()
    totals = {
        r["currency"]: (r["amount"], r["records"]) for r in read_table(lake, "currency_totals")
    }
    assert totals == {"EUR": (22.5, 3), "USD": (8.5, 2), "GBP": (7.25, 1)}


def test_an_error_a_handler_raises_names_the_handlers_line_not_a_view(spark, tmp_path: Path):
    root = own_project(tmp_path / "shop")
    module = root / "handlers" / "running_total.py"
    edit(
        module,
        "        amounts = events[self._amounts]\n",
        "        amounts = events[self._amounts]\n"
        "        if max(amounts) > 10:\n"
        '            raise ValueError(f"amount too big: {max(amounts)}")\n',
    )
    # A view with a rule over the handler's rows: computed on the batch, after the handler.
    (root / "sql" / "shop" / "checked_totals.sql").write_text(
        "-- Totals held to a rule.\n"
        "-- CONSTRAINT some_records EXPECT (records > 0) ON VIOLATION DROP ROW\n"
        "CREATE OR REPLACE TEMP VIEW checked_totals AS\n"
        "SELECT currency, amount, records FROM totals\n"
    )
    spec = root / "pipelines" / "shop.yaml"
    edit(spec, "  currency_totals: totals\n", "  currency_totals: checked_totals\n")
    pipeline = Registry(root / "pipelines").get("shop")
    options = RunOptions(lake=tmp_path / "lake", once=True, quiet=True)
    # Spark runs the handler at the batch's first action, a later view's: that view's SQL
    # file was named as the fault, and the run exited 2 as if the SQL were wrong.
    with pytest.raises(RuntimeError) as raised:
        run_pipeline(spark, plan_pipeline(pipeline, once=True), options, out=io.StringIO())
    assert str(raised.value) == (
        f"query main: ValueError: amount too big: 12.5 ({module}:30 in update)"
    )


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_a_merged_table_given_two_rows_of_one_key_in_a_batch_is_named(spark, tmp_path, writer):
    # MERGE inserted both rows into an empty table, then failed every later run in Delta's
    # words, exit 1 (found by a user of init).
    root = tmp_path / "shop"
    init_pipeline("shop", Project(root))
    table = root / "tables" / "latest.sql"
    table.write_text(
        "-- The latest record per currency.\nCREATE TABLE latest (\n"
        "  currency STRING COMMENT 'Currency',\n  id STRING COMMENT 'Record'\n) USING DELTA\n"
        "TBLPROPERTIES ('lake.mode' = 'merge', 'lake.key' = 'currency')\n"
    )
    (root / "sql" / "shop" / "latest.sql").write_text(
        "-- One row per kept record: not one per currency.\n"
        "CREATE OR REPLACE TEMP VIEW latest AS SELECT currency, id FROM kept\n"
    )
    edit(
        root / "pipelines" / "shop.yaml",
        "  quarantine: quarantine\n",
        "  quarantine: quarantine\n  latest: latest\n",
    )
    lake = tmp_path / "lake"
    pipeline = Registry(root / "pipelines").get("shop")
    options = RunOptions(lake=lake, once=True, quiet=True, writer=writer)
    with pytest.raises(UserError) as caught:
        run_pipeline(spark, plan_pipeline(pipeline, once=True), options, out=io.StringIO())
    # init's sample keeps a1 and a3 in EUR, a2 and a8 in USD: one of the two is named.
    assert re.fullmatch(
        rf"query main: {re.escape(str(table))}: table latest is merged by its key \(currency\), "
        r"and a batch has 2 rows with currency = '(EUR|USD)': its view must give one row per "
        r"key in a batch \(group it by the key\), or make the table lake.mode 'append'",
        str(caught.value),
    ), caught.value
    assert not read_table(lake, "latest")
