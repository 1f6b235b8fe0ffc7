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


MINUTES_10_US = 600_000_000
CART = (("a", 1.0), ("b", 2.0))


@pytest.mark.parametrize(
    ("ttl", "updated_s", "events", "products", "updated_at_s", "kept"),
    [
        # The tester's case: an add more than the TTL after the last change finds the cart
        # emptied, although Spark calls no timeout for a customer with events in the batch.
        ("10 minutes", 0, [add("c", 3.0, 601)], [("c", 3.0)], 601, True),
        # Exactly the TTL is not more than it: the cart is kept (the timer's deadline < watermark).
        ("10 minutes", 0, [add("c", 3.0, 600)], [*CART, ("c", 3.0)], 600, True),
        # A view past the deadline empties too, and writes what the timer writes: the empty cart
        # at its deadline, no state kept.
        ("10 minutes", 0, [view("c", 601)], [], 600, False),
        # A purchase past the deadline buys from the emptied cart: nothing to remove.
        ("10 minutes", 0, [buy("a", 601)], [], 601, True),
        # A change within the batch moves the deadline for the events after it.
        ("10 minutes", 0, [buy("a", 300), add("c", 3.0, 900)], [("b", 2.0), ("c", 3.0)], 900, True),
        ("10 minutes", 0, [buy("a", 300), add("c", 3.0, 901)], [("c", 3.0)], 901, True),
        # A gap longer than the TTL between two events of one batch, on a new cart.
        ("10 minutes", None, [add("c", 3.0, 0), add("d", 4.0, 601)], [("d", 4.0)], 601, True),
        # Emptied by a view, then filled again in the same batch: one row, the new cart.
        ("10 minutes", 0, [view("x", 700), add("c", 3.0, 800)], [("c", 3.0)], 800, True),
        # Emptied twice in one batch: the last emptying is written, at its own deadline.
        ("10 minutes", 0, [add("c", 3.0, 700), view("x", 1301)], [], 1300, False),
        # An event older than the last change (late, out of order across batches) never
        # empties: the cart's time does not go back.
        ("10 minutes", 1000, [add("c", 3.0, 200)], [*CART, ("c", 3.0)], 1000, True),
        # Without a TTL a cart is kept forever.
        ("none", 0, [add("c", 3.0, 36_000)], [*CART, ("c", 3.0)], 36_000, True),
    ],
)
def test_ttl_empties_a_cart_before_a_later_event(
    ttl, updated_s, events, products, updated_at_s, kept
):
    state = None if updated_s is None else CartState(CART, T0_US + updated_s * 1_000_000)
    step = CartHandler({"cart_ttl": ttl}).update(KEY, state, columns(events))
    (row,) = step.outputs
    assert row.products == products
    assert (row.total_items, row.total_price) == (len(products), sum(p for _, p in products))
    assert row.updated_at == T0_US + updated_at_s * 1_000_000
    if kept:
        assert step.state == CartState(tuple(products), row.updated_at)
        assert step.timer_us == (None if ttl == "none" else row.updated_at + MINUTES_10_US)
    else:
        assert step.state is None
        assert step.timer_us is None


def test_ttl_in_update_writes_what_the_timer_writes():
    handler = CartHandler({"cart_ttl": "10 minutes"})
    state = CartState(CART, T0_US)
    assert handler.update(KEY, state, columns([view("x", 601)])) == handler.expire(KEY, state)


def test_no_event_past_the_ttl_leaves_the_cart_to_the_timer():
    handler = CartHandler({"cart_ttl": "10 minutes"})
    state = CartState(CART, T0_US)
    step = handler.update(KEY, state, columns([view("x", 600)]))
    assert (step.state, step.outputs, step.timer_us) == (state, (), T0_US + MINUTES_10_US)
