"""server_logs end to end on local Spark and real Delta tables, one batch per input file."""

from __future__ import annotations

import io
import os
import time
from datetime import datetime
from pathlib import Path

import pytest

from engine.definitions.pipeline import Registry
from engine.errors import UserError
from engine.plan import plan_pipeline
from engine.runtime.run import RunOptions, RunResult, run_pipeline
from tests.conftest import PROJECT, read_table, staged

SCENARIO = PROJECT / "tests" / "data" / "server_logs_scenario"

# tests/data/server_logs_scenario, one batch per file:
# part-1: the seed's scenario (1028_CId), a session split by a gap inside the batch (2_CId),
# a lone event that later times out (3_CId) and a purchase of a carted product (4_CId).
# part-2 moves the watermark to 1:29, which times out 2_CId, 3_CId and 4_CId. It also holds a
# duplicate, a copy of a part-1 line that is now behind the watermark (late), and a bad line.
# part-3: a line behind the watermark.


def t(hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return datetime(2019, 6, 20, h, m, s)


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory) -> tuple[Path, RunResult, Path]:
    root = tmp_path_factory.mktemp("scenario")
    staged(SCENARIO, root / "in")
    pipeline = Registry().get("server_logs").with_settings({"source.maxFilesPerTrigger": "1"})
    opts = RunOptions(lake=root / "lake", once=True, input_path=str(root / "in"), quiet=True)
    return root / "lake", run_pipeline(spark, plan_pipeline(pipeline, once=True), opts), root / "in"


def sessions(lake: Path) -> list[tuple]:
    return sorted(
        (
            r["customer_id"],
            r["session_start"].replace(tzinfo=None),
            r["total_events"],
            r["logged_in"],
            r["end_reason"],
            r["session_end"] and r["session_end"].replace(tzinfo=None),
        )
        for r in read_table(lake, "sessions")
    )


def test_seed_scenario_one_session_logged_out(scenario):
    lake, _, _ = scenario
    assert [s for s in sessions(lake) if s[0] == "1028_CId"] == [
        ("1028_CId", t("0:46:01"), 3, False, "logout", t("0:50:02"))
    ]
    (cart,) = [c for c in read_table(lake, "carts") if c["customer_id"] == "1028_CId"]
    assert cart["total_items"] == 3
    assert cart["total_price"] == 8.0
    assert [p["product_id"] for p in cart["products"]] == ["116_PId", "117_PId", "119_PId"]


def test_gap_splits_sessions_inside_one_batch_and_timeouts_close_them(scenario):
    lake, _, _ = scenario
    assert [s for s in sessions(lake) if s[0] in ("2_CId", "3_CId", "5_CId")] == [
        ("2_CId", t("1:00:00"), 2, False, "timeout", t("1:05:30")),
        ("2_CId", t("1:10:00"), 1, False, "timeout", t("1:15:00")),
        ("3_CId", t("1:01:00"), 1, False, "timeout", t("1:06:00")),
        ("5_CId", t("1:30:00"), 1, True, None, None),
    ]


def test_purchase_removes_cart_line_and_fills_purchases(scenario):
    lake, _, _ = scenario
    (cart,) = [c for c in read_table(lake, "carts") if c["customer_id"] == "4_CId"]
    assert cart["products"] == [{"product_id": "201_PId", "price": 20.0}]
    assert (cart["total_items"], cart["total_price"]) == (1, 20.0)
    (purchase,) = read_table(lake, "purchases")
    assert purchase["customer_id"] == "4_CId"
    assert (purchase["product_id"], purchase["unit_price"], purchase["quantity"]) == (
        "200_PId",
        10.0,
        2,
    )
    assert purchase["amount"] == 20.0
    assert ("4_CId", t("1:02:00"), 3, False, "timeout", t("1:08:00")) in sessions(lake)


def test_events_table_one_row_per_item(scenario):
    lake, _, _ = scenario
    events = read_table(lake, "events")
    assert len(events) == 11
    purchase = [e for e in events if e["event_type"] == "purchase"]
    assert [(e["product_id"], e["price"], e["quantity"]) for e in purchase] == [
        ("200_PId", 10.0, 2)
    ]
    logged_out = [e for e in events if e["logged_out"]]
    assert [(e["customer_id"], e["source"]) for e in logged_out] == [("1028_CId", "LoggedOut")]
    assert {str(e["event_date"]) for e in events} == {"2019-06-20"}


def test_every_input_line_is_accounted_for(scenario):
    lake, result, folder = scenario
    (bad,) = read_table(lake, "quarantine")
    assert bad["reason"] == "malformed JSON"
    assert bad["source"].endswith("part-2.json")
    assert bad["raw"].startswith('{"timestamp":"20:06:2019 1:31:0"')
    totals = result.listener.totals["main"]
    assert (totals.accepted, totals.duplicates, totals.late) == (11, 1, 2)
    lines = sum(len(f.read_text().splitlines()) for f in folder.iterdir())
    assert totals.source_rows == lines
    assert lines == totals.accepted + totals.duplicates + totals.late + 1


