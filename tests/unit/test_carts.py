"""Cart rules, without Spark."""

from __future__ import annotations

import pytest

from handlers.carts import CartHandler, CartState

# 2019-06-20 00:46:01 UTC in microseconds since the epoch.
T0_US = 1_560_991_561_000_000
HOUR_US = 3_600_000_000
KEY = ("1028_CId",)


def event(kind: str, product: str, price: float, seconds: int) -> dict:
    return {
        "event_type": kind,
        "product_id": product,
        "price": price,
        "event_time": T0_US + seconds * 1_000_000,
    }


def add(product: str, price: float, seconds: int = 0) -> dict:
    return event("add_to_cart", product, price, seconds)


def buy(product: str, seconds: int = 0) -> dict:
    return event("purchase", product, 9.0, seconds)


def view(product: str, seconds: int = 0) -> dict:
    return event("product_view", product, 1.0, seconds)


def columns(events: list[dict]) -> dict[str, list]:
    """The handler's input: its columns, one list each."""
    return {name: [e[name] for e in events] for name in CartHandler.columns}


@pytest.mark.parametrize(
    ("before", "events", "products", "total_price"),
    [
        # The seed's scenario: 116 at 1.0, 117 at 2, 119 at 5 (the last one with a logout).
        (
            (),
            [add("116_PId", 1.0), add("117_PId", 2), add("119_PId", 5, 241)],
            [("116_PId", 1.0), ("117_PId", 2.0), ("119_PId", 5.0)],
            8.0,
        ),
        # A purchase removes one line of that product, the oldest.
        ((("a", 1.0), ("b", 2.0), ("a", 3.0)), [buy("a")], [("b", 2.0), ("a", 3.0)], 5.0),
        # Buying a product that is not in the cart leaves the cart as it is (but is recorded).
        ((("a", 1.0),), [buy("zzz"), add("b", 2.0, 1)], [("a", 1.0), ("b", 2.0)], 3.0),
        # Add then buy in one batch.
        ((), [add("a", 4.0), buy("a", 1)], [], 0.0),
        # Product views in between change nothing.
        ((), [view("x"), add("a", 4.0), view("a", 1)], [("a", 4.0)], 4.0),
    ],
)
def test_update(before, events, products, total_price):
    state = CartState(products=before, updated_us=T0_US) if before else None
    step = CartHandler().update(KEY, state, columns(events))
    (row,) = step.outputs
    assert row.products == products
    assert row.total_items == len(products)
    assert row.total_price == total_price
    assert step.state.products == tuple(products)


def test_rows_are_tuples_in_output_schema_order():
    (row,) = CartHandler().update(KEY, None, columns([add("a", 4.0, 3)])).outputs
    assert tuple(row) == (KEY[0], 1, 4.0, [("a", 4.0)], T0_US + 3_000_000)


def test_no_change_emits_nothing_and_keeps_state_without_timer():
    state = CartState(products=(("a", 1.0),), updated_us=T0_US)
    step = CartHandler().update(KEY, state, columns([view("a")]))
    assert step.outputs == ()
    assert step.state == state
    assert step.timer_us is None


def test_views_alone_make_no_cart():
    step = CartHandler().update(KEY, None, columns([view("a"), view("b", 1)]))
    assert step.outputs == ()
    assert step.state is None


def test_ttl_sets_a_timer_and_expiry_empties_the_cart():
    handler = CartHandler({"cart_ttl": "1 hour"})
    assert handler.timeout_mode == "event_time"
    step = handler.update(KEY, None, columns([add("a", 1.0)]))
    assert step.timer_us == T0_US + HOUR_US
    expired = handler.expire(KEY, step.state)
    assert expired.state is None
    assert expired.outputs[0].total_items == 0
    assert expired.outputs[0].updated_at == T0_US + HOUR_US


def test_state_round_trips_through_its_row():
    handler = CartHandler()
    state = CartState(products=(("a", 1.5), ("b", 2.0)), updated_us=123)
    assert handler.state_from_row(handler.state_to_row(state)) == state
