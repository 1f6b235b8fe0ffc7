"""The fused handler adapter without Spark's JVM: pyspark's own GroupState and pandas-to-Arrow
conversion are plain Python, so timers, state layout and output rows are checked here."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.conversion import PandasToArrowConversion
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from engine.definitions.handler import StateHandler, Step
from engine.runtime.handler_adapter import (
    EMIT,
    STATE_TYPE,
    HandlerGroup,
    group_timeout_mode,
    micros,
    stable_order,
)
from handlers.carts import CartHandler
from handlers.sessions import SessionHandler

T0_US = 1_560_991_561_000_000  # 2019-06-20 00:46:01 UTC
MIN_US = 60_000_000

EVENTS = StructType(
    [
        StructField("customer_id", StringType()),
        StructField("event_time", TimestampType()),
        StructField("event_type", StringType()),
        StructField("item_index", IntegerType()),
        StructField("product_id", StringType()),
        StructField("price", DoubleType()),
        StructField("logged_out", BooleanType()),
        StructField("event_date", DateType()),
    ]
)


def struct(*fields: tuple[str, Any]) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields])


PRODUCT = struct(("product_id", StringType()), ("price", DoubleType()))
OUTPUTS = {
    SessionHandler: struct(
        ("customer_id", StringType()),
        ("session_start", TimestampType()),
        ("last_event_time", TimestampType()),
        ("total_events", LongType()),
        ("logged_in", BooleanType()),
        ("end_reason", StringType()),
        ("session_end", TimestampType()),
    ),
    CartHandler: struct(
        ("customer_id", StringType()),
        ("total_items", LongType()),
        ("total_price", DoubleType()),
        ("products", ArrayType(PRODUCT)),
        ("updated_at", TimestampType()),
    ),
}


def schema_of(table: dict[type, StructType], handler: StateHandler) -> StructType:
    return next(schema for kind, schema in table.items() if isinstance(handler, kind))


def group(handlers: dict[str, StateHandler], **kwargs: Any) -> HandlerGroup:
    return HandlerGroup(
        handlers,
        input_schema=EVENTS,
        output_schemas={n: schema_of(OUTPUTS, h) for n, h in handlers.items()},
        **kwargs,
    )


def events(*rows: tuple, customer: str | None = "c1") -> pd.DataFrame:
    """Rows (seconds after T0, event_type, item_index, product, price, logged_out) of one
    customer as Spark hands them to pandas: naive datetime64[ns] times, object strings."""
    frame = pd.DataFrame(
        rows, columns=["seconds", "event_type", "item_index", "product_id", "price", "logged_out"]
    )
    frame.insert(0, "customer_id", customer)
    frame.insert(
        1, "event_time", pd.to_datetime(T0_US + frame.pop("seconds") * 1_000_000, unit="us")
    )
    frame["event_time"] = frame["event_time"].astype("datetime64[ns]")
    frame["item_index"] = frame["item_index"].astype("int32")
    frame["event_date"] = [dt.date(2019, 6, 20)] * len(frame)
    return frame


class Run:
    """Calls a group the way Spark does for one bucket: a fresh GroupState per call, holding
    the stored row."""

    def __init__(self, group: HandlerGroup) -> None:
        self.group = group
        self.value: tuple | None = None
        self.timeout = GroupState.NO_TIMESTAMP

    def __call__(
        self,
        frame: pd.DataFrame | list[pd.DataFrame] | None = None,
        *,
        watermark_ms: int = 0,
        now_ms: int = 0,
        timed_out: bool = False,
    ) -> pd.DataFrame:
        conf = {
            "none": GroupStateTimeout.NoTimeout,
            "event_time": GroupStateTimeout.EventTimeTimeout,
            "processing_time": GroupStateTimeout.ProcessingTimeTimeout,
        }[self.group.mode]
        state = GroupState(
            optionalValue=self.value,
            batchProcessingTimeMs=now_ms,
            eventTimeWatermarkMs=watermark_ms,
            timeoutConf=conf,
            hasTimedOut=timed_out,
            watermarkPresent=True,
            defined=self.value is not None,
            updated=False,
            removed=False,
            timeoutTimestamp=GroupState.NO_TIMESTAMP,  # Spark resets it on every call
            keyAsUnsafe=b"",
            valueSchema=self.group.state_type,
        )
        chunks = [] if frame is None else frame if isinstance(frame, list) else [frame]
        frames: Iterator[pd.DataFrame] = iter(chunks)
        out = list(self.group((7,), frames, state))
        self.value = tuple(state._value) if state.exists else None
        self.timeout = state._timeout_timestamp
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame()

    def held(self, key: str = "c1") -> list[tuple[bool, int | None]]:
        """Per handler of the key: whether it keeps state, and its timer."""
        stored, _ = self.group.stored(self.value)
        rows = stored.get((key,), [(None, None)] * len(self.group.slots))
        return [(row is not None, timer) for row, timer in rows]


def rows_of(out: pd.DataFrame, name: str, schema: StructType) -> list[tuple]:
    if out.empty:
        return []
    picked = out[out[EMIT] == name]
    return list(picked[[f"{name}__{c}" for c in schema.names]].itertuples(index=False, name=None))


# --- conversions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "series",
    [
        pd.Series(pd.to_datetime([T0_US, T0_US + 1], unit="us")).astype("datetime64[ns]"),
        pd.Series(pd.to_datetime([T0_US, T0_US + 1], unit="us")).astype("datetime64[us]"),
        pd.Series(pd.to_datetime([T0_US, T0_US + 1], unit="us", utc=True)),
        pd.Series(pd.to_datetime([T0_US, T0_US + 1], unit="us", utc=True)).dt.tz_convert(
            "America/New_York"
        ),
        pd.Series(pd.to_datetime([T0_US, T0_US + 1], unit="us", utc=True)).astype(
            "datetime64[us, UTC]"
        ),
    ],
)
def test_micros_of_naive_and_aware_columns(series):
    assert micros(series).tolist() == [T0_US, T0_US + 1]


def test_micros_reads_naive_values_in_the_session_zone_and_keeps_nat():
    instants = pd.Series(pd.to_datetime([T0_US, None], unit="us", utc=True))
    # What Spark hands pandas in a Europe/Paris session: naive Paris wall times.
    naive = instants.dt.tz_convert("Europe/Paris").dt.tz_localize(None)
    got = micros(naive, "Europe/Paris")
    assert got[0] == T0_US
    assert got[1] == np.iinfo(np.int64).min


@pytest.mark.parametrize("seed", range(5))
def test_stable_order_matches_pandas(seed):
    rng = np.random.default_rng(seed)
    times = rng.integers(0, 4, 40).astype(np.int64)
    flags = rng.random(40) < 0.5
    prices = np.where(rng.random(40) < 0.2, np.nan, rng.integers(0, 3, 40).astype(float))
    for keys in ([times], [times, flags], [prices], [prices, times]):
        frame = pd.DataFrame(dict(enumerate(keys)))
        expected = frame.sort_values(list(range(len(keys))), kind="stable").index.tolist()
        order = stable_order(keys)
        assert (list(range(40)) if order is None else order.tolist()) == expected


def test_stable_order_says_none_when_already_sorted_and_sorts_strings():
    assert stable_order([np.array([1, 2, 2, 3])]) is None
    assert stable_order([np.array([1, 2, 3]), np.array([True, False, True])]) is None
    assert stable_order([np.array(["b", "a", "b"], dtype=object)]).tolist() == [1, 0, 2]


# --- grouping rules ----------------------------------------------------------------------------


def test_timeout_modes_must_agree():
    ttl_cart = CartHandler({"cart_ttl": "1 hour"})
    assert group_timeout_mode({"s": SessionHandler(), "c": CartHandler()}) == "event_time"
    assert group_timeout_mode({"c": CartHandler()}) == "none"
    assert group_timeout_mode({"s": SessionHandler(), "c": ttl_cart}) == "event_time"
    wall = SessionHandler({"session_timeout_mode": "processing_time"})
    with pytest.raises(ValueError, match=r"s \(processing_time\), c \(event_time\)"):
        group_timeout_mode({"s": wall, "c": ttl_cart})


class OtherKey(SessionHandler):
    key = ("user",)


def test_handlers_must_share_a_key():
    with pytest.raises(ValueError, match="share one key"):
        group({"s": SessionHandler(), "o": OtherKey()})


def test_layout_of_output_state_and_input():
    g = group({"s": SessionHandler(), "c": CartHandler()}, passthrough=["event_time", "price"])
    assert g.output_type.names[:3] == [EMIT, "event_time", "price"]
    assert g.output_type.names[3:5] == ["s__customer_id", "s__session_start"]
    assert g.output_type.names[-1] == "c__updated_at"
    assert g.state_type == STATE_TYPE
    # Key, the handlers' columns, passthrough: each once.
    assert g.input_columns == (
        "customer_id",
        "event_time",
        "logged_out",
        "item_index",
        "event_type",
        "product_id",
        "price",
    )


# --- running -----------------------------------------------------------------------------------

BATCH_1 = events(
    (0, "add_to_cart", 0, "116", 1.0, False),
    (2, "product_view", 0, "140", 9.5, False),
    (1, "add_to_cart", 0, "117", 2.0, False),
    (30, "purchase", 0, "116", 1.0, False),
    (30, "purchase", 1, "117", 2.0, False),
    (241, "add_to_cart", 0, "119", 5.0, True),
)
BATCH_2 = events((600, "product_view", 0, "150", 7.0, False))


def test_fused_rows_equal_each_handler_run_alone():
    both = Run(group({"s": SessionHandler(), "c": CartHandler()}))
    alone = {"s": Run(group({"s": SessionHandler()})), "c": Run(group({"c": CartHandler()}))}
    for batch in (BATCH_1, BATCH_2):
        fused = both(batch)
        for name, handler in (("s", SessionHandler), ("c", CartHandler)):
            schema = OUTPUTS[handler]
            assert rows_of(fused, name, schema) == rows_of(alone[name](batch), name, schema)


def test_rows_are_the_handlers_in_order_with_nulls_elsewhere():
    out = Run(group({"s": SessionHandler(), "c": CartHandler()}))(BATCH_1)
    assert out[EMIT].tolist() == ["s", "c"]
    session, cart = out.iloc[0], out.iloc[1]
    assert session["s__total_events"] == 5  # six rows, one Purchase line of two items
    assert session["s__end_reason"] == "logout"
    assert session["s__session_end"] == T0_US + 241_000_000
    assert cart["c__products"] == [("119", 5.0)]
    assert cart["c__updated_at"] == T0_US + 241_000_000
    assert session[[c for c in out.columns if c.startswith("c__")]].isna().all()
    assert cart[[c for c in out.columns if c.startswith("s__")]].isna().all()


def test_passthrough_rows_are_the_input_rows():
    passthrough = list(EVENTS.names)
    out = Run(group({"s": SessionHandler()}, passthrough=passthrough))(BATCH_1)
    passed = out[out[EMIT] == ""]
    assert len(passed) == len(BATCH_1)
    expected = BATCH_1.assign(event_time=micros(BATCH_1["event_time"]).tolist())
    assert passed[passthrough].values.tolist() == expected[passthrough].values.tolist()
    assert passed[[c for c in out.columns if c.startswith("s__")]].isna().all().all()


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_arrow_reads_the_frame_as_spark_types(zone):
    """Guards the object-block output: pyspark's own pandas-to-Arrow step, as its state
    serializer runs it (keys' frames concatenated with an empty frame), gives exact values."""
    batch = BATCH_1.copy()
    if zone != "UTC":  # Spark hands naive wall times of the session zone
        instants = batch["event_time"].dt.tz_localize("UTC")
        batch["event_time"] = instants.dt.tz_convert(zone).dt.tz_localize(None)
    g = group(
        {"s": SessionHandler(), "c": CartHandler()},
        passthrough=list(EVENTS.names),
        time_zone=zone,
    )
    out = Run(g)(batch)
    empty = pd.DataFrame(dict.fromkeys(g.output_type.names), index=[])
    merged = pd.concat([out, empty], ignore_index=True)
    arrow = PandasToArrowConversion.convert(
        merged, g.output_type, timezone=zone, arrow_cast=True, assign_cols_by_name=True
    ).to_pylist()

    def at(seconds: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(T0_US / 1e6 + seconds, dt.UTC)

    passed = [r for r in arrow if r[EMIT] == ""]
    assert [r["event_time"] for r in passed] == [at(s) for s in (0, 2, 1, 30, 30, 241)]
    assert [r["item_index"] for r in passed] == [0, 0, 0, 0, 1, 0]
    assert passed[0]["event_date"] == dt.date(2019, 6, 20)
    assert passed[0]["s__session_start"] is None
    (session,) = [r for r in arrow if r[EMIT] == "s"]
    assert session["s__session_start"] == at(0)
    assert session["s__session_end"] == at(241)
    assert session["s__total_events"] == 5
    assert session["event_time"] is None
    (cart,) = [r for r in arrow if r[EMIT] == "c"]
    assert cart["c__products"] == [{"product_id": "119", "price": 5.0}]
    assert cart["c__updated_at"] == at(241)


def test_chunks_of_one_key_are_one_batch():
    whole = Run(group({"s": SessionHandler()}))(BATCH_1)
    split = Run(group({"s": SessionHandler()}))([BATCH_1.iloc[:3], BATCH_1.iloc[3:]])
    assert split.values.tolist() == whole.values.tolist()


# --- timers --------------------------------------------------------------------------------------


def test_each_handler_keeps_its_own_timer_and_only_due_ones_expire():
    run = Run(group({"s": SessionHandler(), "c": CartHandler({"cart_ttl": "1 hour"})}))
    run(events((0, "add_to_cart", 0, "a", 1.0, False)))
    session_timer = (T0_US + 5 * MIN_US) // 1000
    cart_timer = (T0_US + 60 * MIN_US) // 1000
    assert run.held() == [(True, session_timer), (True, cart_timer)]
    assert run.timeout == session_timer  # the earliest
    # The watermark passes the session's timer only: the session closes, the cart stays.
    out = run(timed_out=True, watermark_ms=session_timer + 1)
    assert out[EMIT].tolist() == ["s"]
    assert out.iloc[0]["s__end_reason"] == "timeout"
    assert run.held() == [(False, None), (True, cart_timer)]
    assert run.timeout == cart_timer
    # Spark times a key out when its timer is behind the watermark, not at it.
    assert run(timed_out=True, watermark_ms=cart_timer).empty
    out = run(timed_out=True, watermark_ms=cart_timer + 1)
    assert out[EMIT].tolist() == ["c"]
    assert out.iloc[0]["c__total_items"] == 0
    assert run.value is None


def test_a_timer_behind_the_watermark_is_set_just_after_it():
    run = Run(group({"s": SessionHandler()}))
    watermark = (T0_US + 10 * MIN_US) // 1000
    run(events((0, "add_to_cart", 0, "a", 1.0, False)), watermark_ms=watermark)
    assert run.held() == [(True, watermark + 1)]
    assert run.timeout == watermark + 1


def test_rows_a_handler_ignores_leave_its_timer_and_it_expires_when_due():
    run = Run(group({"s": SessionHandler(), "c": CartHandler({"cart_ttl": "1 minute"})}))
    run(events((0, "add_to_cart", 0, "a", 1.0, False)))
    cart_timer = run.held()[1][1]
    # Product views only: the cart's timer is not moved...
    run(events((20, "product_view", 0, "b", 1.0, False)), watermark_ms=cart_timer - 5)
    assert run.held()[1] == (True, cart_timer)
    # ... and once due, the cart empties in a batch that has only views for it, as it would
    # without them (its own operator would not have seen the key and timed it out).
    out = run(events((200, "product_view", 0, "b", 1.0, False)), watermark_ms=cart_timer + 1)
    assert out[EMIT].tolist() == ["s", "c"]
    assert out.iloc[1]["c__total_items"] == 0
    assert run.held()[1] == (False, None)


def test_processing_time_timers():
    wall = SessionHandler({"session_timeout_mode": "processing_time", "session_timeout": "90 s"})
    run = Run(group({"s": wall, "c": CartHandler()}))
    run(events((0, "add_to_cart", 0, "a", 1.0, False)), now_ms=1_000)
    assert run.timeout == 1_000 + 90_000
    assert run.held() == [(True, 91_000), (True, None)]
    out = run(timed_out=True, now_ms=91_001)
    assert out[EMIT].tolist() == ["s"]
    assert run.held() == [(False, None), (True, None)]


# --- counts and errors ---------------------------------------------------------------------------


class Counting(StateHandler[int]):
    key = ("customer_id",)
    columns = ("price",)
    counted = ("seen", "never")
    state_type = int
    state_schema = "n BIGINT"
    output_schema = "n BIGINT"
    arity: ClassVar[int] = 1

    def update(self, key: tuple[Any, ...], state: int | None, events: Any) -> Step[int]:
        n = len(events["price"])
        return Step(state=None, outputs=[(n,) * self.arity], counts={"seen": n})


def counting_group(handler: StateHandler) -> HandlerGroup:
    return HandlerGroup(
        {"n": handler}, input_schema=EVENTS, output_schemas={"n": struct(("n", LongType()))}
    )


def test_counts_leave_as_one_row_per_call_after_the_handler_rows():
    run = Run(counting_group(Counting()))
    out = run(BATCH_1)
    n = len(BATCH_1)
    assert out[EMIT].tolist() == ["n", "n#counts"]
    assert out.loc[1, ["_count__n__seen", "_count__n__never"]].tolist() == [n, 0]
    assert out.loc[0, "_count__n__seen"] is None  # a handler row has no counts


def test_a_count_the_handler_does_not_declare_is_refused():
    class Undeclared(Counting):
        counted = ("never",)

    with pytest.raises(ValueError, match="counted seen, which its class does not declare"):
        Run(counting_group(Undeclared()))(BATCH_1)


def test_a_row_of_the_wrong_width_is_refused():
    class Wide(Counting):
        arity = 2

    with pytest.raises(ValueError, match="row of 2 values"):
        Run(counting_group(Wide()))(BATCH_1)


def test_an_update_that_returns_no_step_is_refused_naming_the_handler():
    class Forgetful(Counting):
        def update(self, key: tuple[Any, ...], state: int | None, events: Any) -> Step[int]:
            super().update(key, state, events)  # a `return` forgotten

    with pytest.raises(TypeError, match=r"^handler n: update returned None, not a Step$"):
        Run(counting_group(Forgetful()))(BATCH_1)


@pytest.mark.parametrize("value", [509.7, math.nan, math.inf, np.float64(0.5)])
def test_a_fraction_for_a_whole_number_column_is_refused_not_cut(value):
    class Fractional(Counting):
        def update(self, key: tuple[Any, ...], state: int | None, events: Any) -> Step[int]:
            return Step(state=None, outputs=[(value,)])

    with pytest.raises(ValueError, match=r"^handler n: output column n BIGINT cannot hold "):
        Run(counting_group(Fractional()))(BATCH_1)


@pytest.mark.parametrize("value", [509.0, 7, None, np.int64(3)])
def test_a_whole_number_for_a_whole_number_column_passes(value):
    class Whole(Counting):
        def update(self, key: tuple[Any, ...], state: int | None, events: Any) -> Step[int]:
            return Step(state=None, outputs=[(value,)])

    out = Run(counting_group(Whole()))(BATCH_1)
    assert out.loc[0, "n__n"] is value  # kept as emitted, for Arrow to write


def test_a_timer_without_a_timeout_mode_is_refused_not_dropped():
    # Its expire would never run: the key's state kept for ever, without a word.
    class Timed(Counting):
        def update(self, key: tuple[Any, ...], state: int | None, events: Any) -> Step[int]:
            return Step(state=1, outputs=[(1,)], timer_us=T0_US)

    with pytest.raises(ValueError, match=r"^handler n: a Step with timer_us needs a timeout_mode"):
        Run(counting_group(Timed()))(BATCH_1)


# --- buckets of keys -----------------------------------------------------------------------------


def test_each_key_of_a_bucket_runs_as_if_alone():
    both = {"s": SessionHandler(), "c": CartHandler()}
    mixed = pd.concat(
        [
            BATCH_1,
            events((5, "add_to_cart", 0, "9", 3.0, False), customer="c2"),
            events((7, "add_to_cart", 0, "8", 4.0, True), customer=None),
        ],
        ignore_index=True,
    ).sample(frac=1, random_state=3)  # keys interleaved, as Spark hands a bucket
    out = Run(group(both))(mixed)
    for customer in ("c1", "c2", None):
        rows = mixed[
            mixed["customer_id"].isna() if customer is None else mixed["customer_id"] == customer
        ]
        alone = Run(group(both))(rows)
        for name, handler in (("s", SessionHandler), ("c", CartHandler)):
            schema = OUTPUTS[handler]
            key_rows = [r for r in rows_of(out, name, schema) if r[0] == customer]
            assert key_rows == rows_of(alone, name, schema)
            assert key_rows  # each key emitted
    assert sorted(out[EMIT].tolist()) == ["c", "c", "c", "s", "s", "s"]


def test_a_key_without_rows_expires_when_another_key_brings_the_bucket():
    run = Run(group({"s": SessionHandler()}))
    run(events((0, "add_to_cart", 0, "a", 1.0, False)))
    timer = run.held()[0][1]
    out = run(
        events((400, "product_view", 0, "b", 1.0, False), customer="c2"), watermark_ms=timer + 1
    )
    closed = [r for r in rows_of(out, "s", OUTPUTS[SessionHandler]) if r[0] == "c1"]
    assert [r[5] for r in closed] == ["timeout"]
    assert run.held("c1") == [(False, None)]
    assert run.held("c2")[0][0] is True


def test_a_timed_out_bucket_expires_only_its_due_keys():
    run = Run(group({"s": SessionHandler()}))
    first = events((0, "add_to_cart", 0, "a", 1.0, False))
    later = events((200, "add_to_cart", 0, "b", 1.0, False), customer="c2")
    run(pd.concat([first, later], ignore_index=True))
    c1_timer, c2_timer = run.held("c1")[0][1], run.held("c2")[0][1]
    assert run.timeout == c1_timer < c2_timer
    out = run(timed_out=True, watermark_ms=c1_timer + 1)
    assert out[EMIT].tolist() == ["s"] and out.iloc[0]["s__customer_id"] == "c1"
    assert run.held("c1") == [(False, None)] and run.held("c2") == [(True, c2_timer)]
    assert run.timeout == c2_timer
    run(timed_out=True, watermark_ms=c2_timer + 1)
    assert run.value is None  # no key left: the bucket's state is removed


class PerItem(Counting):
    key = ("customer_id", "item_index")

    def update(self, key: tuple[Any, ...], state: int | None, events: Any) -> Step[int]:
        return Step(state=None, outputs=[(len(events["price"]) * 10 + key[1],)])


def test_a_key_of_two_columns():
    out = Run(counting_group(PerItem()))(BATCH_1)
    # (c1, 0): five rows; (c1, 1): one row.
    assert sorted(out["n__n"].tolist()) == [11, 50]
