"""Chained pipelines: server_logs writes `purchases`, customer_spend streams it (a delta
source) into `customer_spend`; exact rows, and a restart reads only the new purchases."""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from devtools.generators.server_logs import generate_server_logs
from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, RunResult, run_pipeline
from tests.conftest import read_table
from tests.pipeline.test_cli import runner


def run(spark, name: str, lake: Path, input_path: Path | None = None, **options: Any) -> RunResult:
    pipeline = Registry().get(name)
    opts = RunOptions(
        lake=lake,
        once=True,
        quiet=True,
        input_path=str(input_path) if input_path else None,
        **options,
    )
    return run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)


def expected_spend(lake: Path) -> list[dict[str, Any]]:
    """customer_spend computed in Python from the whole purchases table."""
    by_customer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in read_table(lake, "purchases"):
        by_customer[row["customer_id"]].append(row)
    rows = [
        {
            "customer_id": customer,
            "purchased_items": len(items),
            "units": sum(r["quantity"] for r in items),
            "total_spent": round(sum(r["amount"] for r in items), 2),
            "first_purchase": min(r["event_time"] for r in items),
            "last_purchase": max(r["event_time"] for r in items),
        }
        for customer, items in by_customer.items()
    ]
    return sorted(rows, key=lambda r: [str(r[k]) for k in sorted(r)])


def stage(files: list[Path], folder: Path, first_number: int) -> None:
    """Copy part files in with increasing modification times (Spark reads them in that order)."""
    folder.mkdir(exist_ok=True)
    for number, source in enumerate(files, start=first_number):
        target = folder / source.name
        shutil.copy(source, target)
        os.utime(target, (1_700_000_000 + number, 1_700_000_000 + number))


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("generated") / "logs"
    generate_server_logs(folder, events=3_000, seed=7, lines_per_file=1_000)
    files = sorted(folder.glob("part-*.json"))
    assert len(files) == 3
    return files


def test_chained_pipelines_give_exact_rows_also_after_a_restart(spark, parts, tmp_path):
    lake, logs = tmp_path / "lake", tmp_path / "logs"
    stage(parts[:2], logs, 1)
    run(spark, "server_logs", lake, logs)
    first = run(spark, "customer_spend", lake)
    purchases_before = len(read_table(lake, "purchases"))
    assert purchases_before > 20  # the generated sample buys enough to be a real check
    assert first.listener.totals["spend"].source_rows == purchases_before
    assert read_table(lake, "customer_spend") == expected_spend(lake)

    # New input upstream: the second runs pick up only what is new, from their checkpoints.
    stage(parts[2:], logs, 3)
    run(spark, "server_logs", lake, logs)
    second = run(spark, "customer_spend", lake)
    new_purchases = len(read_table(lake, "purchases")) - purchases_before
    assert new_purchases > 0
    assert second.listener.totals["spend"].source_rows == new_purchases
    assert read_table(lake, "customer_spend") == expected_spend(lake)

    # Nothing new: the run ends on the query's termination, not on a wait for a batch that a
    # trigger without data never reports.
    idle = run(spark, "customer_spend", lake)
    assert idle.listener.totals["spend"].batches == 0
    assert idle.listener.wait_for_end(idle.listener.runs["spend"], timeout_s=0)
    assert read_table(lake, "customer_spend") == expected_spend(lake)

    # Rows removed upstream (as a --full-refresh or DELETE does): Delta's stream cannot follow,
    # so the run stops in one line saying what to do, and --full-refresh does it.
    planned = runner(
        *("run", "server_logs", "--dry-run", "--full-refresh", "purchases"),
        *("--lake", str(lake), "--input", str(logs)),
    )
    assert planned.stdout.splitlines()[-1] == (
        "table purchases: rebuilt, and pipeline customer_spend streams it: run customer_spend "
        "with --full-refresh too (its stream cannot follow rows rewritten)"
    )
    DeltaTable(str(lake / "purchases")).delete("quantity > 1")
    version = DeltaTable(str(lake / "purchases")).version()
    refusal = (
        f"delta source: the table {lake / 'purchases'} had rows deleted or rewritten in its "
        f"version {version} (its pipeline's --full-refresh, a DELETE or a MERGE), which a "
        "stream of its appends cannot follow: run again with --full-refresh to read it from "
        "its start, or set source.skipChangeCommits=true to skip such versions"
    )
    # Said before Spark starts, from the table's log and the checkpoint's last offset (the
    # dry run said it would resume, and the run stopped at Delta's stream).
    dry = runner("run", "customer_spend", "--dry-run", "--lake", str(lake))
    assert dry.returncode == 2
    # (then the shuffle partitions: the tests' session runs with fewer than the command's)
    assert dry.stdout.splitlines()[-1].startswith(f"query spend: refused: {refusal}")
    with pytest.raises(UserError) as refused:
        run(spark, "customer_spend", lake)
    assert str(refused.value) == refusal
    run(spark, "customer_spend", lake, full_refresh=())
    assert read_table(lake, "customer_spend") == expected_spend(lake)


def test_missing_source_table_is_a_user_error(spark, tmp_path):
    with pytest.raises(UserError, match=r"source.table: no Delta table 'purchases' at .*"):
        run(spark, "customer_spend", tmp_path / "empty_lake")
    assert not (tmp_path / "empty_lake" / "customer_spend").exists()
