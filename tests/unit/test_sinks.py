"""Delta sinks with delta-rs, without Spark: schema, append, merge, idempotent batches."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from engine.definitions.tables import load_tables
from engine.lake import read_arrow
from engine.project import PROJECT
from engine.sinks import BatchId
from engine.sinks.delta import DeltaSink
from engine.sinks.spark_delta import key_bounds, merge_sql

TABLES = load_tables(PROJECT.tables)
T = datetime(2019, 6, 20, 0, 46, 1, tzinfo=UTC)


def batch(n: int, app: str = "server_logs.main.q1") -> BatchId:
    return BatchId(app_id=app, batch=n, pipeline="server_logs", query="main")


def carts(*rows: tuple[str, int]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "customer_id": c,
                "total_items": n,
                "total_price": float(n),
                "products": [{"product_id": "p", "price": 1.0}] * n,
                "updated_at": T,
            }
            for c, n in rows
        ]
    )


def purchases(n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "customer_id": f"{i}_CId",
                "event_time": T,
                "product_id": "p",
                "unit_price": 2.0,
                "quantity": 1,
                "amount": 2.0,
            }
            for i in range(n)
        ]
    )


def rows(sink: DeltaSink) -> list[dict]:
    return read_arrow(DeltaTable(str(sink.path))).to_pylist()


def test_table_definitions():
    assert {"events", "sessions", "carts", "purchases", "quarantine"} < set(TABLES)
    assert TABLES["activity_spans"].key == ("user", "span_no")
    assert TABLES["sensor_samples"].partition_by == ("part_date",)
    assert TABLES["sessions"].key == ("customer_id", "session_start")
    assert TABLES["events"].partition_by == ("event_date",)
    assert TABLES["carts"].arrow_schema.field("products").type == pa.list_(
        pa.struct([("product_id", pa.string()), ("price", pa.float64())])
    )
    assert not TABLES["carts"].arrow_schema.field("customer_id").nullable


def test_append_is_idempotent_per_batch(tmp_path):
    sink = DeltaSink(TABLES["purchases"], tmp_path)
    assert sink.write(purchases(3), batch(0)) == 3
    assert sink.write(purchases(3), batch(0)) == 0  # the replay of batch 0
    assert sink.write(purchases(2), batch(1)) == 2
    assert len(rows(sink)) == 5
    # Another checkpoint (a new app id) starts again at batch 0.
    assert sink.write(purchases(1), batch(0, app="server_logs.main.q2")) == 1
    assert len(rows(sink)) == 6


def test_merge_updates_by_key_and_skips_replays(tmp_path):
    sink = DeltaSink(TABLES["carts"], tmp_path)
    sink.write(carts(("a", 1), ("b", 2)), batch(0))
    sink.write(carts(("a", 3)), batch(1))
    sink.write(carts(("a", 9)), batch(1))
    assert sorted((r["customer_id"], r["total_items"]) for r in rows(sink)) == [("a", 3), ("b", 2)]


def test_history_names_pipeline_query_and_batch(tmp_path):
    sink = DeltaSink(TABLES["purchases"], tmp_path)
    sink.write(purchases(1), batch(7))
    latest = DeltaTable(str(sink.path)).history(1)[0]
    assert (latest["pipeline"], latest["query"], latest["batch_id"]) == ("server_logs", "main", "7")


def test_null_in_a_not_null_column_fails_the_batch(tmp_path):
    sink = DeltaSink(TABLES["purchases"], tmp_path)
    bad = purchases(1).set_column(0, "customer_id", pa.array([None], pa.string()))
    with pytest.raises(ValueError, match="NULL in NOT NULL column customer_id"):
        sink.write(bad, batch(0))
    assert rows(sink) == []


def test_partitioned_append(tmp_path):
    sink = DeltaSink(TABLES["events"], tmp_path)
    data = pa.Table.from_pylist(
        [
            {
                "customer_id": "a",
                "event_time": T,
                "event_type": "product_view",
                "product_id": "p",
                "price": 1.0,
                "quantity": 1,
                "source": "s",
                "logged_out": False,
                "event_date": T.date(),
            }
        ]
    )
    sink.write(data, batch(0))
    assert (sink.path / "event_date=2019-06-20").is_dir()
    assert DeltaTable(str(sink.path)).metadata().partition_columns == ["event_date"]


def test_the_ddl_comments_stay_through_creation_and_rebuild(tmp_path):
    # `DESCRIBE` reads them from the Delta schema; a table delta-rs created had none, and an
    # overwrite (--full-refresh) would have written the schema again without them.
    sink = DeltaSink(TABLES["carts"], tmp_path)
    sink.write(carts(("a", 1)), batch(0))

    def comments() -> dict[str, str]:
        fields = DeltaTable(str(sink.path)).schema().fields
        return {f.name: f.metadata.get("comment") for f in fields}

    expected = {c.name: c.comment for c in TABLES["carts"].columns}
    assert comments() == expected and expected["customer_id"] == "Customer id"
    sink.rebuild("server_logs", shared=False)
    assert comments() == expected and rows(sink) == []


MERGES = [
    # A batch's key range limits the files MERGE reads; an `add` table sums its counts.
    (
        "sessions",
        [("c1", "c9"), ("2019-06-20 00:00:00", "2019-06-21 00:00:00")],
        "MERGE INTO delta.`/lake/sessions` AS t USING b AS s ON (`t`.`customer_id` = "
        "`s`.`customer_id` AND `t`.`customer_id` BETWEEN CAST('c1' AS STRING) AND "
        "CAST('c9' AS STRING)) AND (`t`.`session_start` = `s`.`session_start` AND "
        "`t`.`session_start` BETWEEN CAST('2019-06-20 00:00:00' AS TIMESTAMP) AND "
        "CAST('2019-06-21 00:00:00' AS TIMESTAMP)) WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *",
    ),
    (
        "user_event_counts",
        [(None, None)],  # NULL keys only: no range to skip files by
        "MERGE INTO delta.`/lake/user_event_counts` AS t USING b AS s ON `t`.`user` = `s`.`user` "
        "WHEN MATCHED THEN UPDATE SET `t`.`events` = COALESCE(t.events + s.events, t.events, "
        "s.events) WHEN NOT MATCHED THEN INSERT *",
    ),
]


@pytest.mark.parametrize(("table", "bounds", "expected"), MERGES)
def test_spark_merge_statement(table, bounds, expected):
    sql = merge_sql(TABLES[table], Path(f"/lake/{table}"), "b", bounds)
    assert sql == expected


PARIS = timezone(timedelta(hours=2))
KEY_BOUNDS = [
    # Text Spark casts back to the same value: strings in byte order, a time with its offset
    # (the same instant in any session time zone), a whole number, a date.
    (pa.array(["c9", "c10", None, "c2"]), ("c10", "c9")),
    (pa.array(["é", "z"]), ("z", "é")),
    (
        pa.array([T, T + timedelta(microseconds=1)], pa.timestamp("us", tz="UTC")),
        ("2019-06-20 00:46:01+00:00", "2019-06-20 00:46:01.000001+00:00"),
    ),
    (
        pa.array([datetime(2019, 6, 20, 2, 46, 1, tzinfo=PARIS)], pa.timestamp("us", tz="+02:00")),
        ("2019-06-20 02:46:01+02:00", "2019-06-20 02:46:01+02:00"),
    ),
    (pa.array([datetime(2019, 6, 20, 2, 46, 1)], pa.timestamp("us")), ("2019-06-20 02:46:01",) * 2),
    (pa.array([-3, 12], pa.int32()), ("-3", "12")),
    (pa.array([date(2019, 6, 20)]), ("2019-06-20", "2019-06-20")),
    # No range: only NULLs, or a type whose text may not give the value back.
    (pa.array([None, None], pa.string()), (None, None)),
    (pa.array([0.1, 0.2]), (None, None)),
]


@pytest.mark.parametrize(("values", "expected"), KEY_BOUNDS)
def test_a_merge_key_range_as_exact_text(values: pa.Array, expected: tuple):
    assert key_bounds(TABLES["carts"], pa.table({"customer_id": values})) == [expected]


def quarantine_rows(*pipelines: str) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"pipeline": p, "source": "f", "raw": "x", "reason": "malformed JSON", "ingested_at": T}
            for p in pipelines
        ],
        schema=TABLES["quarantine"].arrow_schema,
    )


@pytest.mark.parametrize(("shared", "left"), [(False, []), (True, ["order_status"])])
def test_a_rebuild_names_its_pipeline_in_history(tmp_path, shared: bool, left: list[str]):
    # `history` showed a --full-refresh's emptying commit with no pipeline.
    from engine.lake.history import table_history

    sink = DeltaSink(TABLES["quarantine"], tmp_path)
    sink.write(quarantine_rows("server_logs", "order_status"), batch(0))
    sink.rebuild("server_logs", shared=shared)
    assert [r["pipeline"] for r in rows(sink)] == left
    newest = table_history(tmp_path, "quarantine").to_pylist()[0]
    operation = "DELETE (full refresh)" if shared else "WRITE (full refresh)"
    assert (newest["operation"], newest["pipeline"], newest["query"]) == (
        operation,
        "server_logs",
        None,
    )
