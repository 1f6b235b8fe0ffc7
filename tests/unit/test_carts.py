"""Cart rules, without Spark."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from handlers.base import to_us
from handlers.carts import CartHandler, CartState

T0 = datetime(2019, 6, 20, 0, 46, 1)
KEY = ("1028_CId",)


def add(product: str, price: float, seconds: int = 0) -> dict:
    return {
        "event_type": "add_to_cart",
        "product_id": product,
        "price": price,
        "event_time": T0 + timedelta(seconds=seconds),
    }


def buy(product: str, seconds: int = 0) -> dict:
    return {
        "event_type": "purchase",
        "product_id": product,
        "price": 9.0,
        "event_time": T0 + timedelta(seconds=seconds),
    }


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
    ],
)
def test_update(before, events, products, total_price):
    state = CartState(products=before, updated_us=to_us(T0)) if before else None
    step = CartHandler().update(KEY, state, events)
    (row,) = step.outputs
    assert [(p["product_id"], p["price"]) for p in row["products"]] == products
    assert row["total_items"] == len(products)
    assert row["total_price"] == total_price
    assert step.state.products == tuple(products)


def test_no_change_emits_nothing_and_keeps_state_without_timer():
    state = CartState(products=(("a", 1.0),), updated_us=to_us(T0))
    step = CartHandler().update(
        KEY,
        state,
        [{"event_type": "product_view", "product_id": "a", "price": 1.0, "event_time": T0}],
    )
    assert step.outputs == ()
    assert step.state == state
    assert step.timer_us is None


def test_ttl_sets_a_timer_and_expiry_empties_the_cart():
    handler = CartHandler({"cart_ttl": "1 hour"})
    assert handler.timeout_mode == "event_time"
    step = handler.update(KEY, None, [add("a", 1.0)])
    assert step.timer_us == to_us(T0 + timedelta(hours=1))
    expired = handler.expire(KEY, step.state)
    assert expired.state is None
    assert expired.outputs[0]["total_items"] == 0
    assert expired.outputs[0]["updated_at"] == T0 + timedelta(hours=1)


def test_state_round_trips_through_its_row():
    handler = CartHandler()
    state = CartState(products=(("a", 1.5), ("b", 2.0)), updated_us=123)
    assert handler.state_from_row(handler.state_to_row(state)) == state