def test_rerun_over_the_same_input_adds_nothing(spark, scenario):
    lake, _, folder = scenario
    before = {name: read_table(lake, name) for name in ("events", "sessions", "carts")}
    plan = plan_pipeline(Registry().get("server_logs"), once=True)
    options = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True)
    result = run_pipeline(spark, plan, options)
    assert {name: read_table(lake, name) for name in before} == before
    report = io.StringIO()
    result.report(report)
    assert "query main: 0 batches; rows written: none\n" in report.getvalue()


def test_spark_written_tables_name_their_batches_in_history(scenario):
    from engine.lake.history import table_history

    lake, _, _ = scenario
    commits = table_history(lake, "sessions").to_pylist()
    merges = [c for c in commits if c["operation"] == "MERGE"]
    assert merges and {(c["pipeline"], c["query"]) for c in merges} == {("server_logs", "main")}
    assert sorted(c["batch_id"] for c in merges) == list(range(len(merges)))
    assert all(c["rows_written"] for c in merges)


def test_embedded_delta_rs_writer_gives_the_same_tables(spark, scenario, tmp_path):
    lake, _, folder = scenario
    pipeline = Registry().get("server_logs").with_settings({"source.maxFilesPerTrigger": "1"})
    opts = RunOptions(
        lake=tmp_path / "lake", once=True, input_path=str(folder), quiet=True, writer="delta-rs"
    )
    run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)
    for name in ("events", "sessions", "carts", "purchases", "quarantine"):
        drop = ("ingested_at",)
        assert read_table(tmp_path / "lake", name, drop=drop) == read_table(lake, name, drop=drop)


def test_glob_characters_in_the_input_are_names_not_patterns(spark, tmp_path):
    """Hadoop reads `[1]` in a path as a pattern: the folder g[1] is read, not its sibling g1,
    and a file named like a pattern is refused rather than read with the files it matches.
    Folders below the input (by date, as logs are often kept) are read too, but not those
    whose names start with `_` or `.`."""
    line = (
        '{{"timestamp":"20:06:2019 0:46:1","CustomerId":"{}",'
        '"EventType":{{"ProductView":{{"ProductId":"1_PId","Price":1.0}}}},"Source":"s"}}\n'
    )
    (tmp_path / "g[1]").mkdir()
    (tmp_path / "g1").mkdir()
    (tmp_path / "g[1]" / "part-1.json").write_text(line.format("in_g[1]"))
    for below, customer in (("2019/06/20", "by_date"), ("_done", "skipped"), (".x", "hidden")):
        (tmp_path / "g[1]" / below).mkdir(parents=True)
        (tmp_path / "g[1]" / below / "part-2.json").write_text(line.format(customer))
    (tmp_path / "g1" / "part-1.json").write_text(line.format("in_g1"))
    plan = plan_pipeline(Registry().get("server_logs"), once=True)
    lake = tmp_path / "lake"
    opts = RunOptions(lake=lake, once=True, input_path=str(tmp_path / "g[1]"), quiet=True)
    run_pipeline(spark, plan, opts)
    read = sorted(r["customer_id"] for r in read_table(lake, "events"))
    assert read == ["by_date", "in_g[1]"]

    (tmp_path / "g1" / "2019").mkdir()
    (tmp_path / "g1" / "2019" / "report?.json").write_text(line.format("other"))
    opts = RunOptions(lake=tmp_path / "lake2", once=True, input_path=str(tmp_path / "g1"))
    with pytest.raises(UserError, match=r"input file .*/g1/2019/report\?\.json has one of \?"):
        run_pipeline(spark, plan, opts)
    # Spark's cleanSource moves a read file below sourceArchiveDir: not below the input.
    folder = tmp_path / "g[1]"
    archive = {"source.cleanSource": "archive", "source.sourceArchiveDir": str(folder / "done")}
    archived = plan_pipeline(Registry().get("server_logs").with_settings(archive), once=True)
    opts = RunOptions(lake=tmp_path / "lake3", once=True, input_path=str(folder), quiet=True)
    with pytest.raises(UserError, match=r"^source.sourceArchiveDir: .*/g\[1\]/done is inside"):
        run_pipeline(spark, archived, opts)
    # Spark's own refusal (a `requirement failed` naming no option) comes at the query's start.
    archive["source.sourceArchiveDir"] = str(folder / "_done" / "archive")
    archived = plan_pipeline(Registry().get("server_logs").with_settings(archive), once=True)
    with pytest.raises(UserError, match=r"^source.sourceArchiveDir: .*/_done/archive is inside"):
        run_pipeline(spark, archived, opts)


