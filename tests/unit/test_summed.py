"""Aggregations summed per batch into `add` tables: what the plan accepts and refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.definitions.pipeline import Registry
from engine.definitions.tables import load_table
from engine.errors import UserError
from engine.plan import check_pipeline, plan_pipeline
from engine.plan.queries import StateCall, StreamOutput
from tests.conftest import copy_project, edit

COUNTS_SQL = "sql/user_activity/user_event_counts.sql"
COUNTS_DDL = "tables/user_event_counts.sql"


def test_user_activity_reads_its_records_once():
    (main,) = plan_pipeline(Registry().get("user_activity")).queries.values()
    assert main.outputs == (
        StreamOutput(handlers=StateCall("activity_events", ("activity_span_updates",))),
        StreamOutput(view="quarantine"),
    )
    # The counts are taken on each batch from the handler's passthrough rows: no state.
    assert main.batch_steps == ("user_event_counts",)
    assert "user_event_counts" not in main.streaming_steps


def test_a_merged_aggregation_still_needs_a_query_of_its_own(tmp_path: Path):
    project = copy_project(tmp_path)
    edit(project / COUNTS_DDL, "'lake.mode' = 'add'", "'lake.mode' = 'merge'")
    with pytest.raises(UserError, match="stateful step 'activity_events'"):
        plan_pipeline(Registry(project / "pipelines").get("user_activity"))


# (file, old text, new text, the finding's message)
REFUSED = [
    (
        COUNTS_SQL,
        "count(*) AS events",
        "max(event_time) AS events",
        "may only count() and sum(), which add up; not max()",
    ),
    # Found 2026-11-29: each batch's figures were added up into impossible totals.
    (
        COUNTS_SQL,
        "count(*) AS events",
        "count(DISTINCT activity) AS events",
        "may only count() and sum(), which add up; not count(DISTINCT)",
    ),
    (
        COUNTS_SQL,
        "count(*) AS events",
        "sum(CASE WHEN activity = 'bike' THEN 1 ELSE 0 END) * 100D / count(*) AS events",
        "column events must be one count() or sum(), which add up; compute ratios and the like "
        "where the table is read",
    ),
    (
        COUNTS_SQL,
        "GROUP BY user",
        "GROUP BY user\nHAVING count(*) > 1",
        "cannot filter with HAVING: a batch sees part of each group",
    ),
    (
        COUNTS_SQL,
        "SELECT user, count(*) AS events",
        "SELECT user, activity, count(*) AS events",
        "must group by the table's key (user), not (user, activity)",
    ),
    (
        COUNTS_SQL,
        "GROUP BY user",
        "",
        "must be a GROUP BY of count() and sum() by the table's key",
    ),
    (
        "sql/user_activity/quarantine.sql",
        "FROM activity_records\n",
        "FROM activity_records, user_event_counts\n",
        "holds one batch's sums, which quarantine cannot read",
    ),
]


@pytest.mark.parametrize(("file", "old", "new", "message"), REFUSED)
def test_what_cannot_be_summed_is_a_finding(tmp_path: Path, file, old, new, message):
    project = copy_project(tmp_path)
    edit(project / file, old, new)
    if new == "":
        edit(project / COUNTS_SQL, "SELECT user, count(*) AS events", "SELECT user, 1 AS events")
    _, findings = check_pipeline(Registry(project / "pipelines").get("user_activity"))
    messages = [f.message for f in findings if f.code == "table"]
    assert any(message in m for m in messages), messages


def test_a_filtered_count_is_summed(tmp_path: Path):
    project = copy_project(tmp_path)
    edit(
        project / COUNTS_SQL,
        "count(*) AS events",
        "count(*) FILTER (WHERE activity = 'bike') AS events",
    )
    _, findings = check_pipeline(Registry(project / "pipelines").get("user_activity"))
    assert [f.message for f in findings if f.code == "table"] == []


def test_an_add_table_sums_numbers_only(tmp_path: Path):
    ddl = tmp_path / "totals.sql"
    ddl.write_text(
        "CREATE TABLE totals (k STRING NOT NULL, n BIGINT, label STRING) USING DELTA\n"
        "TBLPROPERTIES ('lake.mode' = 'add', 'lake.key' = 'k')\n"
    )
    with pytest.raises(UserError, match="sums every column but the key; column 'label' is STRING"):
        load_table(ddl)
    ddl.write_text(ddl.read_text().replace(", label STRING", ", total DOUBLE"))
    assert load_table(ddl).summed == ["n", "total"]
    ddl.write_text(ddl.read_text().replace("'add'", "'upsert'"))
    with pytest.raises(UserError, match="'append', 'merge' or 'add', not 'upsert'"):
        load_table(ddl)
