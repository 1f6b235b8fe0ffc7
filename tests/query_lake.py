"""A small lake for the `query` and `history` tests: real Delta tables written by the sinks."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from engine.definitions.tables import load_table
from engine.project import PROJECT
from engine.sinks import BatchId
from engine.sinks.delta import DeltaSink


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


EVENTS = pa.table(
    {
        "customer_id": ["c1", "c1", "c2", "c2", "c3", "c1"],
        "event_time": [
            ts("2024-06-01 10:01:30"),
            ts("2024-06-01 10:04:59"),
            ts("2024-06-01 10:05:00"),
            ts("2024-06-01 11:59:00.250"),
            ts("2024-06-02 00:00:01"),
            ts("2024-06-02 23:10:00"),
        ],
        "event_type": ["product_view", "add_to_cart", "add_to_cart", "purchase", "purchase", "x"],
        "product_id": ["p1", "p1", "p2", None, "p3", "p1"],
        "price": [9.99, 9.99, 0.5, None, 120.0, 1.25],
        "quantity": pa.array([1, 1, 3, None, 2, 1], pa.int32()),
        "source": ["www", "www", "app", "app", None, "LoggedOut"],
        "logged_out": [False, False, False, False, False, True],
        "event_date": [
            dt.date(2024, 6, 1),
            dt.date(2024, 6, 1),
            dt.date(2024, 6, 1),
            dt.date(2024, 6, 1),
            dt.date(2024, 6, 2),
            dt.date(2024, 6, 2),
        ],
    }
)

CARTS_V1 = [
    {
        "customer_id": "c1",
        "total_items": 2,
        "total_price": 10.49,
        "products": [{"product_id": "p1", "price": 9.99}, {"product_id": "p2", "price": 0.5}],
        "updated_at": ts("2024-06-01 10:04:59"),
    },
    {
        "customer_id": "c2",
        "total_items": 0,
        "total_price": 0.0,
        "products": [],
        "updated_at": ts("2024-06-01 11:59:00"),
    },
]
CARTS_V2 = [
    {
        "customer_id": "c2",
        "total_items": 1,
        "total_price": 3.0,
        "products": [{"product_id": "p9", "price": 3.0}],
        "updated_at": ts("2024-06-02 08:00:00"),
    },
    {
        "customer_id": "c3",
        "total_items": 1,
        "total_price": 120.0,
        "products": [{"product_id": "p3", "price": 120.0}],
        "updated_at": ts("2024-06-02 09:00:00"),
    },
]

# A table with NULL arrays and structs, written with write_deltalake.
TAGS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "tags": pa.array([["a", "b"], [], None, ["b"]], pa.list_(pa.string())),
        "info": pa.array(
            [{"k": "x", "n": 1}, None, {"k": None, "n": 3}, {"k": "y", "n": None}],
            pa.struct([("k", pa.string()), ("n", pa.int32())]),
        ),
        "day": pa.array(
            [dt.date(2024, 1, 31), None, dt.date(2024, 2, 29), dt.date(2023, 12, 31)], pa.date32()
        ),
    }
)


# Stored values a tool must print without crashing: text that is not UTF-8 (bytes viewed as
# a string column, as another writer could leave them), NaN and infinities, also nested.
NAN, INF = float("nan"), float("inf")
_TEXT = pa.array([b"ok", b"caf\xe9", None, b"\xff\xfeA", "Zürich".encode()], pa.binary())
ODD = pa.table(
    {
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "text": _TEXT.view(pa.string()),
        "price": pa.array([1.5, NAN, INF, -INF, None], pa.float64()),
        "item": pa.StructArray.from_arrays(
            [_TEXT.view(pa.string()), pa.array([0.5, INF, None, NAN, 2.0])], names=["k", "x"]
        ),
        "prices": pa.array([[1.0, NAN], [], None, [-INF], [2.5]], pa.list_(pa.float64())),
    }
)


def build_lake(lake: Path) -> Path:
    """events (append, 2 batches), carts (merge, 2 batches), tags and odd (plain
    write_deltalake)."""
    events = DeltaSink(load_table(PROJECT.tables / "events.sql"), lake)
    events.write(EVENTS.slice(0, 4), BatchId("app-events", 0, "server_logs", "main"))
    events.write(EVENTS.slice(4), BatchId("app-events", 1, "server_logs", "main"))
    carts = DeltaSink(load_table(PROJECT.tables / "carts.sql"), lake)
    schema = carts.table.arrow_schema
    carts.write(
        pa.Table.from_pylist(CARTS_V1, schema), BatchId("app-carts", 0, "server_logs", "carts")
    )
    carts.write(
        pa.Table.from_pylist(CARTS_V2, schema), BatchId("app-carts", 1, "server_logs", "carts")
    )
    write_deltalake(str(lake / "tags"), TAGS)
    write_deltalake(str(lake / "odd"), ODD)
    return lake