def test_a_file_copied_in_with_an_old_time_is_read(spark, tmp_path):
    """Spark's file source skips a file 7 days older than the newest it has seen; logs copied
    with their times kept (`cp -p`, `rsync -a`) are that old, and were lost with exit 0."""
    folder, lake = tmp_path / "in", tmp_path / "lake"
    folder.mkdir()
    (folder / "today.json").write_text(log_line("0:46:01", "today", "ProductView", "p", 1.0))
    plan = plan_pipeline(Registry().get("server_logs"), once=True)
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True)
    run_pipeline(spark, plan, opts)
    old = folder / "old.json"
    old.write_text(log_line("0:47:01", "copied", "ProductView", "p", 1.0))
    month_ago = time.time() - 30 * 86400
    os.utime(old, (month_ago, month_ago))
    run_pipeline(spark, plan, opts)
    assert sorted(r["customer_id"] for r in read_table(lake, "events")) == ["copied", "today"]


def log_line(
    hms: str, customer: str, kind: str, product: str, price: float, source: str = "s"
) -> str:
    """A server_logs input line with one item."""
    item = f'{{"ProductId":"{product}","Price":{price}}}'
    return (
        f'{{"timestamp":"20:06:2019 {hms}","CustomerId":"{customer}",'
        f'"EventType":{{"{kind}":{item}}},"Source":"{source}"}}\n'
    )


def write_batches(folder: Path, files: dict[str, list[tuple]]) -> None:
    """Write `files` of log lines into `folder`, with times that make them batches in order."""
    folder.mkdir()
    for number, (name, lines) in enumerate(files.items(), start=1):
        (folder / name).write_text("".join(log_line(*line) for line in lines))
        # Spark reads files in modification-time order: one per batch, in this order.
        os.utime(folder / name, (1_700_000_000 + number, 1_700_000_000 + number))


# One batch per file. C1's cart last changes at 0:50:02 and C2's at 0:50:00; part-2 moves the
# watermark (1 minute delay) to 1:01:00, past both deadlines (10 minutes on). In part-3 C1 adds
# an item: Spark times out only C2, which has no rows, so C1's own event must empty the cart.
CART_TTL_FILES = {
    "part-1.json": [
        ("0:46:01", "C1", "AddToCart", "p1", 1.0),
        ("0:46:02", "C1", "AddToCart", "p2", 2.0),
        ("0:48:00", "C1", "AddToCart", "p3", 3.0),
        ("0:50:02", "C1", "AddToCart", "p4", 5.0),
        ("0:50:00", "C2", "AddToCart", "p5", 7.0),
    ],
    "part-2.json": [("1:02:00", "C3", "ProductView", "p9", 1.0)],
    "part-3.json": [("1:10:30", "C1", "AddToCart", "p6", 3.0)],
}
CART_TTL_CARTS = [
    ("C1", 1, 3.0, [{"product_id": "p6", "price": 3.0}], t("1:10:30")),
    ("C2", 0, 0.0, [], t("1:00:00")),
]


def test_cart_ttl_empties_a_cart_whose_customer_has_events_in_the_batch(spark, tmp_path):
    folder = tmp_path / "in"
    write_batches(folder, CART_TTL_FILES)
    settings = {"source.maxFilesPerTrigger": "1", "cart_ttl": "10 minutes"}
    pipeline = Registry().get("server_logs").with_settings(settings)
    lake = tmp_path / "lake"
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True)
    run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)
    carts = [
        (
            r["customer_id"],
            r["total_items"],
            r["total_price"],
            r["products"],
            r["updated_at"].replace(tzinfo=None),
        )
        for r in read_table(lake, "carts")
    ]
    assert carts == CART_TTL_CARTS


# One batch per file. L1's only lines are two LoggedOut lines in one second; L2's only line
# logs out, and a line of that second comes in part-2, still within the watermark (0:45:01).
# Each used to open a second session with the first one's key (customer, start): the MERGE
# kept one of the two, and a session was lost without a word.
SAME_SECOND_FILES = {
    "part-1.json": [
        ("0:46:01", "L1", "ProductView", "p1", 1.0, "LoggedOut"),
        ("0:46:01", "L1", "AddToCart", "p2", 2.0, "LoggedOut"),
        ("0:46:01", "L2", "ProductView", "p3", 3.0, "LoggedOut"),
    ],
    "part-2.json": [
        ("0:46:01", "L2", "ProductView", "p4", 4.0),
        ("0:46:30", "L2", "ProductView", "p5", 5.0),
    ],
}


def test_a_line_in_the_second_of_a_logout_counts_in_that_session(spark, tmp_path):
    folder = tmp_path / "in"
    write_batches(folder, SAME_SECOND_FILES)
    pipeline = Registry().get("server_logs").with_settings({"source.maxFilesPerTrigger": "1"})
    lake = tmp_path / "lake"
    opts = RunOptions(lake=lake, once=True, input_path=str(folder), quiet=True)
    result = run_pipeline(spark, plan_pipeline(pipeline, once=True), opts)
    assert result.listener.totals["main"].accepted == 5
    assert sessions(lake) == [
        ("L1", t("0:46:01"), 2, False, "logout", t("0:46:01")),
        ("L2", t("0:46:01"), 2, False, "logout", t("0:46:01")),
        ("L2", t("0:46:30"), 1, True, None, None),
    ]
